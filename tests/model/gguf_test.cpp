// GGUF file types as llama.cpp quantises (sim/model/gguf_quant.cpp): the per-tensor mix against the rules
// of llama_tensor_get_type_impl, and whole-file sizes against files llama.cpp wrote and published.
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "model/gguf_file.hpp"
#include "model/gguf_quant.hpp"
#include "model/model_config.hpp"
#include "model/trace_generator.hpp"

namespace tiersim::model {
namespace {

using gguf::Role;

TEST(Gguf, Q4KMGivesSomeAttnVAndFfnDownLayersQ6KAndTheOutputQ6K) {
  gguf::FileTypeFacts f;
  f.n_layer = 36;  // use_more_bits: i < 4, i >= 31, or (i - 4) % 3 == 2
  for (int i = 0; i < 36; ++i) {
    const bool more = i < 4 || i >= 31 || (i - 4) % 3 == 2;
    EXPECT_STREQ(gguf::tensor_type("Q4_K_M", Role::AttnV, i, f).name, more ? "Q6_K" : "Q4_K") << i;
    EXPECT_STREQ(gguf::tensor_type("Q4_K_M", Role::FfnDown, i, f).name, more ? "Q6_K" : "Q4_K") << i;
    EXPECT_STREQ(gguf::tensor_type("Q4_K_M", Role::AttnQ, i, f).name, "Q4_K") << i;
  }
  EXPECT_STREQ(gguf::tensor_type("Q4_K_M", Role::Output, 36, f).name, "Q6_K");
  EXPECT_STREQ(gguf::tensor_type("Q4_K_M", Role::TokenEmbd, -1, f).name, "Q4_K");
  EXPECT_STREQ(gguf::tensor_type("q8_0", Role::Output, 36, f).name, "Q8_0");
  EXPECT_STREQ(gguf::tensor_type("Q4_K_M", Role::Norm, 3, f).name, "F32");
  f.tied_output = true;  // a tied embedding is quantised as the output
  EXPECT_STREQ(gguf::tensor_type("Q4_K_M", Role::TokenEmbd, -1, f).name, "Q6_K");
  EXPECT_STREQ(gguf::tensor_type("Q4_K_S", Role::AttnV, 3, f).name, "Q5_K");
  EXPECT_STREQ(gguf::tensor_type("Q4_K_S", Role::AttnV, 4, f).name, "Q4_K");
  EXPECT_EQ(gguf::tensor_bytes(gguf::base_type("Q4_K_M"), 256 * 10), 1440u);  // 144 B per 256 weights
  EXPECT_FALSE(gguf::is_file_type("Q4_K_XL"));
}

// Bytes of every weight of a model generated in a GGUF file type.
double gguf_weight_bytes(const std::string& model, const std::string& type) {
  const auto config = load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/" + model + ".json");
  GenerationOptions g;
  set_dtype(g, type);
  g.prompt_tokens = 0;
  g.decode_tokens = 1;
  LlmTraceGenerator gen(config, g);
  double bytes = 0;
  // A tied model's output matrix is token_embd loaded twice by llama.cpp, not a tensor of the file.
  for (const auto& t : gen.header().tensors)
    if (t.kind == trace::TensorKind::Weight && t.name != "output.weight (token_embd duplicated)") bytes += static_cast<double>(t.bytes);
  return bytes;
}

TEST(Gguf, WholeFilesAreThePublishedSizes) {
  // bartowski's llama.cpp quantisations (b5200; sizes in GB as listed, a file also holds a few MB of
  // tokenizer and metadata): huggingface.co/bartowski/Qwen_Qwen3-4B-GGUF and .../Qwen_Qwen3-8B-GGUF.
  struct Row {
    const char* model;
    const char* type;
    double gb;
  };
  for (const Row r : {Row{"qwen3-4b", "BF16", 8.05}, Row{"qwen3-4b", "Q8_0", 4.28}, Row{"qwen3-4b", "Q6_K", 3.31},
                      Row{"qwen3-4b", "Q5_K_M", 2.89}, Row{"qwen3-4b", "Q5_K_S", 2.82}, Row{"qwen3-4b", "Q4_K_M", 2.50},
                      Row{"qwen3-4b", "Q4_K_S", 2.38}, Row{"qwen3-8b", "BF16", 16.39}, Row{"qwen3-8b", "Q8_0", 8.71},
                      Row{"qwen3-8b", "Q6_K", 6.73}}) {
    const double ours = gguf_weight_bytes(r.model, r.type) / 1e9;
    EXPECT_NEAR(ours, r.gb, 0.006 * r.gb) << r.model << " " << r.type;
  }
}

// A mixture of experts against a published file's own load log: unsloth's Qwen3-30B-A3B-GGUF Q4_K_M as mainline
// llama.cpp loaded it (a log posted 2025-06-10 in ikawrakow/ik_llama.cpp#514: "type f32: 241 tensors, type q4_K: 289
// tensors, type q6_K: 49 tensors", "file size = 17.28 GiB (4.86 BPW)"; an imatrix quantisation, whose types are the
// file type's mix). tiersim's generated Q4_K_M: the same tensors per type (each layer's three fused
// expert tensors one tensor each, ffn_down_exps Q6_K in the use_more_bits layers like attn_v) and the same size.
TEST(Gguf, AMixtureOfExpertsHasThePublishedFilesTypesAndSize) {
  const auto config = load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen3-30b-a3b.json");
  GenerationOptions g;
  set_dtype(g, "Q4_K_M");
  g.prompt_tokens = 1;
  g.decode_tokens = 0;
  LlmTraceGenerator gen(config, g);
  trace::Step step;
  ASSERT_TRUE(gen.next(step));
  const auto& tensors = gen.header().tensors;
  std::map<std::uint32_t, std::string> type_of;  // a matrix's type, as the ops reading it carry it
  for (const auto& op : step.ops)
    for (const auto& r : op.reads)
      if (tensors[r.tensor].kind == trace::TensorKind::Weight && !op.dtype.empty()) type_of[r.tensor] = op.dtype;
  std::map<std::string, int> count;
  double bytes = 0;
  for (const auto& t : tensors) {
    if (t.kind != trace::TensorKind::Weight) continue;
    bytes += static_cast<double>(t.bytes);
    std::string type = type_of.count(t.id) ? type_of[t.id] : "f32";
    // The embedding table is read by a row lookup, whose op carries no type: Q4_K is 144 bytes per 256 weights.
    if (t.name == "token_embd.weight" && t.bytes * 256 == config.embedding_params() * 144) type = "q4_k";
    ++count[type];
  }
  EXPECT_EQ(count["f32"], 241);
  EXPECT_EQ(count["q4_k"], 289);
  EXPECT_EQ(count["q6_k"], 49);
  EXPECT_EQ(count.size(), 3u);
  EXPECT_NEAR(bytes / 1073741824.0, 17.28, 0.005);
}

TEST(Gguf, ItsNamesAreWeightFormatsAndReadBack) {
  GenerationOptions g;
  set_dtype(g, "q4_k_m");
  EXPECT_EQ(g.dtype, WeightDtype::Gguf);
  EXPECT_EQ(dtype_name(g), "Q4_K_M");
  set_dtype(g, "bf16");
  EXPECT_EQ(dtype_name(g), "bf16");
  EXPECT_THROW(set_dtype(g, "Q4_K_XL"), std::invalid_argument);
  EXPECT_THROW(set_dtype(g, "gguf"), std::invalid_argument);
}

}  // namespace
}  // namespace tiersim::model

