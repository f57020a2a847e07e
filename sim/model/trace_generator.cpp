#include "model/trace_generator.hpp"

#include "core/error.hpp"
#include "model/gguf_quant.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cctype>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace tiersim::model {
namespace {

// Bounds on what one generated trace may ask for: far above any real run, low enough that each
// step's token count fits its 32-bit field and no op's FLOPs or bytes overflow 64 bits.
constexpr std::uint64_t kMaxBatch = 65'536;
constexpr std::uint64_t kMaxContext = std::uint64_t{1} << 24;  // 16,777,216 tokens
constexpr long double kMaxCount = 4611686018427387904.0L;      // 2^62 FLOPs or bytes for one op
constexpr long double kMaxTensorBytes = 1125899906842624.0L;   // 1 PiB, what the trace reader accepts

// Rejects options that would overflow a step's token count or any op's FLOPs or a tensor's bytes. The
// largest counts are those of the prefill (most new tokens) and of the last decode (longest context).
void check_sizes(const ModelConfig& m, const GenerationOptions& o) {
  if (o.batch == 0 || o.batch > kMaxBatch)
    throw std::invalid_argument("batch must be from 1 to 65,536, got " + std::to_string(o.batch));
  const std::uint64_t context = static_cast<std::uint64_t>(o.prompt_tokens) + o.decode_tokens;
  if (context == 0) throw std::invalid_argument("nothing to generate: prompt and decode are both 0");
  if (context > kMaxContext)
    throw std::invalid_argument("prompt + decode tokens must be at most 16,777,216, got " + std::to_string(context));
  const std::uint64_t step_tokens = static_cast<std::uint64_t>(o.batch) * o.prompt_tokens;
  if (step_tokens > UINT32_MAX)
    throw std::invalid_argument("batch x prompt tokens (the tokens of the prefill step) must be at most "
                                "4,294,967,295, got " + std::to_string(step_tokens));
  using L = long double;
  const L B = o.batch, P = o.prompt_tokens, C = static_cast<L>(context), h = static_cast<L>(m.hidden_size);
  const L qd = static_cast<L>(m.num_attention_heads * m.head_dim), kvd = static_cast<L>(m.num_key_value_heads * m.head_dim);
  // A mixture of experts' MLP width per token (k experts' rows and the router's logits), as the activation
  // workspace counts it; its widest matrices are an expert's and the router.
  const L moe_width = static_cast<L>(m.num_experts_per_tok) * static_cast<L>(m.moe_intermediate_size) + static_cast<L>(m.num_experts);
  const L inter = std::max(static_cast<L>(m.intermediate_size), moe_width), vocab = static_cast<L>(m.vocab_size), a = 4;
  const L T = B * std::max<L>(P, 1);
  const L widest = std::max({h * qd, h * kvd, h * inter, h * static_cast<L>(m.moe_intermediate_size),
                             h * static_cast<L>(m.num_experts)});
  const L keys = std::max(P * (P + 1) / 2, C);  // prefill's causal keys, or the last decode's context
  const L largest_op = std::max({2 * T * widest, 4 * B * qd * keys, 2 * B * h * vocab,
                                 6 * T * (qd + kvd), 5 * T * inter});
  const L kv_tensor = 2 * kvd * a * C * B;
  const L activations = T * (3 * h + qd + 2 * kvd + 3 * inter) * a + B * vocab * 4;
  if (largest_op > kMaxCount || kv_tensor > kMaxTensorBytes || activations > kMaxTensorBytes)
    throw std::invalid_argument("this model with batch " + std::to_string(o.batch) + ", prompt " +
                                std::to_string(o.prompt_tokens) + " and decode " + std::to_string(o.decode_tokens) +
                                " needs a KV cache or activations over 1 PiB or an op over 2^62 FLOPs: reduce them");
}

}  // namespace

using trace::OpKind;
using trace::StepKind;
using trace::TensorAccess;
using trace::TensorKind;

LaunchCounts llamacpp_launch_counts() {
  LaunchCounts c;
  c.norm = 1;
  c.rope = 2;
  c.attention = 3;
  c.matmul = 2;
  c.residual = 1;
  c.mlp_activation = 1;
  c.embedding = 1;
  c.sample = 1;  // the logits' copy back to the host (llama-bench samples nothing)
  return c;
}

