// Mixture-of-experts models (qwen3_moe): the published config read as is, its parameter count, the
// generated trace's experts, and the seeded uniform routing.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>
#include <set>

#include "core/error.hpp"
#include "model/model_config.hpp"
#include "model/trace_generator.hpp"
#include "support/expert_reads.hpp"
#include "support/run_sim.hpp"

namespace tiersim::model {
namespace {

ModelConfig qwen30() { return load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen3-30b-a3b.json"); }

TEST(Moe, Qwen3_30B_A3BsPublishedConfigGivesItsPublishedSize) {
  const ModelConfig m = qwen30();
  EXPECT_TRUE(m.is_moe());
  EXPECT_EQ(m.num_experts, 128u);
  EXPECT_EQ(m.num_experts_per_tok, 8u);
  EXPECT_NEAR(static_cast<double>(m.total_params()) / 1e9, 30.5, 0.05);  // "30.5B" on its model card
  // "Non-Embedding: 29.9B" on the card: without the two vocabulary x hidden tables.
  EXPECT_NEAR(static_cast<double>(m.total_params() - 2 * m.embedding_params()) / 1e9, 29.9, 0.05);
  // Activated per token: attention, router, 8 of 128 experts, norms and both tables, 3.35B (the card: 3.3B).
  const double active = static_cast<double>(m.total_params()) -
                        static_cast<double>(m.num_hidden_layers * (m.num_experts - m.num_experts_per_tok) * 3 *
                                            m.expert_matrix_params());
  EXPECT_NEAR(active / 1e9, 3.35, 0.01);
}

// Mixtral-8x7B's published config.json: 8 experts of intermediate_size (w1, w3, w2) in every layer, top 2.
TEST(Moe, Mixtral8x7BsPublishedConfigGivesItsPublishedSize) {
  const ModelConfig m = load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/mixtral-8x7b.json");
  ASSERT_TRUE(m.is_moe());
  EXPECT_EQ(m.num_experts, 8u);
  EXPECT_EQ(m.num_experts_per_tok, 2u);
  EXPECT_EQ(m.moe_intermediate_size, 14336u);
  EXPECT_FALSE(m.qk_norm);
  // Mistral AI: "46.7B total parameters", "12.9B active parameters per token".
  EXPECT_EQ(m.total_params(), 46'702'792'704u);  // transformers' num_parameters() of MixtralForCausalLM
  const double active = static_cast<double>(m.total_params()) -
                        static_cast<double>(m.num_hidden_layers * (m.num_experts - m.num_experts_per_tok) * 3 *
                                            m.expert_matrix_params());
  EXPECT_NEAR(active / 1e9, 12.9, 0.05);
}

TEST(Moe, MixtralsTensorsHaveTransformersAndLlamaCppsNames) {
  const std::string path = std::string(TIERSIM_SOURCE_DIR) + "/traces/models/mixtral-8x7b.json";
  GenerationOptions o;
  o.prompt_tokens = 4;
  o.decode_tokens = 1;
  const ModelConfig mixtral = load_model_config(path);  // the generator keeps a reference to it
  std::set<std::string> names;
  auto tensor_names = [&] {
    const LlmTraceGenerator generator(mixtral, o);
    names.clear();
    for (const auto& t : generator.header().tensors) names.insert(t.name);
  };
  tensor_names();
  // transformers 5's module names (its checkpoints' block_sparse_moe.experts.E.w1 are renamed at load).
  for (const char* n : {"model.layers.0.mlp.gate", "model.layers.0.mlp.experts.gate_up_proj",
                        "model.layers.31.mlp.experts.down_proj"})
    EXPECT_TRUE(names.count(n)) << n;
  set_dtype(o, "Q4_K_M");
  tensor_names();
  for (const char* n : {"blk.0.ffn_gate_inp.weight", "blk.0.ffn_gate_exps.weight", "blk.31.ffn_down_exps.weight"})
    EXPECT_TRUE(names.count(n)) << n;
  // The other family's expert fields are errors naming them.
  const std::string base = R"({"model_type": "mixtral", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100, "num_local_experts": 8, "num_experts_per_tok": 2)";
  EXPECT_EQ(parse_model_config(base + "}", "m.json").moe_intermediate_size, 128u);
  for (const std::string key : {"num_experts", "moe_intermediate_size"}) {
    try {
      parse_model_config(base + ", \"" + key + "\": 8}", "m.json");
      ADD_FAILURE() << key << " accepted for mixtral";
    } catch (const InputError& e) {
      EXPECT_EQ(e.key(), key);
    }
  }
  try {
    parse_model_config(R"({"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
      "num_attention_heads": 4, "vocab_size": 100, "num_local_experts": 8, "num_experts": 8, "num_experts_per_tok": 2,
      "moe_intermediate_size": 32})", "q.json");
    ADD_FAILURE() << "num_local_experts accepted for qwen3_moe";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), "num_local_experts");
  }
}

// gpt-oss from its published config.json: 4 of 128 (or 32) experts with biases, MXFP4 as published, attention sinks,
// every other layer a 128-token sliding window.
TEST(Moe, GptOssPublishedConfigsGiveTheirPublishedSizes) {
  for (const auto& [file, total, active, layers] :
       {std::tuple{"gpt-oss-120b", 116'829'156'672ull, 5.13, 36ull}, std::tuple{"gpt-oss-20b", 20'914'757'184ull, 3.61, 24ull}}) {
    SCOPED_TRACE(file);
    const ModelConfig m = load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/" + file + ".json");
    EXPECT_EQ(m.total_params(), total);  // the model card: 116.8B / 20.9B ("117B" / "21B")
    const double inactive = static_cast<double>(m.num_hidden_layers * (m.num_experts - m.num_experts_per_tok)) *
                            static_cast<double>(3 * m.expert_matrix_params() + 2 * m.expert_in_bias() + m.expert_out_bias());
    // The model card's active parameters (5.13B / 3.61B) leave out the input embedding table (a lookup).
    EXPECT_NEAR((static_cast<double>(m.total_params() - m.embedding_params()) - inactive) / 1e9, active, 0.01);
    EXPECT_EQ(m.num_hidden_layers, layers);
    EXPECT_TRUE(m.sliding(0));
    EXPECT_FALSE(m.sliding(1));
    EXPECT_EQ(m.sliding_window, 128u);
    EXPECT_DOUBLE_EQ(m.expert_weight_bits, 4.25);
  }
}

TEST(Moe, GptOssTracesItsMxfp4ExpertsAndSlidingWindows) {
  const ModelConfig m = load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/gpt-oss-20b.json");
  GenerationOptions o;
  o.prompt_tokens = 1000;
  o.decode_tokens = 1;
  LlmTraceGenerator g(m, o);
  std::uint64_t weights = 0;
  std::map<std::string, const trace::Tensor*> by_name;
  for (const auto& t : g.header().tensors) {
    if (t.kind == trace::TensorKind::Weight) weights += t.bytes;
    by_name[t.name] = &t;
  }
  // The published checkpoint: 13.76 GB (12.8 GiB) of safetensors.
  EXPECT_NEAR(static_cast<double>(weights) / 1073741824.0, 12.82, 0.01);
  ASSERT_TRUE(by_name.count("model.layers.3.mlp.experts.gate_up_proj"));
  ASSERT_TRUE(by_name.count("model.layers.3.mlp.experts.down_proj"));
  ASSERT_TRUE(by_name.count("model.layers.3.mlp.router"));
  ASSERT_TRUE(by_name.count("model.layers.3.self_attn.sinks"));
  // 32 experts' down matrices, each 2880 x 2880 in MXFP4 with its bf16 bias; gate and up twice that.
  EXPECT_EQ(by_name["model.layers.3.mlp.experts.down_proj"]->bytes, 32u * (2880u * 2880u * 17u / 32u + 2880u * 2u));
  EXPECT_EQ(by_name["model.layers.3.mlp.experts.gate_up_proj"]->bytes, 64u * (2880u * 2880u * 17u / 32u + 2880u * 2u));
  EXPECT_EQ(g.header().version, 2);  // experts read as byte ranges
  // A sliding layer keeps and reads 128 tokens of KV cache, a full one the whole context.
  const std::uint64_t kv_token = 2 * 8 * 64 * 2;
  EXPECT_EQ(by_name["kv_cache.layer0"]->bytes, 128 * kv_token);
  EXPECT_EQ(by_name["kv_cache.layer1"]->bytes, 1001 * kv_token);
  trace::Step prefill, decode;
  ASSERT_TRUE(g.next(prefill));
  ASSERT_TRUE(g.next(decode));
  std::vector<std::uint64_t> kv_read;
  for (const auto& op : decode.ops)
    if (op.kind == trace::OpKind::Attention) kv_read.push_back(op.reads.front().bytes);
  ASSERT_EQ(kv_read.size(), 24u);
  EXPECT_EQ(kv_read[0], 128 * kv_token);
  EXPECT_EQ(kv_read[1], 1001 * kv_token);
  // The prompt's attention FLOPs in a sliding layer: each of 1000 tokens sees at most 128 keys.
  for (const auto& op : prefill.ops)
    if (op.kind == trace::OpKind::Attention && op.layer == 0) {
      const std::uint64_t keys = 128 * 129 / 2 + (1000 - 128) * 128;
      EXPECT_EQ(op.flops, 4 * 64 * 64 * keys);
    }
}

// A gpt-oss trace written by `sim gen` reads back: no access goes past its tensor (a prompt longer than the window
// writes only the window's keys and values into a sliding layer's cache).
TEST(Moe, AGptOssTraceWithALongPromptRoundTrips) {
  const std::string trace = std::string(TIERSIM_BINARY_DIR) + "/gpt-oss-20b.trace";
  const auto gen = testing::run_sim("gen --model traces/models/gpt-oss-20b.json --prompt 512 --decode 2 -o " + trace);
  ASSERT_EQ(gen.code, 0) << gen.out;
  const auto run = testing::run_sim("run --trace " + trace + " --hw h100-sxm --policy resident");
  EXPECT_EQ(run.code, 0) << run.out;
}

TEST(Moe, GptOssFieldsAreCheckedByName) {
  const std::string path = std::string(TIERSIM_SOURCE_DIR) + "/traces/models/gpt-oss-20b.json";
  std::ifstream in(path);
  const nlohmann::json base = nlohmann::json::parse(in);
  auto error_key = [&](const std::function<void(nlohmann::json&)>& edit) -> std::string {
    nlohmann::json j = base;
    edit(j);
    try {
      parse_model_config(j.dump(2), "g.json");
    } catch (const InputError& e) {
      return e.key();
    }
    return "(accepted)";
  };
  EXPECT_EQ(error_key([](auto& j) { j["layer_types"].erase(0); }), "layer_types");
  EXPECT_EQ(error_key([](auto& j) { j["layer_types"][2] = "chunked_attention"; }), "layer_types");
  EXPECT_EQ(error_key([](auto& j) { j["quantization_config"]["quant_method"] = "bitsandbytes"; }), "quantization_config");
  EXPECT_EQ(error_key([](auto& j) { j["experts_per_token"] = 2; }), "experts_per_token");
  EXPECT_EQ(error_key([](auto& j) { j.erase("sliding_window"); }), "sliding_window");
  EXPECT_EQ(error_key([](auto& j) { j.erase("layer_types"); }), "layer_types");
  EXPECT_EQ(error_key([](auto& j) {
              j["num_hidden_layers"] = 2000;
              j["num_local_experts"] = 128;
              j["layer_types"] = std::vector<std::string>(2000, "full_attention");
            }),
            "num_local_experts");
  EXPECT_EQ(error_key([](auto& j) { j["model_type"] = "mixtral"; }), "experts_per_token");  // a gpt_oss field elsewhere
  // Without quantization_config (a bf16 re-upload), the experts take the weight format.
  EXPECT_DOUBLE_EQ(parse_model_config([&] { auto j = base; j.erase("quantization_config"); return j.dump(); }(), "g.json")
                       .expert_weight_bits, 0.0);
}

TEST(Moe, FieldsThatChangeTheModelAreCheckedByName) {
  const std::string base = R"({"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 100, "num_experts": 8,
    "num_experts_per_tok": 2, "moe_intermediate_size": 32)";
  EXPECT_NO_THROW(parse_model_config(base + "}", "moe.json"));
  for (const auto& [extra, key] : std::vector<std::pair<std::string, std::string>>{
           {R"(, "decoder_sparse_step": 2})", "decoder_sparse_step"},
           {R"(, "mlp_only_layers": [0]})", "mlp_only_layers"},
           {R"(, "mlp_bias": true})", "mlp_bias"},
           {R"(, "num_experts_per_tok": 9})", "num_experts_per_tok"}}) {
    std::string text = base + extra;
    if (key == "num_experts_per_tok") text = std::string(base).replace(base.find("\"num_experts_per_tok\": 2"), 24, "\"num_experts_per_tok\": 9") + "}";
    try {
      parse_model_config(text, "moe.json");
      ADD_FAILURE() << extra << " was accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.key(), key) << e.what();
    }
  }
  try {
    parse_model_config(R"({"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
      "num_attention_heads": 4, "vocab_size": 100, "num_experts": 8})", "dense.json");
    ADD_FAILURE() << "a dense model with num_experts was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), "num_experts");
  }
  // Experts are traced one by one: their number is bounded.
  try {
    parse_model_config(R"({"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 9000,
      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 100, "num_experts": 4096,
      "num_experts_per_tok": 2, "moe_intermediate_size": 32})", "huge.json");
    ADD_FAILURE() << "4096 experts x 9000 layers were accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), "num_experts");
  }
}