namespace tiersim::model {
namespace {

// A trace from a .gguf header: each weight is the file's tensor of that llama.cpp name, with its type
// and bytes (a bias counted with its matrix); a tied file gets token_embd again as the output.
TEST(GgufModel, EveryWeightIsTheFilesOwnTensor) {
  for (const char* name : {"qwen3-tiny", "llama-untied", "qwen2-bias-v2", "qwen3moe-tiny"}) {
    const std::string path = std::string(TIERSIM_SOURCE_DIR) + "/tests/fuzz/corpus/gguf_header/" + name + ".gguf";
    auto header = std::make_shared<gguf::FileHeader>(gguf::read_header_file(path));
    GenerationOptions g;
    g.dtype = WeightDtype::Gguf;
    g.gguf = "GGUF";
    g.gguf_file = header;
    g.gguf_path = path;
    g.prompt_tokens = 0;
    g.decode_tokens = 1;
    LlmTraceGenerator gen(gguf::model_config(*header, path), g);
    std::uint64_t file_bytes = 0, trace_bytes = 0;
    for (const auto& t : header->tensors) file_bytes += t.bytes;
    int matched = 0;
    for (const auto& t : gen.header().tensors) {
      if (t.kind != trace::TensorKind::Weight) continue;
      if (t.name == "output.weight (token_embd duplicated)") {
        EXPECT_EQ(t.bytes, header->find_tensor("token_embd.weight")->bytes) << name;
        continue;
      }
      const auto* f = header->find_tensor(t.name);  // experts too: the trace keeps the file's fused tensors
      ASSERT_NE(f, nullptr) << name << " " << t.name;
      const std::string bias = t.name.substr(0, t.name.size() - 7) + ".bias";
      const auto* b = header->find_tensor(bias);
      EXPECT_EQ(t.bytes, f->bytes + (b ? b->bytes : 0)) << name << " " << t.name;
      trace_bytes += t.bytes;
      ++matched;
    }
    EXPECT_EQ(trace_bytes, file_bytes) << name << ": every tensor of the file is in the trace once";
    EXPECT_GT(matched, 10) << name;
    trace::Step step;
    ASSERT_TRUE(gen.next(step));
    for (const auto& op : step.ops) {
      // The router (ffn_gate_inp, F32) is priced as norms are, without a weight type; every other product has one.
      bool router = false;
      for (const auto& r : op.reads) router |= gen.header().tensors[r.tensor].name.find("ffn_gate_inp") != std::string::npos;
      if (op.kind == trace::OpKind::Gemv && !router) { EXPECT_FALSE(op.dtype.empty()) << name; }
    }
  }
}

}  // namespace
}  // namespace tiersim::model