LlmTraceGenerator::LlmTraceGenerator(const ModelConfig& model, const GenerationOptions& options,
                                     std::optional<LaunchCounts> launches)
    : model_(model),
      options_(options),
      launches_(launches ? *launches : options.dtype == WeightDtype::Gguf ? llamacpp_launch_counts() : LaunchCounts{}) {
  check_sizes(model_, options_);
  if (options_.fp8_scaled)
    throw InputError("", 0, "--dtype", "fp8_scaled is ComfyUI's scaled fp8 checkpoints of diffusion models; for '" +
                                           model_.name + "' give fp8");
  if ((options_.routing_zipf > 0 || options_.routing_replay) && !model_.is_moe())
    throw InputError("", 0, "--routing", "is for mixture-of-experts models; '" + model_.name + "' is dense");
  if (options_.experts != GenerationOptions::Experts::GroupedMm) {
    if (!model_.is_moe())
      throw InputError("", 0, "--experts-impl", "is for mixture-of-experts models; '" + model_.name + "' is dense");
    if (options_.dtype == WeightDtype::Gguf)
      throw InputError("", 0, "--experts-impl", "is transformers' experts_implementation; a GGUF model runs its experts "
                                                "as llama.cpp's MUL_MAT_ID");
  }
  if (const auto& r = options_.routing_replay) {
    const std::string& f = options_.routing_path;
    if (r->num_experts != model_.num_experts || r->experts_per_token != model_.num_experts_per_tok ||
        r->layers != model_.num_hidden_layers)
      throw InputError(f, 0, "--routing",
                       "routes " + std::to_string(r->num_experts) + " experts, " + std::to_string(r->experts_per_token) +
                           " per token, over " + std::to_string(r->layers) + " layers; '" + model_.name + "' has " +
                           std::to_string(model_.num_experts) + ", " + std::to_string(model_.num_experts_per_tok) +
                           " and " + std::to_string(model_.num_hidden_layers));
    if (r->tokens.size() < options_.batch)
      throw InputError(f, 0, "--routing", "has " + std::to_string(r->tokens.size()) + " sequence(s); --batch is " +
                                              std::to_string(options_.batch));
    const std::uint64_t needed = static_cast<std::uint64_t>(options_.prompt_tokens) + options_.decode_tokens;
    for (std::size_t b = 0; b < options_.batch; ++b)
      if (r->tokens[b] < needed)
        throw InputError(f, 0, "--routing", "sequence " + std::to_string(b) + " routes " + std::to_string(r->tokens[b]) +
                                                " tokens; this run processes " + std::to_string(needed) +
                                                " (prompt + decode)");
  }
  const auto d = options_.dtype;
  const std::uint64_t a = activation_bytes(d);
  const std::uint64_t h = model_.hidden_size;
  const std::uint64_t max_context = static_cast<std::uint64_t>(options_.prompt_tokens) + options_.decode_tokens;

  header_.meta["model"] = model_.name;
  header_.meta["dtype"] = compute_dtype(d);
  header_.meta["weight_dtype"] = dtype_name(options_);
  header_.meta["batch"] = std::to_string(options_.batch);
  header_.meta["prompt_tokens"] = std::to_string(options_.prompt_tokens);
  header_.meta["decode_tokens"] = std::to_string(options_.decode_tokens);
  header_.meta["parameters"] = std::to_string(model_.total_params());
  // Sizes a framework's own memory projection needs (llama.cpp's --fit: logits buffer, default context).
  header_.meta["vocab_size"] = std::to_string(model_.vocab_size);
  header_.meta["hidden_size"] = std::to_string(model_.hidden_size);
  header_.meta["intermediate_size"] = std::to_string(model_.is_moe() ? model_.moe_intermediate_size : model_.intermediate_size);
  if (model_.is_moe()) {
    header_.meta["num_experts"] = std::to_string(model_.num_experts);
    header_.meta["num_experts_per_tok"] = std::to_string(model_.num_experts_per_tok);
    char zipf[64];
    std::snprintf(zipf, sizeof zipf, "zipf s=%g", options_.routing_zipf);
    header_.meta["routing"] = options_.routing_replay
                                  ? "replayed from " + options_.routing_path
                                  : std::string(options_.routing_zipf > 0 ? zipf : "uniform") + ", seed " +
                                        std::to_string(options_.routing_seed);
    if (options_.experts == GenerationOptions::Experts::Eager) header_.meta["experts_implementation"] = "eager";
  }
  if (model_.max_position_embeddings > 0) header_.meta["context_length"] = std::to_string(model_.max_position_embeddings);
  if (options_.ubatch > 0) header_.meta["ubatch"] = std::to_string(options_.ubatch);
  header_.meta["source"] = "generated by sim gen";

  // Bytes of a weight: its params in the weight format, or, for a GGUF file type, in the type llama.cpp's
  // quantisation gives that tensor (gguf_quant.hpp: Q6_K output, more bits for some attn_v/ffn_down, F32 norms).
  using gguf::Role;
  const auto L = static_cast<std::int32_t>(model_.num_hidden_layers);
  gguf::FileTypeFacts facts;
  facts.n_layer = L;
  facts.n_gqa = static_cast<int>(model_.num_attention_heads / std::max<std::uint64_t>(model_.num_key_value_heads, 1));
  facts.is_70b = model_.model_type == "llama" && L == 80;
  facts.tied_output = model_.tie_word_embeddings;
  // A GGUF matrix also keeps its type's name (q4_k): the ops reading it carry it as their dtype, which
  // picks the CPU's measured kernel rate for that type (GPU rates fall back to bf16's).
  auto weight = [&](Role role, std::int32_t layer, std::uint64_t params) -> std::uint64_t {
    pending_type_.clear();
    if (d != WeightDtype::Gguf) return role == Role::Norm ? params * norm_bytes_per_param(d) : matrix_bytes(params, d);
    const gguf::QuantType& type = gguf::tensor_type(options_.gguf, role, layer, facts);
    if (role != Role::Norm)
      for (const char* c = type.name; *c; ++c) pending_type_ += static_cast<char>(std::tolower(static_cast<unsigned char>(*c)));
    return gguf::tensor_bytes(type, params);
  };
  // Tensor names: Hugging Face's module paths, or llama.cpp's (src/llama-arch.cpp LLM_TENSOR_NAMES) for a
  // GGUF file type, as `-ot` regular expressions and llama.cpp's logs name them.
  const bool gguf_names = d == WeightDtype::Gguf;
  auto name = [&](std::int32_t l, const char* hf, const char* ll) {
    if (gguf_names) return "blk." + std::to_string(l) + "." + ll + ".weight";
    return "model.layers." + std::to_string(l) + "." + hf;
  };
  // A weight: from the GGUF file's own tensor of that name when there is one (its type and bytes; its
  // element count must be what the config gives), else from the weight format.
  auto add_weight = [&](Role role, std::int32_t layer, std::uint64_t params, const std::string& tensor_name) {
    if (options_.gguf_file) {
      const std::string& file = options_.gguf_path;
      const gguf::FileTensor* t = options_.gguf_file->find_tensor(tensor_name);
      if (!t) throw InputError(file, 0, tensor_name, "the file has no such tensor, which its architecture needs");
      auto elements = [](const gguf::FileTensor& x) {
        std::uint64_t n = 1;
        for (auto d : x.shape) n *= d;
        return n;
      };
      std::uint64_t n = elements(*t), bytes = t->bytes;
      // A bias is a tensor of its own in the file; the config counts it with its matrix.
      const std::string bias_name = tensor_name.substr(0, tensor_name.size() - 7) + ".bias";
      if (tensor_name.size() > 7 && tensor_name.compare(tensor_name.size() - 7, 7, ".weight") == 0)
        if (const gguf::FileTensor* b = options_.gguf_file->find_tensor(bias_name)) n += elements(*b), bytes += b->bytes;
      if (n != params)
        throw InputError(file, 0, tensor_name,
                         "has " + std::to_string(n) + " weights; the header's hyperparameters give " + std::to_string(params));
      pending_type_ = role == Role::Norm ? std::string() : t->type;
      return add_tensor(TensorKind::Weight, bytes, layer, tensor_name);
    }
    const std::uint64_t bytes = weight(role, layer, params);
    return add_tensor(TensorKind::Weight, bytes, layer, tensor_name);
  };
  embed_ = add_weight(Role::TokenEmbd, -1, model_.embedding_params(), gguf_names ? "token_embd.weight" : "model.embed_tokens");
  for (std::int32_t l = 0; l < L; ++l) {
    LayerTensors t{};
    t.input_norm = add_weight(Role::Norm, l, h, name(l, "input_layernorm", "attn_norm"));
    if (model_.mla()) {
      // Multi-head Latent Attention. llama.cpp (src/llama-model.cpp load_tensors, LLM_ARCH_DEEPSEEK2; names from
      // src/llama-arch.cpp): attn_q_a, attn_q_a_norm, attn_q_b (attn_q without q_lora_rank), attn_kv_a_mqa,
      // attn_kv_a_norm, attn_k_b and attn_v_b (convert_hf_to_gguf.py DeepseekV2Model.modify_tensors splits
      // kv_b_proj into them, k_b transposed, for the absorbed form), attn_output. Hugging Face's are the
      // checkpoint's (transformers' DeepseekV3Attention). llama.cpp's per-tensor quantisation rules for these
      // (llama-quant.cpp; e.g. a K-quant's fallback for attn_k_b's 128-wide rows) are not modelled: the file
      // type's base type.
      if (model_.q_lora_rank > 0) {
        t.q_a = add_weight(Role::AttnQ, l, model_.mla_q_a_params(), name(l, "self_attn.q_a_proj", "attn_q_a"));
        t.q_a_norm = add_weight(Role::Norm, l, model_.q_lora_rank, name(l, "self_attn.q_a_layernorm", "attn_q_a_norm"));
        t.q = add_weight(Role::AttnQ, l, model_.mla_q_b_params(), name(l, "self_attn.q_b_proj", "attn_q_b"));
      } else {
        t.q = add_weight(Role::AttnQ, l, model_.mla_q_b_params(), name(l, "self_attn.q_proj", "attn_q"));
      }
      t.kv_a = add_weight(Role::AttnQ, l, model_.mla_kv_a_params(), name(l, "self_attn.kv_a_proj_with_mqa", "attn_kv_a_mqa"));
      t.kv_a_norm = add_weight(Role::Norm, l, model_.kv_lora_rank, name(l, "self_attn.kv_a_layernorm", "attn_kv_a_norm"));
      if (gguf_names) {
        t.k_b = add_weight(Role::AttnQ, l, model_.mla_k_b_params(), name(l, "", "attn_k_b"));
        t.v_b = add_weight(Role::AttnQ, l, model_.mla_v_b_params(), name(l, "", "attn_v_b"));
      } else {
        t.k_b = t.v_b = add_weight(Role::AttnQ, l, model_.mla_k_b_params() + model_.mla_v_b_params(),
                                   name(l, "self_attn.kv_b_proj", ""));
      }
      t.k = t.v = t.kv_a;
    } else {
      t.q = add_weight(Role::AttnQ, l, model_.q_params(), name(l, "self_attn.q_proj", "attn_q"));
      t.k = add_weight(Role::AttnK, l, model_.kv_params(), name(l, "self_attn.k_proj", "attn_k"));
      t.v = add_weight(Role::AttnV, l, model_.kv_params(), name(l, "self_attn.v_proj", "attn_v"));
    }
    if (model_.qk_norm) {
      t.q_norm = add_weight(Role::Norm, l, model_.head_dim, name(l, "self_attn.q_norm", "attn_q_norm"));
      t.k_norm = add_weight(Role::Norm, l, model_.head_dim, name(l, "self_attn.k_norm", "attn_k_norm"));
    }
    t.o = add_weight(Role::AttnOutput, l, model_.o_params(), name(l, "self_attn.o_proj", "attn_output"));
    if (model_.attention_sinks)
      t.sinks = add_weight(Role::Norm, l, model_.num_attention_heads, name(l, "self_attn.sinks", "attn_sinks"));
    t.post_norm = add_weight(Role::Norm, l, h, name(l, "post_attention_layernorm", "ffn_norm"));
    if (model_.moe_layer(static_cast<std::uint64_t>(l))) {
      // The router, then the experts as the framework holds them: a kind of expert matrix of every expert in one
      // tensor, and an expert's projection reading its slice (a byte range). llama.cpp's GGUF layout:
      // blk.N.ffn_{gate,up,down}_exps.weight, experts on the last axis (llama-model.cpp load_tensors,
      // LLM_ARCH_QWEN3MOE), so -ot patterns (--n-cpu-moe's) match them as llama.cpp's, and op offload copies
      // only the experts used (ggml_backend_sched). transformers 5 (the names and shapes its own models have,
      // tests/fixtures/hf_moe_parameters.jsonl: Qwen3-MoE, Mixtral, DeepSeek-V3 and gpt-oss alike):
      // mlp.experts.gate_up_proj, [experts, 2 x intermediate, hidden] (gpt-oss: [experts, hidden, 2 x intermediate],
      // gate and up columns interleaved, and its biases in gate_up_proj_bias), and mlp.experts.down_proj; the
      // router is mlp.gate (gpt-oss: mlp.router; Mixtral's checkpoints say block_sparse_moe, renamed at load). The
      // trace has one tensor for each (its biases in it): a weight copier (accelerate's hooks) moves the whole
      // tensor, managed memory only the blocks of the slices used.
      const bool gpt_oss = model_.model_type == "gpt_oss";
      t.router = add_weight(Role::Norm, l, model_.router_params(),
                            name(l, gpt_oss ? "mlp.router" : "mlp.gate", "ffn_gate_inp"));
      // deepseek_v3's noaux_tc selection bias: llama.cpp's blk.N.exp_probs_b.bias (LLM_TENSOR_FFN_EXP_PROBS_B, F32),
      // Hugging Face's mlp.gate.e_score_correction_bias (a buffer in transformers 5.17, not a parameter).
      if (model_.expert_score_bias)
        t.score_bias = add_weight(Role::Norm, l, model_.num_experts,
                                  gguf_names ? "blk." + std::to_string(l) + ".exp_probs_b.bias"
                                             : "model.layers." + std::to_string(l) + ".mlp.gate.e_score_correction_bias");
      const std::uint64_t params = model_.expert_matrix_params();
      // One expert's matrix of a kind with its bias, in bytes: MXFP4 where the model is published so (its bias in
      // bf16, in f32 in a GGUF file), else in the weight format like any matrix.
      auto expert_bytes = [&](Role role, std::uint64_t bias) -> std::uint64_t {
        if (model_.expert_weight_bits <= 0) return weight(role, l, params + bias);
        pending_type_ = gguf_names ? "mxfp4" : "";
        return static_cast<std::uint64_t>(std::ceil(static_cast<double>(params) * model_.expert_weight_bits / 8.0)) +
               bias * (gguf_names ? 4 : 2);
      };
      const std::uint64_t E = model_.num_experts;
      if (!gguf_names) {
        const std::uint64_t in = expert_bytes(Role::FfnGate, model_.expert_in_bias());
        const std::uint32_t gate_up = add_tensor(TensorKind::Weight, E * 2 * in, l, name(l, "mlp.experts.gate_up_proj", ""));
        const std::uint64_t down = expert_bytes(Role::FfnDown, model_.expert_out_bias());
        const std::uint32_t down_proj = add_tensor(TensorKind::Weight, E * down, l, name(l, "mlp.experts.down_proj", ""));
        // gate_up_proj[e]'s first half is the gate (chunk(2, dim=-1) of its product); gpt-oss interleaves the two,
        // and either way an expert's gate and up together are its slice, what its one F.linear reads.
        for (std::uint64_t e = 0; e < E; ++e) {
          t.expert_gate.push_back(TensorAccess{gate_up, in, 2 * e * in});
          t.expert_up.push_back(TensorAccess{gate_up, in, (2 * e + 1) * in});
          t.expert_down.push_back(TensorAccess{down_proj, down, e * down});
        }
      } else {
        // One fused tensor per kind; each expert its 1/E share, in the tensor's type.
        auto add_experts = [&](Role role, std::uint64_t bias, const char* kind, std::vector<TensorAccess>& out) {
          const std::string tensor_name = name(l, "", kind);
          std::uint64_t per = 0;
          if (!options_.gguf_file) {
            per = expert_bytes(role, bias);
          } else {
            // A real file's tensor: {n_embd, n_ff_exp, n_expert} with the header's widths, its own type and bytes.
            const std::string& file = options_.gguf_path;
            const gguf::FileTensor* f = options_.gguf_file->find_tensor(tensor_name);
            if (!f) throw InputError(file, 0, tensor_name, "the file has no such tensor, which its architecture needs");
            std::uint64_t n = 1;
            for (auto x : f->shape) n *= x;
            if (f->shape.size() != 3 || f->shape[2] != E || n != (params + bias) * E || f->bytes % E != 0)
              throw InputError(file, 0, tensor_name,
                               "expected " + std::to_string(E) + " experts of " + std::to_string(params + bias) +
                                   " weights on its last axis (the header's expert_count and widths), got " +
                                   std::to_string(n) + " weights in " + std::to_string(f->shape.size()) + " dimensions");
            pending_type_ = f->type;
            per = f->bytes / E;
          }
          const std::uint32_t id = add_tensor(TensorKind::Weight, E * per, l, tensor_name);
          for (std::uint64_t e = 0; e < E; ++e) out.push_back(TensorAccess{id, per, e * per});
        };
        add_experts(Role::FfnGate, model_.expert_in_bias(), "ffn_gate_exps", t.expert_gate);
        add_experts(Role::FfnUp, model_.expert_in_bias(), "ffn_up_exps", t.expert_up);
        add_experts(Role::FfnDown, model_.expert_out_bias(), "ffn_down_exps", t.expert_down);
      }
      header_.version = 2;  // the experts' slices are byte ranges
      t.gate = t.up = t.down = t.router;
      // deepseek's shared experts, one MLP of n_shared_experts x moe_intermediate_size: llama.cpp's ffn_*_shexp
      // (not matched by --cpu-moe's ffn_(up|down|gate)_exps pattern: they stay with the layer), Hugging Face's
      // mlp.shared_experts.*_proj.
      if (model_.n_shared_experts > 0) {
        t.shexp_gate = add_weight(Role::FfnGate, l, model_.shared_expert_matrix_params(),
                                  name(l, "mlp.shared_experts.gate_proj", "ffn_gate_shexp"));
        t.shexp_up = add_weight(Role::FfnUp, l, model_.shared_expert_matrix_params(),
                                name(l, "mlp.shared_experts.up_proj", "ffn_up_shexp"));
        t.shexp_down = add_weight(Role::FfnDown, l, model_.shared_expert_matrix_params(),
                                  name(l, "mlp.shared_experts.down_proj", "ffn_down_shexp"));
      }
    } else {
      t.gate = add_weight(Role::FfnGate, l, model_.mlp_matrix_params(), name(l, "mlp.gate_proj", "ffn_gate"));
      t.up = add_weight(Role::FfnUp, l, model_.mlp_matrix_params(), name(l, "mlp.up_proj", "ffn_up"));
      t.down = add_weight(Role::FfnDown, l, model_.mlp_matrix_params(), name(l, "mlp.down_proj", "ffn_down"));
    }
    layers_.push_back(t);
  }
  final_norm_ = add_weight(Role::Norm, L, h, gguf_names ? "output_norm.weight" : "model.norm");
  // A GGUF file of a tied model has no output matrix; llama.cpp loads token_embd a second time as the
  // output layer's (llama_model_loader::create_tensor, TENSOR_DUPLICATED: a new tensor wherever the
  // output layer's buffer differs from the embedding's), so the trace has it as a tensor of its own.
  if (model_.tie_word_embeddings && gguf_names) {
    pending_type_ = weight_type_[embed_];
    lm_head_ = add_tensor(TensorKind::Weight, header_.tensors[embed_].bytes, L, "output.weight (token_embd duplicated)");
  } else {
    lm_head_ = model_.tie_word_embeddings
                   ? embed_
                   : add_weight(Role::Output, L, model_.embedding_params(), gguf_names ? "output.weight" : "lm_head");
  }
  // MLA: llama.cpp caches the latent and the rotary key, kv_lora_rank + qk_rope_head_dim elements (576 for
  // DeepSeek-V3) per token and layer, with V a view of K (src/llama-kv-cache.cpp: has_v = !is_mla; converter:
  // head_count_kv 1, key_length kv_lora_rank + qk_rope_head_dim); transformers caches every head's expanded
  // key and value (DeepseekV3Attention: past_key_values.update(key_states, value_states)).
  const std::uint64_t kv_per_token = model_.mla() ? model_.mla_kv_elements(gguf_names) * a
                                                  : 2 * model_.num_key_value_heads * model_.head_dim * a;
  // A sliding-window layer keeps the last sliding_window tokens only.
  for (std::int32_t l = 0; l < L; ++l) {
    const std::uint64_t tokens = model_.sliding(static_cast<std::uint64_t>(l)) ? std::min(max_context, model_.sliding_window)
                                                                                : max_context;
    layers_[static_cast<std::size_t>(l)].kv =
        add_tensor(TensorKind::KvCache, kv_per_token * tokens * options_.batch, l, "kv_cache.layer" + std::to_string(l));
  }
  // Live activations of the largest step: residual stream, q/k/v, attention output, the MLP's
  // gate/up/act buffers, and fp32 logits of the last token. An estimate of PyTorch's working set.
  const std::uint32_t step_prompt = options_.ubatch == 0 ? options_.prompt_tokens
                                                         : std::min(options_.prompt_tokens, options_.ubatch);
  const std::uint64_t max_step_tokens = static_cast<std::uint64_t>(options_.batch) * std::max<std::uint32_t>(step_prompt, 1);
  const std::uint64_t mlp_width = model_.is_moe() ? model_.num_experts_per_tok * model_.moe_intermediate_size + model_.num_experts
                                                  : model_.intermediate_size;
  const std::uint64_t qd = model_.num_attention_heads * model_.head_dim, kvd = model_.num_key_value_heads * model_.head_dim;
  // At least the widest single access a step makes to it (build_step: an RMSNorm's passes over h, or Qwen3's q_norm
  // over every head, at 2a + 16 bytes an element; RoPE's 5.5a over q and k): Qwen3-0.6B's q_norm is wider than the
  // sum below.
  std::uint64_t per_token = std::max({(3 * h + qd + 2 * kvd + 3 * mlp_width) * a, std::max(h, qd) * (2 * a + 16),
                                      (qd + kvd) * 11 * a / 2});
  if (model_.mla()) {
    // MLA's widest rows: the absorbed q (heads x (kv_lora_rank + rope)) or the q projection, kv_b_proj's expanded
    // keys and values, and the MLP: a dense layer's, or k routed experts', the router's and the shared experts'.
    const std::uint64_t H = model_.num_attention_heads, rope = model_.qk_rope_head_dim;
    const std::uint64_t q_w = H * std::max(model_.qk_nope_head_dim + rope, model_.kv_lora_rank + rope);
    const std::uint64_t kv_w = H * (model_.qk_nope_head_dim + model_.v_head_dim);
    const std::uint64_t mlp_w = std::max(model_.intermediate_size, mlp_width + model_.n_shared_experts * model_.moe_intermediate_size);
    per_token = std::max({(3 * h + q_w + 2 * kv_w + 3 * mlp_w) * a, std::max(h, q_w) * (2 * a + 16), (q_w + kv_w) * 11 * a / 2});
  }
  act_ = add_tensor(TensorKind::Activation, max_step_tokens * per_token + options_.batch * model_.vocab_size * 4, -1,
                    "activations");
}

