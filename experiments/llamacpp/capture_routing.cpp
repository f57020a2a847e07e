// Captures the experts a llama.cpp MoE model routes each token to, as a tiersim routing file
// (sim/model/routing_file.hpp: {"tiersim_routing": 1, ..., "sequences": [[[[e, ...] x layers] x tokens] x seqs]}),
// by running the model the way llama-bench does (tools/llama-bench/llama-bench.cpp at the pinned commit:
// test_prompt's random tokens in n_batch chunks, test_gen's one random token per decode from an empty cache)
// and reading llama.cpp's own selection: the graph node "ffn_moe_topk-<layer>" (src/llama-graph.cpp
// build_moe_ffn: cb(selected_experts, "ffn_moe_topk", il)), through the scheduler's eval callback.
//
//   capture_routing -m MODEL.gguf -o OUT.json (--prompt N | --gen N) [--sequences S] [--seed X] [-ngl N]
//
// --prompt N: S sequences of an N-token prompt each (one llama_decode per 512 tokens, as llama-bench's
// n_batch/n_ubatch defaults give); --gen N: S sequences of N single-token decodes. Every sequence starts from
// an empty cache. The random tokens come from std::rand() seeded with --seed (llama-bench never seeds: the
// tokens differ from its, their distribution is the same). Capturing splits the graph at every topk node,
// so this run is not timed; the routing does not depend on the split.
#include "llama.h"
#include "ggml.h"
#include "ggml-backend.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Capture {
  int layers = 0, experts = 0, used = 0;
  // per sequence: [token][layer][j]
  std::vector<std::vector<int32_t>> sequences;
  int64_t base_token = 0;  // position of the current ubatch's first token in the sequence
  int64_t ubatch_tokens = 0;
  bool failed = false;
};

bool on_tensor(ggml_tensor* t, bool ask, void* user) {
  auto* c = static_cast<Capture*>(user);
  static const char kName[] = "ffn_moe_topk-";
  if (std::strncmp(t->name, kName, sizeof kName - 1) != 0) return ask ? false : true;
  if (ask) return true;
  const int layer = std::atoi(t->name + sizeof kName - 1);
  if (t->type != GGML_TYPE_I32 || t->ne[0] != c->used || layer < 0 || layer >= c->layers) {
    std::fprintf(stderr, "capture_routing: unexpected %s: type %d, ne0 %lld\n", t->name, int(t->type), (long long)t->ne[0]);
    c->failed = true;
    return false;
  }
  const int64_t n_tokens = t->ne[1];
  c->ubatch_tokens = n_tokens;
  auto& seq = c->sequences.back();
  const size_t need = size_t(c->base_token + n_tokens) * c->layers * c->used;
  if (seq.size() < need) seq.resize(need, -1);
  std::vector<int32_t> row(c->used);
  for (int64_t i = 0; i < n_tokens; ++i) {
    ggml_backend_tensor_get(t, row.data(), size_t(i) * t->nb[1], row.size() * sizeof(int32_t));
    int32_t* dst = seq.data() + (size_t(c->base_token + i) * c->layers + layer) * c->used;
    for (int j = 0; j < c->used; ++j) {
      if (row[j] < 0 || row[j] >= c->experts) {
        std::fprintf(stderr, "capture_routing: %s token %lld: expert %d out of range\n", t->name, (long long)i, row[j]);
        c->failed = true;
        return false;
      }
      dst[j] = row[j];
    }
  }
  return true;
}