// Zipf routing: a few experts take most tokens (the most popular far above the uniform share), the
// same seed gives the same routing, and every token still gets k distinct experts.
// Each MoE layer's routing decision is one `router` op (after the router's product), and every expert read of the layer
// comes after it, under transformers and llama.cpp alike; it reads and writes back as `router`.
TEST(Moe, EachLayerRoutesInOneRouterOpBeforeItsExpertsAreRead) {
  for (const char* dtype : {"bf16", "Q4_K_M"}) {
    GenerationOptions g;
    set_dtype(g, dtype);
    g.prompt_tokens = 16;
    g.decode_tokens = 1;
    LlmTraceGenerator gen(qwen30(), g);
    trace::Step s;
    while (gen.next(s)) {
      std::map<std::int32_t, int> routers;
      for (const auto& op : s.ops) {
        if (op.kind == trace::OpKind::Router) ++routers[op.layer];
        for (const auto& r : op.reads)
          if (testing::gate_read_expert(gen.header(), r, op.layer))
            EXPECT_EQ(routers[op.layer], 1) << dtype << ": layer " << op.layer << " reads an expert before routing";
      }
      EXPECT_EQ(routers.size(), 48u) << dtype;
      for (const auto& [layer, n] : routers) EXPECT_EQ(n, 1) << dtype << " layer " << layer;
    }
  }
  trace::OpKind k;
  ASSERT_TRUE(trace::parse_op_kind("router", k));
  EXPECT_EQ(k, trace::OpKind::Router);
  EXPECT_STREQ(trace::to_string(trace::OpKind::Router), "router");
}