std::uint32_t LlmTraceGenerator::add_tensor(TensorKind kind, std::uint64_t bytes, std::int32_t layer, std::string name) {
  weight_type_.push_back(kind == TensorKind::Weight ? pending_type_ : std::string());
  pending_type_.clear();
  return trace::append_tensor(header_, kind, bytes, layer, std::move(name));
}

std::uint32_t GenerationOptions::prefill_steps() const {
  if (prompt_tokens == 0) return 0;
  if (ubatch == 0) return 1;
  return (prompt_tokens + ubatch - 1) / ubatch;
}

bool LlmTraceGenerator::next(trace::Step& out) {
  const std::uint64_t prefills = options_.prefill_steps();
  const std::uint64_t total = prefills + static_cast<std::uint64_t>(options_.decode_tokens);
  if (steps_done_ >= total) return false;
  if (steps_done_ < prefills) {
    const std::uint64_t chunk = options_.ubatch == 0 ? options_.prompt_tokens : options_.ubatch;
    const std::uint64_t done = steps_done_ * chunk;
    const auto tokens = static_cast<std::uint32_t>(std::min<std::uint64_t>(chunk, options_.prompt_tokens - done));
    build_step(out, tokens, done, StepKind::Prefill, steps_done_ + 1 == prefills);
  } else {
    const std::uint64_t decoded = steps_done_ - prefills;
    build_step(out, 1, options_.prompt_tokens + decoded, StepKind::Decode, true);
  }
  ++steps_done_;
  return true;
}

