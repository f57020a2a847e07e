// DeepSeek-V3 (model_type deepseek_v3): its published config.json read as is, its parameter count against the published
// one, the KV cache of Multi-head Latent Attention as llama.cpp and transformers keep it, shared experts, the dense
// first layers, --n-cpu-moe's placement of the routed experts, and errors naming the key.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "core/error.hpp"
#include "model/model_config.hpp"
#include "model/trace_generator.hpp"
#include "support/run_sim.hpp"

namespace tiersim::model {
namespace {

const std::string kPath = std::string(TIERSIM_SOURCE_DIR) + "/traces/models/deepseek-v3.json";
ModelConfig v3() { return load_model_config(kPath); }

// Routed experts a token does not use: (layers past the dense ones) x (experts - k) x gate, up, down.
std::uint64_t inactive(const ModelConfig& m) {
  return (m.num_hidden_layers - m.first_k_dense_replace) * (m.num_experts - m.num_experts_per_tok) * 3 *
         m.expert_matrix_params();
}

TEST(DeepSeek, V3sPublishedConfigGivesItsPublishedSize) {
  const ModelConfig m = v3();
  ASSERT_TRUE(m.mla());
  EXPECT_EQ(m.num_experts, 256u);
  EXPECT_EQ(m.num_experts_per_tok, 8u);
  EXPECT_EQ(m.n_shared_experts, 1u);
  EXPECT_EQ(m.first_k_dense_replace, 3u);
  EXPECT_TRUE(m.expert_score_bias);
  EXPECT_FALSE(m.moe_layer(2));
  EXPECT_TRUE(m.moe_layer(3));
  // deepseek-ai/DeepSeek-V3 README_WEIGHTS.md: main model "Total parameters: 671B" (the MTP module's 11.5 B
  // excluded, as llama.cpp excludes it). Every matrix, norm, router and selection bias of the 61 layers, both
  // vocabulary tables and the final norm:
  EXPECT_EQ(m.total_params(), 671'026'419'200u);
  // "Activation parameters: 36.7B (including 0.9B for Embedding and 0.9B for the output Head)". Counting 8 of 256
  // routed experts and every other weight gives 37.55 B; without the input table (a lookup) 36.63 B. The published
  // figure's exact accounting is not given; the difference (under 0.1 B from the second) is reported, not tuned.
  const std::uint64_t active = m.total_params() - inactive(m);
  EXPECT_EQ(active, 37'552'297'472u);
  EXPECT_NEAR(static_cast<double>(active - m.embedding_params()) / 1e9, 36.7, 0.1);
}

TEST(DeepSeek, KvCacheIsTheLatentUnderLlamaCppAndExpandedUnderTransformers) {
  const ModelConfig m = v3();
  // llama.cpp: kv_lora_rank + qk_rope_head_dim = 576 f16 elements per token and layer, V a view of K.
  EXPECT_EQ(m.mla_kv_elements(true), 576u);
  // transformers' DynamicCache: 128 heads x (128 + 64 key, 128 value).
  EXPECT_EQ(m.mla_kv_elements(false), 128u * 320u);
  GenerationOptions o;
  o.prompt_tokens = 100;
  o.decode_tokens = 28;
  set_dtype(o, "Q4_K_M");
  LlmTraceGenerator g(m, o);
  std::map<std::string, const trace::Tensor*> by_name;
  for (const auto& t : g.header().tensors) by_name[t.name] = &t;
  ASSERT_TRUE(by_name.count("kv_cache.layer60"));
  EXPECT_EQ(by_name["kv_cache.layer60"]->bytes, 128u * 576u * 2u);  // 1,152 bytes a token and layer
  for (const char* n : {"blk.0.attn_q_a.weight", "blk.0.attn_q_a_norm.weight", "blk.0.attn_q_b.weight",
                        "blk.0.attn_kv_a_mqa.weight", "blk.0.attn_kv_a_norm.weight", "blk.0.attn_k_b.weight",
                        "blk.0.attn_v_b.weight", "blk.0.attn_output.weight", "blk.0.ffn_gate.weight",
                        "blk.3.ffn_gate_inp.weight", "blk.3.exp_probs_b.bias", "blk.3.ffn_up_exps.weight",
                        "blk.60.ffn_down_shexp.weight"})
    EXPECT_TRUE(by_name.count(n)) << n;
  EXPECT_FALSE(by_name.count("blk.2.ffn_gate_inp.weight"));  // a dense layer
  EXPECT_FALSE(by_name.count("blk.61.attn_norm.weight"));    // no MTP layer
  // A decode step's attention reads the whole cache so far (101 tokens) and 128 heads x (576 + 512) per key.
  trace::Step prefill, decode;
  ASSERT_TRUE(g.next(prefill));
  ASSERT_TRUE(g.next(decode));
  int attention = 0;
  for (const auto& op : decode.ops)
    if (op.kind == trace::OpKind::Attention) {
      ++attention;
      EXPECT_EQ(op.reads.front().bytes, 101u * 576u * 2u);
      EXPECT_EQ(op.flops, 2u * 128u * (576u + 512u) * 101u);
    }
  EXPECT_EQ(attention, 61);
  // bf16 (transformers): kv_b_proj in one tensor, the expanded cache.
  set_dtype(o, "bf16");
  LlmTraceGenerator hf(m, o);
  std::map<std::string, std::uint64_t> bytes;
  for (const auto& t : hf.header().tensors) bytes[t.name] = t.bytes;
  EXPECT_EQ(bytes["kv_cache.layer0"], 128u * 128u * 320u * 2u);
  EXPECT_EQ(bytes["model.layers.0.self_attn.kv_b_proj"], 512u * 128u * 256u * 2u);
  EXPECT_EQ(bytes["model.layers.3.mlp.shared_experts.gate_proj"], 7168u * 2048u * 2u);
}

// A GGUF (Q4_K_M) trace of DeepSeek-V3 as llama.cpp runs it.
GenerationOptions gguf(std::uint32_t prompt, std::uint32_t decode) {
  GenerationOptions o;
  o.prompt_tokens = prompt;
  o.decode_tokens = decode;
  set_dtype(o, "Q4_K_M");
  return o;
}

TEST(DeepSeek, SharedExpertsRunOnEveryTokenAndRoutedOnesByTheRouting) {
  const ModelConfig m = v3();
  LlmTraceGenerator g(m, gguf(0, 3));
  const auto& h = g.header();
  trace::Step s;
  while (g.next(s)) {
    std::map<std::int32_t, int> routed, shared, dense;
    for (const auto& op : s.ops)
      for (const auto& r : op.reads) {
        const std::string& n = h.tensors[r.tensor].name;
        if (n.find("ffn_gate_exps") != std::string::npos) ++routed[op.layer];
        if (n.find("ffn_gate_shexp") != std::string::npos) ++shared[op.layer];
        if (n.find(".ffn_gate.weight") != std::string::npos) ++dense[op.layer];
      }
    EXPECT_EQ(routed.size(), 58u);
    for (const auto& [layer, n] : routed) EXPECT_EQ(n, 8) << layer;
    EXPECT_EQ(shared.size(), 58u);
    EXPECT_EQ(dense.size(), 3u);
    EXPECT_EQ(dense.count(0) + dense.count(1) + dense.count(2), 3u);
  }
}

// llama.cpp's deepseek2 builder cuts its last layer to the output rows too (`il == n_layer - 1 && inp_out_ids`): a
// 64-token prompt routes 64 tokens' experts in layer 59 and one token's 8 in layer 60, whose FFN ops carry 1 row.
TEST(DeepSeek, TheLastLayersFfnRunsOnTheOutputRowUnderLlamaCpp) {
  const ModelConfig m = v3();
  LlmTraceGenerator g(m, gguf(64, 0));
  const auto& h = g.header();
  trace::Step s;
  ASSERT_TRUE(g.next(s));
  std::map<std::int32_t, std::set<std::uint64_t>> experts;
  int cut = 0;
  for (const auto& op : s.ops) {
    if (op.tokens > 0) {
      EXPECT_EQ(op.layer, 60);
      EXPECT_EQ(op.tokens, 1u);
      ++cut;
    }
    for (const auto& r : op.reads)
      if (h.tensors[r.tensor].name.find("ffn_gate_exps") != std::string::npos && r.bytes > 0)
        experts[op.layer].insert(r.offset / r.bytes);
  }
  EXPECT_GT(cut, 0);
  EXPECT_EQ(experts[60].size(), 8u);
  EXPECT_GT(experts[59].size(), 8u);
}

// --n-cpu-moe N: the routed experts of the first N layers in host memory (the dense first layers have none to move);
// shared experts, attention and the router stay with the layer on the GPU.
TEST(DeepSeek, NCpuMoePutsTheFirstLayersRoutedExpertsOnTheCpu) {
  const std::string run = "run --model traces/models/deepseek-v3.json --dtype Q4_K_M --policy llamacpp "
                          "--hw h100-sxm+server-ddr5-4800+ram768 --ngl 99 --prompt 16 --decode 4 --ctx-size 4096 ";
  // 55: what leaves an H100 room for the last 6 layers' experts (10 would leave 330 GiB of them on it).
  const auto most = testing::run_sim(run + "--n-cpu-moe 55");
  ASSERT_EQ(most.code, 0) << most.out;
  // Layers 3..54 have routed experts (0..2 are dense): 52 x gate, up, down (each all 256 experts); no shared expert
  // matches.
  EXPECT_NE(most.out.find("156 tensors"), std::string::npos) << most.out;
  EXPECT_NE(most.out.find("placed by 55 pattern(s)"), std::string::npos) << most.out;
  const auto all = testing::run_sim(run + "--cpu-moe");
  ASSERT_EQ(all.code, 0) << all.out;
  EXPECT_NE(all.out.find("174 tensors"), std::string::npos) << all.out;  // 58 x 3
  auto tps = [&](const std::string& extra) {
    const auto r = testing::run_sim(run + extra + " --json", false);
    EXPECT_EQ(r.code, 0) << r.out;
    return r.code == 0 ? nlohmann::json::parse(r.out)["tps"].get<double>() : 0.0;
  };
  EXPECT_GT(tps("--n-cpu-moe 55"), tps("--cpu-moe"));
}

TEST(DeepSeek, FieldsAreCheckedByName) {
  std::ifstream in(kPath);
  const nlohmann::json base = nlohmann::json::parse(in);
  auto error_key = [&](const std::function<void(nlohmann::json&)>& edit) -> std::string {
    nlohmann::json j = base;
    edit(j);
    try {
      parse_model_config(j.dump(2), "d.json");
    } catch (const InputError& e) {
      return e.key();
    }
    return "(accepted)";
  };
  EXPECT_EQ(error_key([](auto&) {}), "(accepted)");
  EXPECT_EQ(error_key([](auto& j) { j["moe_layer_freq"] = 2; }), "moe_layer_freq");
  EXPECT_EQ(error_key([](auto& j) { j["num_key_value_heads"] = 8; }), "num_key_value_heads");
  EXPECT_EQ(error_key([](auto& j) { j["topk_method"] = "random"; }), "topk_method");
  EXPECT_EQ(error_key([](auto& j) { j["scoring_func"] = "relu"; }), "scoring_func");
  EXPECT_EQ(error_key([](auto& j) { j["quantization_config"]["quant_method"] = "awq"; }), "quantization_config");
  EXPECT_EQ(error_key([](auto& j) { j["qk_head_dim"] = 128; }), "qk_head_dim");
  EXPECT_EQ(error_key([](auto& j) { j["head_dim"] = 128; }), "head_dim");
  EXPECT_EQ(error_key([](auto& j) { j["attention_bias"] = true; }), "attention_bias");
  EXPECT_EQ(error_key([](auto& j) { j["first_k_dense_replace"] = 62; }), "first_k_dense_replace");
  EXPECT_EQ(error_key([](auto& j) { j["num_experts_per_tok"] = 300; }), "num_experts_per_tok");
  EXPECT_EQ(error_key([](auto& j) { j.erase("kv_lora_rank"); }), "kv_lora_rank");
  EXPECT_EQ(error_key([](auto& j) { j["n_routed_experts"] = 4096; }), "n_routed_experts");
  // qwen3_moe's name for the experts, and a deepseek field in another family.
  EXPECT_EQ(error_key([](auto& j) { j["num_experts"] = 256; }), "num_experts");
  EXPECT_EQ(error_key([](auto& j) { j["model_type"] = "qwen3_moe"; }), "quantization_config");
  // The multi-token-prediction layer is read and left out: the same model with or without it.
  nlohmann::json no_mtp = base;
  no_mtp["num_nextn_predict_layers"] = 0;
  EXPECT_EQ(parse_model_config(no_mtp.dump(), "d.json").total_params(), v3().total_params());
  // DeepSeek-V2-Lite's shape: q_lora_rank null (a plain q projection), softmax greedy routing without a bias.
  nlohmann::json lite = base;
  lite["model_type"] = "deepseek_v2";
  lite["q_lora_rank"] = nullptr;
  lite["topk_method"] = "greedy";
  const ModelConfig l = parse_model_config(lite.dump(), "lite.json");
  EXPECT_EQ(l.q_lora_rank, 0u);
  EXPECT_FALSE(l.expert_score_bias);
  EXPECT_EQ(l.mla_q_b_params(), 7168u * 128u * 192u);
}

}  // namespace
}  // namespace tiersim::model