TEST(Moe, ZipfRoutingConcentratesTokensOnAFewExperts) {
  auto hits_at_layer0 = [](double zipf) {
    GenerationOptions g;
    g.prompt_tokens = 0;
    g.decode_tokens = 100;
    g.routing_zipf = zipf;
    LlmTraceGenerator gen(qwen30(), g);
    std::map<std::uint64_t, int> hits;
    trace::Step s;
    while (gen.next(s)) {
      std::set<std::uint64_t> step;
      for (const auto& op : s.ops)
        for (const auto& r : op.reads)
          if (const auto e = testing::gate_read_expert(gen.header(), r, 0); e && op.layer == 0) {
            EXPECT_TRUE(step.insert(*e).second);
            ++hits[*e];
          }
      EXPECT_EQ(step.size(), 8u);
    }
    int top = 0;
    for (const auto& [t, n] : hits) top = std::max(top, n);
    return std::make_pair(top, hits);
  };
  const auto [uniform_top, uniform] = hits_at_layer0(0);
  const auto [zipf_top, zipf] = hits_at_layer0(1.2);
  EXPECT_LT(uniform_top, 20);  // 100 tokens x 8 / 128 experts: 6.25 on average
  EXPECT_GT(zipf_top, 60);     // rank 1 of 128 at s = 1.2: about a quarter of the draws
  EXPECT_LT(zipf.size(), uniform.size());
  EXPECT_EQ(hits_at_layer0(1.2).second, zipf);
  GenerationOptions dense;
  dense.routing_zipf = 1;
  EXPECT_THROW(LlmTraceGenerator(load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen3-4b.json"), dense),
               InputError);
}

// k close to the number of experts: every token still gets k distinct experts (drawn as the E - k left out).
TEST(Moe, NearlyEveryExpertPerTokenStillRoutesToDistinctOnes) {
  const auto m = parse_model_config(
      R"({"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 100, "num_experts": 16,
          "num_experts_per_tok": 15, "moe_intermediate_size": 32})",
      "k15.json");
  GenerationOptions g;
  g.prompt_tokens = 0;
  g.decode_tokens = 20;
  LlmTraceGenerator gen(m, g);
  trace::Step s;
  while (gen.next(s)) {
    std::map<std::int32_t, std::set<std::uint64_t>> gates;
    for (const auto& op : s.ops)
      for (const auto& r : op.reads)
        if (const auto e = testing::gate_read_expert(gen.header(), r, op.layer)) EXPECT_TRUE(gates[op.layer].insert(*e).second);
    EXPECT_EQ(gates.size(), 2u);  // both layers
    for (const auto& [layer, ids] : gates) EXPECT_EQ(ids.size(), 15u);
  }
}