void LlmTraceGenerator::build_step(trace::Step& out, std::uint32_t new_tokens, std::uint64_t context_before,
                                   StepKind kind, bool logits) {
  const auto d = options_.dtype;
  const std::uint64_t a = activation_bytes(d);
  const std::uint64_t B = options_.batch;
  std::uint64_t T = B * new_tokens;  // token rows through every projection (fewer after llama.cpp's cut, below)
  const std::uint64_t h = model_.hidden_size;
  const std::uint64_t qd = model_.num_attention_heads * model_.head_dim;
  const std::uint64_t kvd = model_.num_key_value_heads * model_.head_dim;
  const std::uint64_t inter = model_.intermediate_size;
  const auto& tensors = header_.tensors;
  // A product over up to 8 token rows is llama.cpp's matrix-vector kernel (and a GEMV to transformers' cuBLAS).
  const auto matmul_over = [](std::uint64_t rows) { return rows <= 8 ? OpKind::Gemv : OpKind::Gemm; };

  out.kind = kind;
  out.tokens = static_cast<std::uint32_t>(T);
  out.ops.clear();
  auto act = [&](std::uint64_t elems) { return TensorAccess{act_, elems * a}; };
  auto whole = [&](std::uint32_t id) { return TensorAccess{id, tensors[id].bytes}; };
  auto add = [&](OpKind k, std::int32_t layer, std::uint64_t flops, std::vector<TensorAccess> reads,
                 std::vector<TensorAccess> writes, std::uint32_t launches) {
    trace::append_op(out, k, layer, flops, std::move(reads), std::move(writes), launches);
  };
  // llama.cpp's matrix-vector kernel (ggml-cuda/mmvq.cu mul_mat_vec_q, and mmvf for F16/F32; up to 8 tokens): one
  // thread block per output row, which a runtime's gpu_gemv_rows prices. The op just appended gets its grid.
  // Above 8 tokens its MMQ (cuBLAS for F16), priced by the weight's rows (gpu_gemm_rows): the op gets them.
  auto mmv_grid = [&](std::uint64_t rows, std::uint64_t tokens) {
    const auto n = static_cast<std::uint32_t>(std::min<std::uint64_t>(rows, 0x7fffffffu));
    if (d != WeightDtype::Gguf) return;
    if (matmul_over(tokens) == OpKind::Gemv) out.ops.back().blocks = n;
    else out.ops.back().rows = n;
  };
  auto linear = [&](std::int32_t layer, std::uint32_t w, std::uint64_t in, std::uint64_t outd) {
    add(matmul_over(T), layer, 2 * T * in * outd, {whole(w), act(T * in)}, {act(T * outd)}, launches_.matmul);
    out.ops.back().dtype = weight_type_[w];
    mmv_grid(outd, T);
  };
  // Bytes that eager Hugging Face kernels move per element (transformers' modeling_qwen3.py and
  // modeling_llama.py, the same code): RMSNorm upcasts to fp32 and makes a pass per operation --
  // .to(float32), pow, mean, * rsqrt, .to(input dtype), * weight: reads 2a + 4f, writes 2a + 3f;
  // apply_rotary_pos_emb is q*cos + rotate_half(q)*sin, rotate_half a negation of one half and a cat:
  // reads 5.5a, writes 4.5a per element of q and k; the MLP's act_fn(gate) * up is silu then a
  // multiply: reads 3a, writes 2a; attention's output is made contiguous again (.transpose(1, 2)
  // .contiguous()): one more read and write of it.
  const auto bytes = [&](std::uint64_t elems, std::uint64_t per_elem_times_2) {
    return TensorAccess{act_, elems * per_elem_times_2 / 2};
  };
  constexpr std::uint64_t f = 4;  // fp32
  auto norm = [&](std::int32_t layer, std::uint32_t w, std::uint64_t rows, std::uint64_t width) {
    const std::uint64_t n = rows * width;
    add(OpKind::Norm, layer, 4 * n, {whole(w), bytes(n, 2 * (2 * a + 4 * f))}, {bytes(n, 2 * (2 * a + 3 * f))},
        launches_.norm);
  };

  // A lookup reads one row of the table per token, at the table's storage width.
  const std::uint64_t embed_rows = std::min(
      tensors[embed_].bytes,
      d == WeightDtype::Gguf ? tensors[embed_].bytes / std::max<std::uint64_t>(model_.vocab_size, 1) * T
                             : matrix_bytes(T * h, d));
  add(OpKind::Embedding, -1, 0, {TensorAccess{embed_, embed_rows}}, {act(T * h)}, launches_.embedding);

  // A mixture-of-experts MLP: the router's logits, softmax and top-k; then every expert some token row was
  // routed to runs its gate, up, activation and down on those rows (its whole matrices read once); then
  // the weighted sum. llama.cpp runs each kind as one MUL_MAT_ID over all experts (one launch). transformers 5
  // (Qwen3MoeTopKRouter, then Qwen3MoeExperts under its experts_implementation, integrations/moe.py) runs the
  // routing as 6 kernels (softmax, top-k's two, sum, divide, cast) and then, for grouped_mm, 27 more per layer
  // around two torch._grouped_mm calls (the fused gate_up and the down projection; sorting, gathers, a histogram
  // and scan for the offsets, the activation, the weighting and the scatter back), no host sync; for eager, a mask
  // (zeros, one_hot, sum, greater, nonzero: 9 kernels and a host sync), then per expert hit 14 kernels and 5 host
  // syncs: `expert_idx == num_experts` and indexing by the CUDA scalar expert_idx (expert_mask, gate_up_proj,
  // down_proj) each copy it to the host, torch.where's nonzero another; F.linear on the fused gate_up, silu, the
  // product, F.linear on down, the weighting, index_add_. Counts and syncs as the profiler saw them on an H100
  // (transformers 5.17, experiments/validate/moe_experts_kernels.py, results/validation/moe-hf/kernels: 34 and 128
  // kernels per layer with the router's Linear, 0 and 41 device-to-host copies at 8 experts hit). Measured on
  // Qwen3-MoE; the other families' routers (mixtral, gpt_oss, deepseek_v3) are assumed to launch as many.
  constexpr std::uint32_t kHfRouting = 6, kGroupedBefore = 20, kGroupedAfter = 3;
  constexpr std::uint32_t kEagerMask = 9, kEagerSelect = 7, kEagerSelectSyncs = 4, kEagerCombine = 3;
  auto moe_mlp = [&](std::int32_t l, const LayerTensors& t, std::uint32_t tokens, std::uint64_t position) {
    const std::uint64_t E = model_.num_experts, k = model_.num_experts_per_tok, ie = model_.moe_intermediate_size;
    const bool transformers = d != WeightDtype::Gguf;
    const bool eager = transformers && options_.experts == GenerationOptions::Experts::Eager;
    linear(l, t.router, h, E);
    // The routing decision (softmax or sigmoid, top-k, the weights' normalisation): which experts the ops below read.
    add(OpKind::Router, l, 5 * T * E, {act(T * E)}, {act(2 * T * k)}, transformers ? kHfRouting : launches_.mlp_activation);
    if (t.score_bias >= 0) out.ops.back().reads.push_back(whole(static_cast<std::uint32_t>(t.score_bias)));
    const std::vector<std::uint32_t> rows = route(l, tokens, position);
    // One projection of one expert on its n rows; `launches` 0 when it runs in the kernel of the op before it.
    auto project = [&](std::uint64_t e, const TensorAccess& w, std::uint64_t in, std::uint64_t outd, std::uint32_t launches) {
      const std::uint64_t n = rows[e];
      add(matmul_over(n), l, 2 * n * in * outd, {w, act(n * in)}, {act(n * outd)}, launches);
      out.ops.back().dtype = weight_type_[w.tensor];
    };
    if (eager) {
      add(OpKind::Other, l, 0, {act(T * k)}, {act(T * k + E)}, kEagerMask);
      out.ops.back().syncs = 1;  // expert_hit's nonzero
      for (std::uint64_t e = 0; e < E; ++e) {
        if (rows[e] == 0) continue;
        const std::uint64_t n = rows[e];
        add(OpKind::Other, l, 0, {act(T * k + n * h)}, {act(n * h)}, kEagerSelect);
        out.ops.back().syncs = kEagerSelectSyncs;
        project(e, t.expert_gate[e], h, ie, 1);  // gate and up: one F.linear on the fused gate_up_proj[e]
        project(e, t.expert_up[e], h, ie, 0);
        add(OpKind::Elementwise, l, 5 * n * ie, {act(3 * n * ie)}, {act(2 * n * ie)}, 2);
        out.ops.back().syncs = 1;  // down_proj[expert_idx]
        project(e, t.expert_down[e], ie, h, 1);
        add(OpKind::Elementwise, l, 2 * n * h, {act(2 * n * h + T * h)}, {act(T * h)}, kEagerCombine);
      }
    } else {
      // llama.cpp's MUL_MAT_ID, or transformers' torch._grouped_mm: one kernel a projection over every expert hit
      // (transformers fuses gate and up into one).
      if (transformers) add(OpKind::Other, l, 0, {act(T * k * (h + 2))}, {act(T * k * h)}, kGroupedBefore);
      auto experts = [&](const std::vector<TensorAccess>& ids, std::uint64_t in, std::uint64_t outd, bool launch) {
        bool first = true;
        for (std::uint64_t e = 0; e < E; ++e) {
          if (rows[e] == 0) continue;
          project(e, ids[e], in, outd, launch && first ? launches_.matmul : 0);
          first = false;
        }
      };
      experts(t.expert_gate, h, ie, true);
      experts(t.expert_up, h, ie, !transformers);
      add(OpKind::Elementwise, l, 5 * T * k * ie, {act(3 * T * k * ie)}, {act(2 * T * k * ie)}, launches_.mlp_activation);
      experts(t.expert_down, ie, h, true);
      if (transformers) add(OpKind::Elementwise, l, 2 * T * k * h, {act(T * k * h)}, {act(T * h)}, kGroupedAfter);
      // else the weighted sum of the experts' rows and the residual add (ggml fuses them)
      else add(OpKind::Elementwise, l, 2 * T * k * h, {act(T * k * h + T * h)}, {act(T * h)}, launches_.residual);
    }
    if (transformers) add(OpKind::Elementwise, l, T * h, {act(2 * T * h)}, {act(T * h)}, launches_.residual);  // residual
    if (!model_.mla() || model_.n_shared_experts == 0) return;
    // deepseek's shared experts on every token (llm_build_deepseek2: build_ffn of ffn_*_shexp, then added to the
    // routed experts' output).
    const std::uint64_t si = model_.n_shared_experts * ie;
    linear(l, t.shexp_gate, h, si);
    linear(l, t.shexp_up, h, si);
    add(OpKind::Elementwise, l, 5 * T * si, {act(3 * T * si)}, {act(2 * T * si)}, launches_.mlp_activation);
    linear(l, t.shexp_down, si, h);
    add(OpKind::Elementwise, l, T * h, {act(2 * T * h)}, {act(T * h)}, launches_.residual);
  };

  // Multi-head Latent Attention. llama.cpp (src/models/deepseek2.cpp llm_build_deepseek2, the is_mla path its
  // GGUFs with attn_k_b/attn_v_b take, for prompt and decode alike): q (through q_a, its norm and q_b), the latent
  // and rotary key (kv_a, the latent's norm), rope on q_pe and k_pe, q_nope absorbed by attn_k_b per head into the
  // latent (kv_lora_rank), then attention as MQA over a cache of kv_lora_rank + rope per token (V the latent, a view
  // of K), its output mapped back per head by attn_v_b (build_attn's v_mla) and attn_output. transformers
  // (DeepseekV3Attention.forward): kv_b_proj expands this step's latent to every head's key (nope) and value, and
  // attention runs per head over the cached expanded keys (nope + rope) and values.
  auto mla_attention = [&](std::int32_t l, const LayerTensors& t, std::uint64_t keys_attended, std::uint64_t context_after) {
    const std::uint64_t H = model_.num_attention_heads, nope = model_.qk_nope_head_dim, rope = model_.qk_rope_head_dim;
    const std::uint64_t kvl = model_.kv_lora_rank, vd = model_.v_head_dim, ql = model_.q_lora_rank;
    const bool absorbed = d == WeightDtype::Gguf;
    if (ql > 0) {
      linear(l, t.q_a, h, ql);
      norm(l, t.q_a_norm, T, ql);
      linear(l, t.q, ql, H * (nope + rope));
    } else {
      linear(l, t.q, h, H * (nope + rope));
    }
    linear(l, t.kv_a, h, kvl + rope);
    norm(l, t.kv_a_norm, T, kvl);
    const std::uint64_t roped = T * (H * rope + rope);
    add(OpKind::Rope, l, 6 * roped, {bytes(roped, 11 * a)}, {bytes(roped, 9 * a)}, launches_.rope);
    if (absorbed) {
      add(matmul_over(T), l, 2 * T * H * nope * kvl, {whole(t.k_b), act(T * H * nope)}, {act(T * H * kvl)}, launches_.matmul);
      out.ops.back().dtype = weight_type_[t.k_b];
    } else {
      linear(l, t.k_b, kvl, H * (nope + vd));
    }
    // Per head: scores over kq elements, the weighted sum over vw.
    const std::uint64_t kq = absorbed ? kvl + rope : nope + rope, vw = absorbed ? kvl : vd;
    const std::uint64_t kv_token = model_.mla_kv_elements(absorbed) * a;
    add(OpKind::Attention, l, 2 * B * H * (kq + vw) * keys_attended,
        {TensorAccess{t.kv, B * context_after * kv_token}, act(T * H * kq)}, {TensorAccess{t.kv, T * kv_token}, act(T * H * vw)},
        launches_.attention);
    if (absorbed) {
      add(matmul_over(T), l, 2 * T * H * kvl * vd, {whole(t.v_b), act(T * H * kvl)}, {act(T * H * vd)}, launches_.matmul);
      out.ops.back().dtype = weight_type_[t.v_b];
    }
    linear(l, t.o, H * vd, h);
  };

  // The layer's MLP after its attention: the experts where the layer has them, else the dense gated MLP.
  auto mlp = [&](std::int32_t l, std::size_t li, const LayerTensors& t, std::uint32_t tokens, std::uint64_t position) {
    if (model_.moe_layer(li)) {
      moe_mlp(l, t, tokens, position);
      return;
    }
    linear(l, t.gate, h, inter);
    linear(l, t.up, h, inter);
    add(OpKind::Elementwise, l, 5 * T * inter, {act(3 * T * inter)}, {act(2 * T * inter)}, launches_.mlp_activation);
    linear(l, t.down, inter, h);
    add(OpKind::Elementwise, l, T * h, {act(2 * T * h)}, {act(T * h)}, launches_.residual);
  };

  // The layer after its attention's output projection: the residual add, the FFN norm and the MLP. llama.cpp's last
  // layer (src/models/qwen3.cpp, deepseek2.cpp and the other builders: `if (il == n_layer - 1 && inp_out_ids)`,
  // ggml_get_rows of the attention output and the residual) keeps from here on only the rows whose logits are output,
  // one per sequence at the prompt's last micro-batch and in decode, none at the micro-batches before it (ggml skips
  // the empty nodes): those ops carry their rows (`tokens`). transformers runs every row through every layer.
  // False when the step ends here (no rows left).
  auto after_attention = [&](std::int32_t l, std::size_t li, const LayerTensors& t) {
    std::uint32_t ffn_tokens = new_tokens;
    std::uint64_t ffn_position = context_before;
    std::size_t cut = out.ops.size();
    if (d == WeightDtype::Gguf && li + 1 == layers_.size() && new_tokens > 1) {
      if (!logits) return false;
      T = B;
      ffn_tokens = 1;
      ffn_position = context_before + new_tokens - 1;
    }
    add(OpKind::Elementwise, l, T * h, {act(2 * T * h)}, {act(T * h)}, launches_.residual);
    norm(l, t.post_norm, T, h);
    mlp(l, li, t, ffn_tokens, ffn_position);
    if (ffn_tokens != new_tokens)
      for (; cut < out.ops.size(); ++cut) out.ops[cut].tokens = static_cast<std::uint32_t>(T);
    return true;
  };

  const std::uint64_t kv_token_bytes = 2 * kvd * a;
  for (std::size_t li = 0; li < layers_.size(); ++li) {
    const auto l = static_cast<std::int32_t>(li);
    const LayerTensors& t = layers_[li];
    norm(l, t.input_norm, T, h);
    if (model_.mla()) {
      mla_attention(l, t, new_tokens * context_before + new_tokens * (new_tokens + 1) / 2, context_before + new_tokens);
      if (!after_attention(l, li, t)) break;
      continue;
    }
    linear(l, t.q, h, qd);
    linear(l, t.k, h, kvd);
    linear(l, t.v, h, kvd);
    if (model_.qk_norm) {
      norm(l, t.q_norm, T * model_.num_attention_heads, model_.head_dim);
      norm(l, t.k_norm, T * model_.num_key_value_heads, model_.head_dim);
    }
    add(OpKind::Rope, l, 6 * T * (qd + kvd), {bytes(T * (qd + kvd), 11 * a)}, {bytes(T * (qd + kvd), 9 * a)},
        launches_.rope);
    // Causal attention over the cache: token i of this step attends to context_before + i keys, or to the last
    // sliding_window of them in a sliding-window layer.
    std::uint64_t keys_attended = new_tokens * context_before + new_tokens * (new_tokens + 1) / 2;
    std::uint64_t context_after = context_before + new_tokens;
    if (model_.sliding(li)) {
      const std::uint64_t w = model_.sliding_window, n = new_tokens;
      const std::uint64_t unclipped = w > context_before ? std::min(n, w - context_before) : 0;  // tokens that see < w keys
      keys_attended = unclipped * context_before + unclipped * (unclipped + 1) / 2 + (n - unclipped) * w;
      context_after = std::min(context_after, w);
    }
    // The step's new keys and values written to the cache: a sliding-window layer keeps the last window of them.
    std::uint64_t written = T * kv_token_bytes;
    if (model_.sliding(li)) written = B * std::min<std::uint64_t>(new_tokens, model_.sliding_window) * kv_token_bytes;
    std::vector<TensorAccess> attention_reads{TensorAccess{t.kv, B * context_after * kv_token_bytes}, act(2 * T * qd)};
    if (t.sinks >= 0) attention_reads.push_back(whole(static_cast<std::uint32_t>(t.sinks)));
    add(OpKind::Attention, l, 4 * B * qd * keys_attended, std::move(attention_reads),
        {TensorAccess{t.kv, written}, act(2 * T * qd)}, launches_.attention);
    linear(l, t.o, qd, h);
    if (!after_attention(l, li, t)) break;
  }
  // A micro-batch before a prompt's last computes no logits (llama.cpp outputs the last token only).
  if (!logits) return;
  const auto last = static_cast<std::int32_t>(layers_.size());
  norm(last, final_norm_, T, h);
  // generate() keeps the logits of the last token of each sequence only.
  add(OpKind::Gemv, last, 2 * B * h * model_.vocab_size, {whole(lm_head_), act(B * h)}, {TensorAccess{act_, B * model_.vocab_size * 4}},
      launches_.matmul);
  out.ops.back().dtype = weight_type_[lm_head_];
  mmv_grid(model_.vocab_size, B);
  add(OpKind::Sample, last, B * model_.vocab_size, {TensorAccess{act_, B * model_.vocab_size * 4}}, {act(B)},
      launches_.sample);
}