int meta_int(const llama_model* m, const std::string& key) {
  char buf[128];
  if (llama_model_meta_val_str(m, key.c_str(), buf, sizeof buf) < 0) {
    std::fprintf(stderr, "capture_routing: the model has no '%s'\n", key.c_str());
    std::exit(1);
  }
  return std::atoi(buf);
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "capture_routing: %s\nusage: capture_routing -m MODEL.gguf -o OUT.json (--prompt N | --gen N) "
                       "[--sequences S] [--seed X] [-ngl N]\n", why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, out_path;
  int prompt = 0, gen = 0, sequences = 1, ngl = 99;
  unsigned seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "-m") model_path = next();
    else if (a == "-o") out_path = next();
    else if (a == "--prompt") prompt = std::atoi(next());
    else if (a == "--gen") gen = std::atoi(next());
    else if (a == "--sequences") sequences = std::atoi(next());
    else if (a == "--seed") seed = unsigned(std::strtoul(next(), nullptr, 10));
    else if (a == "-ngl") ngl = std::atoi(next());
    else usage(("unknown argument " + a).c_str());
  }
  if (model_path.empty() || out_path.empty()) usage("-m and -o are required");
  if ((prompt > 0) == (gen > 0)) usage("give exactly one of --prompt N and --gen N (N > 0)");
  if (sequences < 1) usage("--sequences must be at least 1");

  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = ngl;
  llama_model* model = llama_model_load_from_file(model_path.c_str(), mp);
  if (!model) { std::fprintf(stderr, "capture_routing: cannot load %s\n", model_path.c_str()); return 1; }

  char arch[64];
  if (llama_model_meta_val_str(model, "general.architecture", arch, sizeof arch) < 0) {
    std::fprintf(stderr, "capture_routing: no general.architecture\n");
    return 1;
  }
  Capture cap;
  cap.layers = llama_model_n_layer(model);
  cap.experts = meta_int(model, std::string(arch) + ".expert_count");
  cap.used = meta_int(model, std::string(arch) + ".expert_used_count");

  const int n_tokens = prompt > 0 ? prompt : gen;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = uint32_t(n_tokens);
  cp.n_batch = 2048;  // llama-bench's defaults
  cp.n_ubatch = 512;
  cp.cb_eval = on_tensor;
  cp.cb_eval_user_data = &cap;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) { std::fprintf(stderr, "capture_routing: cannot create a context\n"); return 1; }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int32_t n_vocab = llama_vocab_n_tokens(vocab);
  const bool add_bos = llama_vocab_get_add_bos(vocab);

  std::srand(seed);
  for (int s = 0; s < sequences; ++s) {
    llama_memory_clear(llama_get_memory(ctx), true);
    cap.sequences.emplace_back();
    cap.base_token = 0;
    if (prompt > 0) {
      std::vector<llama_token> tokens(cp.n_batch);
      for (int done = 0; done < prompt;) {
        const int n = std::min<int>(prompt - done, int(cp.n_batch));
        tokens[0] = done == 0 && add_bos ? llama_vocab_bos(vocab) : std::rand() % n_vocab;
        for (int i = 1; i < n; ++i) tokens[i] = std::rand() % n_vocab;
        // One llama_decode per ubatch (llama-bench hands llama_decode n_batch tokens, which it splits into
        // the same ubatches), so base_token is the callback's first token.
        for (int u = 0; u < n; u += int(cp.n_ubatch)) {
          const int m = std::min<int>(n - u, int(cp.n_ubatch));
          // Every token an output: llama.cpp otherwise runs the last layer's FFN on the output rows alone
          // (inp_out_ids), and the routing file needs every token's experts in every layer.
          llama_batch batch = llama_batch_init(m, 0, 1);
          for (int i = 0; i < m; ++i) {
            batch.token[i] = tokens[u + i];
            batch.pos[i] = llama_pos(cap.base_token + i);
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = 0;
            batch.logits[i] = 1;
          }
          batch.n_tokens = m;
          const int rc = llama_decode(ctx, batch);
          llama_batch_free(batch);
          if (rc != 0 || cap.failed) {
            std::fprintf(stderr, "capture_routing: decode failed\n");
            return 1;
          }
          cap.base_token += m;
        }
        done += n;
      }
    } else {
      llama_token token = add_bos ? llama_vocab_bos(vocab) : std::rand() % n_vocab;
      for (int i = 0; i < gen; ++i) {
        if (llama_decode(ctx, llama_batch_get_one(&token, 1)) != 0 || cap.failed) {
          std::fprintf(stderr, "capture_routing: decode failed\n");
          return 1;
        }
        llama_synchronize(ctx);
        cap.base_token += 1;
        token = std::rand() % n_vocab;
      }
    }
    const auto& seq = cap.sequences.back();
    for (size_t i = 0; i < seq.size(); ++i)
      if (seq[i] < 0) { std::fprintf(stderr, "capture_routing: a token/layer was never captured\n"); return 1; }
    if (seq.size() != size_t(n_tokens) * cap.layers * cap.used) {
      std::fprintf(stderr, "capture_routing: captured %zu ids, expected %zu\n", seq.size(),
                   size_t(n_tokens) * cap.layers * cap.used);
      return 1;
    }
  }

  FILE* f = std::fopen(out_path.c_str(), "w");
  if (!f) { std::fprintf(stderr, "capture_routing: cannot write %s\n", out_path.c_str()); return 1; }
  std::fprintf(f, "{\"tiersim_routing\": 1, \"num_experts\": %d, \"experts_per_token\": %d, \"layers\": %d,\n",
               cap.experts, cap.used, cap.layers);
  std::fprintf(f, " \"source\": \"llama.cpp ffn_moe_topk, capture_routing %s %d tokens x %d, seed %u, model %s\",\n",
               prompt > 0 ? "--prompt" : "--gen", n_tokens, sequences, seed, model_path.c_str());
  std::fprintf(f, " \"sequences\": [");
  for (int s = 0; s < sequences; ++s) {
    const auto& seq = cap.sequences[s];
    std::fprintf(f, "%s\n  [", s ? "," : "");
    for (int t = 0; t < n_tokens; ++t) {
      std::fprintf(f, "%s[", t ? ",\n   " : "");
      for (int l = 0; l < cap.layers; ++l) {
        std::fprintf(f, "%s[", l ? "," : "");
        for (int j = 0; j < cap.used; ++j)
          std::fprintf(f, "%s%d", j ? "," : "", seq[(size_t(t) * cap.layers + l) * cap.used + j]);
        std::fprintf(f, "]");
      }
      std::fprintf(f, "]");
    }
    std::fprintf(f, "]");
  }
  std::fprintf(f, "]}\n");
  if (std::fclose(f) != 0) { std::fprintf(stderr, "capture_routing: write error on %s\n", out_path.c_str()); return 1; }

  // What a ubatch of the first sequence used, layer by layer: distinct experts (uniform routing of 512 tokens
  // x 8 over 128 experts would use all 128).
  const auto& seq = cap.sequences[0];
  std::printf("capture_routing: %s, %d layers, %d experts (%d per token), %d tokens x %d sequences -> %s\n",
              arch, cap.layers, cap.experts, cap.used, n_tokens, sequences, out_path.c_str());
  const int span = std::min<int>(n_tokens, prompt > 0 ? int(cp.n_ubatch) : n_tokens);
  std::printf("distinct experts over the first %d tokens, by layer:", span);
  for (int l = 0; l < cap.layers; ++l) {
    std::vector<char> seen(cap.experts, 0);
    int distinct = 0;
    for (int t = 0; t < span; ++t)
      for (int j = 0; j < cap.used; ++j) {
        const int e = seq[(size_t(t) * cap.layers + l) * cap.used + j];
        if (!seen[e]) { seen[e] = 1; ++distinct; }
      }
    std::printf(" %d", distinct);
  }
  std::printf("\n");
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