// Expert rows per layer and the expert tensors a step reads, from a generated trace.
struct Step {
  std::map<std::int32_t, std::set<std::uint32_t>> experts;  // layer -> expert weight tensors read
};

TEST(Moe, DecodeReadsTheTopKExpertsOfEachLayerAndRoutingIsSeededAndUniform) {
  GenerationOptions g;
  set_dtype(g, "Q4_K_M");
  g.prompt_tokens = 0;
  g.decode_tokens = 200;
  LlmTraceGenerator gen(qwen30(), g);
  const auto& h = gen.header();
  std::size_t fused = 0;
  for (const auto& t : h.tensors) fused += t.name.find("_exps.weight") != std::string::npos;
  EXPECT_EQ(fused, 48u * 3u);  // llama.cpp's ffn_{gate,up,down}_exps, each all 128 experts
  EXPECT_EQ(h.meta.at("num_experts"), "128");
  std::map<std::uint64_t, int> hits;  // layer 0's expert (its gate slice) -> decode steps that read it
  trace::Step s;
  int steps = 0;
  while (gen.next(s)) {
    std::map<std::int32_t, int> gates;
    for (const auto& op : s.ops)
      for (const auto& r : op.reads)
        if (h.tensors[r.tensor].name.find("ffn_gate_exps") != std::string::npos) {
          ++gates[op.layer];
          if (op.layer == 0) ++hits[r.offset / r.bytes];
          EXPECT_EQ(r.bytes * 128, h.tensors[r.tensor].bytes);  // an expert's matrix, its 1/128 of the tensor, whole
          EXPECT_EQ(r.offset % r.bytes, 0u);
        }
    ASSERT_EQ(gates.size(), 48u);
    for (const auto& [layer, n] : gates) EXPECT_EQ(n, 8) << "layer " << layer;
    ++steps;
  }
  EXPECT_EQ(steps, 200);
  // 200 tokens x 8 of 128 experts: 12.5 hits each on average; uniform routing leaves none far off.
  EXPECT_GT(hits.size(), 120u);
  for (const auto& [expert, n] : hits) EXPECT_LT(n, 35) << "expert " << expert;
  // The same seed gives the same trace; another seed another routing.
  LlmTraceGenerator again(qwen30(), g);
  g.routing_seed = 7;
  LlmTraceGenerator other(qwen30(), g);
  trace::Step a, b, c;
  again.next(a);
  other.next(c);
  LlmTraceGenerator first(qwen30(), GenerationOptions{g.dtype, g.gguf, 1, 0, 200});
  first.next(b);
  ASSERT_EQ(a.ops.size(), b.ops.size());
  bool same = true, differs = false;
  // An expert is its slice of a fused tensor: the same reads are the same tensor and offset.
  auto read_of = [](const trace::Op& op) { return std::make_pair(op.reads.front().tensor, op.reads.front().offset); };
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    same &= read_of(a.ops[i]) == read_of(b.ops[i]);
    if (i < c.ops.size()) differs |= read_of(a.ops[i]) != read_of(c.ops[i]);
  }
  EXPECT_TRUE(same);
  EXPECT_TRUE(differs);
}