namespace {
// SplitMix64's finaliser: a counter-based generator (the same inputs give the same draws on every run).
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
}  // namespace

std::vector<std::uint32_t> LlmTraceGenerator::route(std::int32_t layer, std::uint32_t new_tokens,
                                                    std::uint64_t position) const {
  const std::uint64_t E = model_.num_experts, k = model_.num_experts_per_tok;
  std::vector<std::uint32_t> rows(E, 0);
  std::vector<char> marked(E, 0);
  std::vector<std::uint64_t> picked;
  if (const auto& table = options_.routing_replay) {
    for (std::uint64_t b = 0; b < options_.batch; ++b)
      for (std::uint64_t i = 0; i < new_tokens; ++i) {
        const std::uint16_t* e = table->at(b, position + i, static_cast<std::uint32_t>(layer));
        for (std::uint32_t j = 0; j < table->experts_per_token; ++j) ++rows[e[j]];
      }
    return rows;
  }
  if (options_.routing_zipf > 0) {
    // Skewed: the layer's experts in a seeded order (Fisher-Yates on the hash), the r-th (from 1) with
    // weight 1 / r^s; k distinct per token by drawing on the cumulative weights and redrawing a repeat.
    std::vector<std::uint64_t> order(E);
    for (std::uint64_t e = 0; e < E; ++e) order[e] = e;
    std::uint64_t shuffle = mix(options_.routing_seed ^ mix(0x5eedULL ^ static_cast<std::uint64_t>(layer)));
    for (std::uint64_t e = E; e > 1; --e) {
      shuffle = mix(shuffle);
      std::swap(order[e - 1], order[shuffle % e]);
    }
    std::vector<double> cumulative(E);
    double total = 0;
    for (std::uint64_t r = 0; r < E; ++r)
      cumulative[r] = (total += std::pow(static_cast<double>(r + 1), -options_.routing_zipf));
    for (std::uint64_t b = 0; b < options_.batch; ++b)
      for (std::uint64_t i = 0; i < new_tokens; ++i) {
        std::uint64_t state = mix(options_.routing_seed ^ mix(static_cast<std::uint64_t>(layer) ^ mix(b ^ mix(position + i))));
        picked.clear();
        std::uint64_t tries = 0;
        while (picked.size() < k) {
          state = mix(state);
          const double u = static_cast<double>(state >> 11) * 0x1.0p-53 * total;
          auto r = static_cast<std::uint64_t>(std::upper_bound(cumulative.begin(), cumulative.end(), u) - cumulative.begin());
          r = std::min(r, E - 1);
          // After many repeats (the popular experts taken, little weight left), the most popular left.
          if (marked[order[r]] && ++tries > 64 * E)
            for (r = 0; marked[order[r]]; ++r) {
            }
          if (!marked[order[r]]) {
            marked[order[r]] = 1;
            picked.push_back(order[r]);
          }
        }
        for (const std::uint64_t e : picked) {
          ++rows[e];
          marked[e] = 0;
        }
      }
    return rows;
  }
  // Uniform: k distinct experts per token, each uniform over those not yet chosen (rejection on a bitmap);
  // when k is more than half the experts, the E - k left out are drawn instead, so a token costs
  // O(min(k, E-k)).
  const bool complement = 2 * k > E;
  const std::uint64_t draws = complement ? E - k : k;
  for (std::uint64_t b = 0; b < options_.batch; ++b)
    for (std::uint64_t i = 0; i < new_tokens; ++i) {
      std::uint64_t state = mix(options_.routing_seed ^ mix(static_cast<std::uint64_t>(layer) ^ mix(b ^ mix(position + i))));
      picked.clear();
      while (picked.size() < draws) {
        state = mix(state);
        const std::uint64_t e = state % E;
        if (!marked[e]) {
          marked[e] = 1;
          picked.push_back(e);
        }
      }
      if (complement) {
        for (std::uint64_t e = 0; e < E; ++e) rows[e] += marked[e] ? 0 : 1;
      } else {
        for (const std::uint64_t e : picked) ++rows[e];
      }
      for (const std::uint64_t e : picked) marked[e] = 0;
    }
  return rows;
}