TEST(Moe, APromptReadsEachExpertOnceWithTheRowsRoutedToIt) {
  GenerationOptions g;
  set_dtype(g, "bf16");
  g.prompt_tokens = 512;
  g.decode_tokens = 0;
  LlmTraceGenerator gen(qwen30(), g);
  trace::Step s;
  ASSERT_TRUE(gen.next(s));
  const auto& h = gen.header();
  std::uint64_t flops = 0;
  std::set<std::uint64_t> read;
  for (const auto& op : s.ops)
    for (const auto& r : op.reads)
      if (const auto e = testing::gate_read_expert(h, r, 3)) {
        EXPECT_TRUE(read.insert(*e).second) << "an expert read twice in one step";
        flops += op.flops;
      }
  EXPECT_GT(read.size(), 120u);  // 512 tokens x 8 experts: nearly all 128 are hit
  // Every routed row through gate_proj: 512 tokens x 8 experts x 2 x 2048 x 768.
  EXPECT_EQ(flops, 512ull * 8 * 2 * 2048 * 768);
}

// transformers' experts implementations (integrations/moe.py), with the kernels and host syncs the profiler counted
// on an H100 (results/validation/moe-hf/kernels): per layer of a decode step at 8 experts hit, router included,
// grouped_mm 34 kernels and no sync, eager 128 kernels and 41 syncs (one for expert_hit, five per expert).
TEST(Moe, TransformersExpertsImplementationsLaunchAndSyncAsProfiled) {
  const ModelConfig m = qwen30();
  // Launches and syncs of layer 5's MoE block in one decode step: from the router's Linear to the residual add.
  auto block = [&](GenerationOptions::Experts impl) {
    GenerationOptions g;
    g.prompt_tokens = 0;
    g.decode_tokens = 1;
    g.experts = impl;
    LlmTraceGenerator gen(m, g);
    trace::Step s;
    EXPECT_TRUE(gen.next(s));
    std::vector<const trace::Op*> layer;
    for (const auto& op : s.ops)
      if (op.layer == 5) layer.push_back(&op);
    std::size_t router = layer.size();
    for (std::size_t i = 0; i < layer.size() && router == layer.size(); ++i)
      for (const auto& r : layer[i]->reads)
        if (gen.header().tensors[r.tensor].name == "model.layers.5.mlp.gate") router = i;
    EXPECT_LT(router, layer.size());
    std::pair<std::uint32_t, std::uint32_t> n{0, 0};
    for (std::size_t i = router; i + 1 < layer.size(); ++i) {
      n.first += layer[i]->launches;
      n.second += layer[i]->syncs;
    }
    EXPECT_EQ(layer.back()->launches, 1u);  // the residual add
    return n;
  };
  EXPECT_EQ(block(GenerationOptions::Experts::GroupedMm), std::make_pair(34u, 0u));
  EXPECT_EQ(block(GenerationOptions::Experts::Eager), std::make_pair(128u, 41u));
  // Eager is transformers' own, for models with experts.
  GenerationOptions bad;
  bad.experts = GenerationOptions::Experts::Eager;
  const ModelConfig dense = load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen3-4b.json");
  EXPECT_THROW(LlmTraceGenerator(dense, bad), InputError);
  set_dtype(bad, "Q4_K_M");
  EXPECT_THROW(LlmTraceGenerator(m, bad), InputError);
  GenerationOptions::Experts e{};
  EXPECT_TRUE(parse_experts("eager", e));
  EXPECT_EQ(e, GenerationOptions::Experts::Eager);
  EXPECT_FALSE(parse_experts("batched_mm", e));
}

}  // namespace
}  // namespace tiersim::model