void set_dtype(GenerationOptions& options, const std::string& name) {
  // tiersim's own names first (bf16 is a PyTorch checkpoint's bf16, BF16 a GGUF file's: F32 norms).
  options.fp8_scaled = name == "fp8_scaled";
  try {
    options.dtype = parse_weight_dtype(options.fp8_scaled ? "fp8" : name);
    options.gguf.clear();
    return;
  } catch (const std::invalid_argument&) {
  }
  if (!gguf::is_file_type(name))
    throw std::invalid_argument(name == "gguf" ? "give the GGUF file type (Q4_K_M, ...), not 'gguf'"
                                               : "unknown dtype '" + name +
                                                     "' (fp32, bf16, fp16, fp8, fp8_scaled, int8, q4, or a GGUF file type: F16, "
                                                     "BF16, Q8_0, Q6_K, Q5_K_M, Q5_K_S, Q4_K_M, Q4_K_S, Q4_0, Q3_K_M, "
                                                     "Q2_K, IQ4_XS)");
  options.dtype = WeightDtype::Gguf;
  options.gguf = gguf::file_type_name(name);
}

const char* to_string(GenerationOptions::Experts e) {
  return e == GenerationOptions::Experts::Eager ? "eager" : "grouped_mm";
}

bool parse_experts(const std::string& name, GenerationOptions::Experts& out) {
  if (name == "grouped_mm") out = GenerationOptions::Experts::GroupedMm;
  else if (name == "eager") out = GenerationOptions::Experts::Eager;
  else return false;
  return true;
}

std::string dtype_name(const GenerationOptions& options) {
  if (options.dtype == WeightDtype::Fp8 && options.fp8_scaled) return "fp8_scaled";
  return options.dtype == WeightDtype::Gguf ? options.gguf : to_string(options.dtype);
}

}  // namespace tiersim::model
