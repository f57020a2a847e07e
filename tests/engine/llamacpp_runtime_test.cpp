// llama.cpp's execution of host-resident layers (the execute offload path's threads and op offload,
// the host's measured CPU kernels, micro-batched prompts): what runs where and what it costs.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "core/error.hpp"
#include "hardware/op_cost.hpp"
#include "hardware/profile_loader.hpp"
#include "model/model_config.hpp"
#include "model/trace_generator.hpp"
#include "policies/strategy/part_spec.hpp"
#include "policies/strategy/strategy.hpp"
#include "replay/step_plan.hpp"
#include "runtime/runtime_loader.hpp"

namespace tiersim {
namespace {

using replay::ActionKind;

hw::CpuKernelSpec kernels() {
  hw::CpuKernelSpec k;
  k.cores = 16;
  k.read_bandwidth = {{1, 10e9}, {8, 60e9}, {16, 80e9}};
  k.gemv["q4_k"] = {{1, 5e9}, {4, 20e9}, {16, 50e9}};
  return k;
}

TEST(CpuKernels, RatesAreInterpolatedByThreadsProportionalBelowAndHeldBeyond) {
  const auto k = kernels();
  EXPECT_DOUBLE_EQ(hw::CpuKernelSpec::at(k.gemv.at("q4_k"), 1), 5e9);
  EXPECT_DOUBLE_EQ(hw::CpuKernelSpec::at(k.gemv.at("q4_k"), 2), 10e9);   // between 1 and 4
  EXPECT_DOUBLE_EQ(hw::CpuKernelSpec::at(k.gemv.at("q4_k"), 10), 35e9);  // between 4 and 16
  EXPECT_DOUBLE_EQ(hw::CpuKernelSpec::at(k.gemv.at("q4_k"), 64), 50e9);  // beyond: held
  EXPECT_DOUBLE_EQ(hw::CpuKernelSpec::at({{4, 40e9}}, 2), 20e9);          // below the first: proportional
}

TEST(CpuKernels, AGemvCostsItsWeightAtItsTypesRateAndTheRestAtTheReadBandwidth) {
  hw::HardwareProfile hw = hw::resolve_profile("rtx4090");
  hw.host.kernels = kernels();
  trace::Op op;
  op.kind = trace::OpKind::Gemv;
  op.flops = 2 * 4096 * 4096;
  op.dtype = "q4_k";
  op.reads = {{0, 9'437'184}, {1, 8192}};  // a 4096 x 4096 Q4_K matrix (4.5 bits) and the input
  op.writes = {{1, 8192}};
  hw::CpuThreads run;
  run.threads = 4;
  run.weight_bytes = 9'437'184;
  run.per_op = 5e-6;
  const auto rates = hw::OpRates::of(hw, "bf16");
  EXPECT_NEAR(hw::cpu_op_seconds(hw, op, rates, run), 9'437'184 / 20e9 + 16384 / (10e9 + 3 * 50e9 / 7) + 5e-6, 1e-12);
  // A type without a measured kernel moves at the read bandwidth, or takes its FLOPs at the CPU's
  // compute scaled by threads / cores when that is longer.
  op.dtype = "q5_k";
  hw.host.compute = {{"bf16", 1e15}};
  const auto fast = hw::OpRates::of(hw, "bf16");
  EXPECT_NEAR(hw::cpu_op_seconds(hw, op, fast, run), (9'437'184 + 16384) / (10e9 + 3 * 50e9 / 7) + 5e-6, 1e-12);
  hw.host.compute = {{"bf16", 1e9}};
  const auto slow = hw::OpRates::of(hw, "bf16");
  EXPECT_NEAR(hw::cpu_op_seconds(hw, op, slow, run), 2.0 * 4096 * 4096 / (1e9 * hw.host.compute_efficiency * 4 / 16) + 5e-6, 1e-12);
  // No threads given and no kernels: the whole CPU's roofline, as before.
  run.threads = 0;
  EXPECT_DOUBLE_EQ(hw::cpu_op_seconds(hw, op, rates, run) - 5e-6 + hw.host.op_overhead, hw::cpu_op_seconds(hw, op, rates));
}

TEST(CpuKernels, AProfileReadsThemAndRejectsBadCurvesByKey) {
  const std::string base = R"(tiersim_profile: 1
name: t
description: d
gpu: {source: s, name: g, count: 1, memory: "8 GiB", reserved: "0 B", memory_bandwidth: "100 GB/s", memory_efficiency: 1, compute: {bf16: "1 TFLOP/s"}, compute_efficiency: 1, kernel_min_time: "1 us"}
host_link: {source: s, type: pcie, generation: 4, width: 16, h2d_pinned: {bandwidth: "1 GB/s", latency: "1 us"}, d2h_pinned: {bandwidth: "1 GB/s", latency: "1 us"}, h2d_pageable: {bandwidth: "1 GB/s", latency: "1 us"}, d2h_pageable: {bandwidth: "1 GB/s", latency: "1 us"}, bidirectional: "2 GB/s"}
host:
  source: s
  name: h
  memory: "64 GiB"
  memory_bandwidth: "50 GB/s"
  memory_efficiency: 1
  compute: {fp32: "1 TFLOP/s"}
  compute_efficiency: 1
  op_overhead: "1 us"
)";
  const auto p = hw::parse_profile(base + R"(  cpu_kernels:
    source: measured
    cores: 8
    read_bandwidth: [[1, "10 GB/s"], [8, "40 GB/s"]]
    gemv: {q4_k: [[1, "6 GB/s"], [8, "35 GB/s"]]}
)", "p.yaml");
  ASSERT_TRUE(p.host.kernels);
  EXPECT_EQ(p.host.kernels->cores, 8);
  EXPECT_DOUBLE_EQ(hw::CpuKernelSpec::at(p.host.kernels->gemv.at("q4_k"), 8), 35e9);
  auto fails = [&](const std::string& kernels_text, const std::string& key) {
    try {
      hw::parse_profile(base + kernels_text, "p.yaml");
      ADD_FAILURE() << "accepted: " << kernels_text;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  fails("  cpu_kernels: {source: s, cores: 8, read_bandwidth: [[8, \"4 GB/s\"], [4, \"5 GB/s\"]], gemv: {}}\n",
        "host.cpu_kernels.read_bandwidth");
  fails("  cpu_kernels: {source: s, cores: 8, read_bandwidth: [[1.5, \"4 GB/s\"]], gemv: {}}\n",
        "host.cpu_kernels.read_bandwidth");
  fails("  cpu_kernels: {source: s, cores: 8, read_bandwidth: [[1, \"4 GB/s\"]], gemv: {Q4_K: [[1, \"1 GB/s\"]]}}\n",
        "host.cpu_kernels.gemv.Q4_K");
  fails("  cpu_kernels: {source: s, cores: 0, read_bandwidth: [[1, \"4 GB/s\"]], gemv: {}}\n", "host.cpu_kernels.cores");
  // ggml's MUL_MAT_ID by type, optional.
  const auto e = hw::parse_profile(base + "  cpu_kernels: {source: s, cores: 8, read_bandwidth: [[1, \"4 GB/s\"]], gemv: {}, "
                                          "gemv_id: {q4_k: [[1, \"3 GB/s\"], [8, \"20 GB/s\"]]}}\n", "p.yaml");
  EXPECT_DOUBLE_EQ(hw::CpuKernelSpec::at(e.host.kernels->gemv_id.at("q4_k"), 8), 20e9);
  EXPECT_TRUE(p.host.kernels->gemv_id.empty());
  fails("  cpu_kernels: {source: s, cores: 8, read_bandwidth: [[1, \"4 GB/s\"]], gemv: {}, gemv_id: {q4_x: [[1, \"1 GB/s\"]]}}\n",
        "host.cpu_kernels.gemv_id.q4_x");
}

// An op over one expert's slice (llama.cpp's MUL_MAT_ID on the CPU) takes the profile's gemv_id rate for its type;
// a dense matrix, or a type gemv_id lacks, its gemv rate.
TEST(CpuKernels, AnExpertSliceTakesTheStackOfExpertsRate) {
  hw::HardwareProfile hw = hw::resolve_profile("rtx4090");
  hw.host.kernels = kernels();
  hw.host.kernels->gemv_id["q4_k"] = {{1, 4e9}, {16, 30e9}};
  trace::Op op;
  op.kind = trace::OpKind::Gemv;
  op.flops = 2 * 768 * 2048;
  op.dtype = "q4_k";
  op.reads = {{0, 884'736}, {1, 4096}};  // one expert's 768 x 2048 Q4_K slice and the input
  op.writes = {{1, 1536}};
  hw::CpuThreads run;
  run.threads = 16;
  run.weight_bytes = 884'736;
  const auto rates = hw::OpRates::of(hw, "bf16");
  const double other = (4096 + 1536) / 80e9;
  EXPECT_NEAR(hw::cpu_op_seconds(hw, op, rates, run), 884'736 / 50e9 + other, 1e-12);  // per_op 0
  run.expert_slice = true;
  EXPECT_NEAR(hw::cpu_op_seconds(hw, op, rates, run), 884'736 / 30e9 + other, 1e-12);
  hw.host.kernels->gemv_id.clear();  // no MUL_MAT_ID rate for the type: its dense one
  EXPECT_NEAR(hw::cpu_op_seconds(hw, op, rates, run), 884'736 / 50e9 + other, 1e-12);
}

// Qwen3-4B as a Q4_K_M file, -ngl 0 (everything but nothing on the GPU), under the execute path.
struct NglZero {
  model::ModelConfig config = model::load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen3-4b.json");
  model::GenerationOptions options;
  std::unique_ptr<model::LlmTraceGenerator> gen;
  hw::HardwareProfile hw = hw::resolve_profile("rtx4090");
  runtime::RuntimeProfile rt = runtime::resolve_runtime("llamacpp");
  placement::Placement p;

  explicit NglZero(const std::string& offload, std::uint32_t prompt = 512, std::uint32_t ubatch = 0,
                   const std::string& rule = "llamacpp.ngl:ngl=0") {
    model::set_dtype(options, "Q4_K_M");
    options.prompt_tokens = prompt;
    options.decode_tokens = 2;
    options.ubatch = ubatch;
    gen = std::make_unique<model::LlmTraceGenerator>(config, options);
    hw.host.kernels = kernels();
    strategy::StrategySpec spec;
    spec.placement = strategy::PartSpec::parse(rule, "--placement");
    spec.offload = strategy::PartSpec::parse(offload, "--offload");
    spec.custom = true;
    p = strategy::compose(gen->header(), hw, spec);
  }
  std::vector<replay::StepPlan> plans() {
    replay::StepPlanner planner({hw, rt}, gen->header(), p);
    std::vector<replay::StepPlan> out;
    trace::Step step;
    while (gen->next(step)) {
      out.emplace_back();
      planner.plan(step, out.back());
    }
    return out;
  }
};

double bytes_of(const replay::StepPlan& plan, ActionKind kind) {
  double b = 0;
  for (const auto& a : plan.actions)
    if (a.kind == kind) b += a.bytes;
  return b;
}
int count_of(const replay::StepPlan& plan, ActionKind kind) {
  int n = 0;
  for (const auto& a : plan.actions) n += a.kind == kind;
  return n;
}

TEST(OpOffload, APromptRunsTheCpuLayersOnTheGpuWithTheirWeightsCopiedAndDecodeRunsThemOnTheCpu) {
  NglZero run("execute:op-offload=32");
  const auto plans = run.plans();
  ASSERT_EQ(plans.size(), 3u);
  const auto& h = run.gen->header();
  double layer_weights = 0, output_weights = 0, last_ffn = 0;
  const auto last = static_cast<std::int32_t>(run.config.num_hidden_layers) - 1;
  for (const auto& t : h.tensors) {
    if (t.kind != trace::TensorKind::Weight || t.layer < 0) continue;
    (t.layer <= last ? layer_weights : output_weights) += t.bytes;
    if (t.layer == last && (t.name.find("ffn_") != std::string::npos)) last_ffn += t.bytes;
  }
  ASSERT_GT(last_ffn, 0);
  // The prompt: every repeating layer's weights copied once, on the compute stream, from pinned memory
  // (the host goes on), but the last layer's FFN (norm and matrices): after its attention llama.cpp keeps the
  // output row only (inp_out_ids), one token, not offloaded; the output layer sees one token too, and the
  // embedding lookup is never offloaded.
  EXPECT_DOUBLE_EQ(bytes_of(plans[0], ActionKind::CopyOnStream), layer_weights - last_ffn);
  for (const auto& a : plans[0].actions)
    if (a.kind == ActionKind::CopyOnStream) { EXPECT_FALSE(a.host_waits); }
  // the lookup; the last layer's residual, FFN norm, gate, up, GLU, down, residual; final norm, LM head, sampling;
  // and every layer's KV store (its two SET_ROWS): the cache stays in host memory, and the attention that follows the
  // copied weights to the GPU takes the cache's views in (tests/fixtures/llamacpp_offload_sched.log)
  const int L = static_cast<int>(run.config.num_hidden_layers);
  EXPECT_EQ(count_of(plans[0], ActionKind::CpuOp), 1 + 7 + 3 + L);
  EXPECT_EQ(count_of(plans[0], ActionKind::ActivationToHost), L + 1);  // each layer's new keys and values; the last FFN's row
  EXPECT_GE(count_of(plans[0], ActionKind::ActivationToDevice), L + 1);  // the embedding's rows and each layer's views
  EXPECT_GT(output_weights, 0);
  // Decode: no copies, every op on the CPU.
  EXPECT_EQ(count_of(plans[1], ActionKind::CopyOnStream), 0);
  EXPECT_EQ(count_of(plans[1], ActionKind::Kernel), 0);
  EXPECT_GT(count_of(plans[1], ActionKind::CpuOp), 100);
}

TEST(OpOffload, OffItRunsThePromptOnTheCpuAndBelowTheBatchToo) {
  for (const auto& [offload, prompt] : {std::pair<std::string, std::uint32_t>{"execute", 512}, {"execute:op-offload=32", 31}}) {
    NglZero run(offload, prompt);
    const auto plans = run.plans();
    EXPECT_EQ(count_of(plans[0], ActionKind::CopyOnStream), 0) << offload << " " << prompt;
    EXPECT_EQ(count_of(plans[0], ActionKind::Kernel), 0) << offload << " " << prompt;
  }
}

TEST(OpOffload, PageableHostMemoryHoldsTheHostForEachCopy) {
  NglZero run("execute:op-offload=32,host=pageable");
  const auto plans = run.plans();
  int copies = 0;
  for (const auto& a : plans[0].actions)
    if (a.kind == ActionKind::CopyOnStream) { EXPECT_TRUE(a.host_waits); ++copies; }
  EXPECT_GT(copies, 0);
}

TEST(OpOffload, EachMicroBatchCopiesTheWeightsAgain) {
  NglZero one("execute:op-offload=32", 1000, 0);
  NglZero two("execute:op-offload=32", 1000, 512);
  const auto a = one.plans();
  const auto b = two.plans();
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 4u);  // 512 + 488 tokens, then two decode steps
  EXPECT_EQ(b[0].tokens, 512u);
  EXPECT_EQ(b[1].tokens, 488u);
  EXPECT_DOUBLE_EQ(bytes_of(b[0], ActionKind::CopyOnStream) + bytes_of(b[1], ActionKind::CopyOnStream),
                   2 * bytes_of(a[0], ActionKind::CopyOnStream));
}

TEST(OpOffload, ThreadsSetTheCpuOpsCost) {
  double decode_seconds[2] = {0, 0};
  int i = 0;
  for (const char* offload : {"execute:threads=2", "execute:threads=16"}) {
    NglZero run(offload);
    const auto plans = run.plans();
    for (const auto& a : plans[1].actions)
      if (a.kind == ActionKind::CpuOp) decode_seconds[i] += a.work_seconds;
    ++i;
  }
  // 2 threads: the weights at 10 GB/s (q4_k) or less; 16: at 50 GB/s or so.
  EXPECT_GT(decode_seconds[0], 3 * decode_seconds[1]);
}

TEST(OpOffload, OverriddenFfnMatricesRunOnTheCpuInDecodeAndOnTheGpuInThePrompt) {
  NglZero run("execute:op-offload=32", 512, 0, "llamacpp.ngl:ot=ffn_(up|down|gate)=CPU");
  const auto plans = run.plans();
  const auto& ops = [&]() {
    trace::Step step;
    model::LlmTraceGenerator gen(run.config, run.options);
    gen.next(step);
    gen.next(step);
    return step.ops;
  }();
  std::map<std::string, int> cpu_kinds;
  for (const auto& a : plans[1].actions)
    if (a.kind == ActionKind::CpuOp) ++cpu_kinds[trace::to_string(ops[static_cast<std::size_t>(a.op)].kind)];
  const int L = static_cast<int>(run.config.num_hidden_layers);
  // Decode: gate, up, down and the activation between them on the CPU (the residual after down too),
  // attention and its projections on the GPU; the embedding lookup on the CPU.
  EXPECT_EQ(cpu_kinds["gemv"], 3 * L);
  EXPECT_EQ(cpu_kinds["attention"], 0);
  EXPECT_EQ(cpu_kinds["embedding"], 1);
  // The prompt: the FFN matrices copied to the GPU (3 per layer), nothing else; the last layer's FFN runs on the
  // output row only (inp_out_ids), one token, on the CPU.
  EXPECT_EQ(count_of(plans[0], ActionKind::CopyOnStream), 3 * (L - 1));
}

TEST(OpOffload, APatternThatMovesNothingChangesNothing) {
  NglZero plain("execute:op-offload=32", 512, 0, "llamacpp.ngl:ngl=18");
  NglZero none("execute:op-offload=32", 512, 0, "llamacpp.ngl:ngl=18,ot=zzz=CPU");
  EXPECT_FALSE(none.p.per_tensor);
  const auto a = plain.plans();
  const auto b = none.plans();
  for (std::size_t s = 0; s < a.size(); ++s) {
    EXPECT_EQ(count_of(a[s], ActionKind::CpuOp), count_of(b[s], ActionKind::CpuOp)) << s;
    EXPECT_EQ(bytes_of(a[s], ActionKind::CopyOnStream), bytes_of(b[s], ActionKind::CopyOnStream)) << s;
  }
  // The CPU layers' attention runs on the GPU in the prompt, with their other ops; on the CPU only the embedding
  // lookup and each CPU layer's KV store.
  int host_caches = 0;
  for (const auto& t : plain.gen->header().tensors)
    host_caches += t.kind == trace::TensorKind::KvCache && plain.p.device[t.id] == placement::kCpu;
  EXPECT_GT(host_caches, 0);
  EXPECT_EQ(count_of(a[0], ActionKind::CpuOp), 1 + host_caches);
}

// At -ngl 0 every KV cache is in host memory already: --no-kv-offload changes nothing, in the prompt (op offload runs
// the layers on the GPU, the caches copied around their attention) or in decode (every op on the CPU).
TEST(OpOffload, NoKvOffloadChangesNothingWhenEveryLayerIsOnTheCpu) {
  NglZero plain("execute:op-offload=32", 512, 0, "llamacpp.ngl:ngl=0");
  NglZero nkvo("execute:op-offload=32", 512, 0, "llamacpp.ngl:ngl=0,kv-offload=off");
  const auto a = plain.plans();
  const auto b = nkvo.plans();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t s = 0; s < a.size(); ++s)
    for (const auto kind : {ActionKind::CpuOp, ActionKind::Kernel, ActionKind::CopyOnStream, ActionKind::ActivationToHost,
                            ActionKind::ActivationToDevice}) {
      EXPECT_EQ(count_of(a[s], kind), count_of(b[s], kind)) << s;
      EXPECT_EQ(bytes_of(a[s], kind), bytes_of(b[s], kind)) << s;
    }
  EXPECT_GT(count_of(a[0], ActionKind::Kernel), 0);
  EXPECT_EQ(count_of(a[1], ActionKind::Kernel), 0);
}

TEST(Generator, MicroBatchesSplitThePromptAndOnlyTheLastComputesLogits) {
  const auto config = model::load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen3-4b.json");
  model::GenerationOptions g;
  g.prompt_tokens = 1100;
  g.decode_tokens = 1;
  g.ubatch = 512;
  EXPECT_EQ(g.prefill_steps(), 3u);
  model::LlmTraceGenerator gen(config, g);
  trace::Step step;
  std::vector<std::uint32_t> tokens;
  std::vector<bool> samples;
  while (gen.next(step)) {
    tokens.push_back(step.tokens);
    bool sample = false;
    for (const auto& op : step.ops) sample |= op.kind == trace::OpKind::Sample;
    samples.push_back(sample);
  }
  EXPECT_EQ(tokens, (std::vector<std::uint32_t>{512, 512, 76, 1}));
  EXPECT_EQ(samples, (std::vector<bool>{false, false, true, true}));
}

TEST(Generator, GgufMatricesCarryTheirTypeAsTheOpDtype) {
  const auto config = model::load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen3-4b.json");
  model::GenerationOptions g;
  model::set_dtype(g, "Q4_K_M");
  g.prompt_tokens = 0;
  g.decode_tokens = 1;
  model::LlmTraceGenerator gen(config, g);
  trace::Step step;
  ASSERT_TRUE(gen.next(step));
  std::map<std::string, int> types;
  for (const auto& op : step.ops)
    if (op.kind == trace::OpKind::Gemv) ++types[op.dtype];
  EXPECT_GT(types["q4_k"], 0);
  EXPECT_GT(types["q6_k"], 0);  // some attn_v and ffn_down, and the tied output's token_embd (Q6_K)
  EXPECT_EQ(types.count(""), 0u);
  // Other weight formats leave the dtype to the trace's default.
  model::set_dtype(g, "bf16");
  model::LlmTraceGenerator plain(config, g);
  ASSERT_TRUE(plain.next(step));
  for (const auto& op : step.ops) EXPECT_TRUE(op.dtype.empty());
}

}  // namespace
}  // namespace tiersim

namespace tiersim {
namespace {

// A made-up mixture of experts (CONFIG's sizes) with its experts in host memory (--cpu-moe), as a
// Q8_0 file: the plan of its first step (a prompt of `prompt` tokens), and that step.
struct CpuMoePrompt {
  model::LlmTraceGenerator gen;
  trace::Step step;
  replay::StepPlan plan;
  CpuMoePrompt(const std::string& config, std::uint32_t prompt) : gen(model::parse_model_config(config, "tiny-moe.json"), options(prompt)) {
    strategy::StrategySpec spec;
    spec.placement = strategy::PartSpec::parse("llamacpp.ngl", "--placement");
    spec.placement.set("ot", "\\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU", "--cpu-moe");
    spec.offload = strategy::PartSpec::parse("execute:op-offload=32", "--offload");
    spec.custom = true;
    const auto hw = hw::resolve_profile("rtx4090");
    const auto rt = runtime::resolve_runtime("llamacpp");
    const auto p = strategy::compose(gen.header(), hw, spec);
    replay::StepPlanner planner({hw, rt}, gen.header(), p);
    EXPECT_TRUE(gen.next(step));
    planner.plan(step, plan);
  }
  static model::GenerationOptions options(std::uint32_t prompt) {
    model::GenerationOptions o;
    model::set_dtype(o, "Q8_0");
    o.prompt_tokens = prompt;
    o.decode_tokens = 0;
    return o;
  }
  // Op-offload copies, and those that pay the copy's host cost.
  std::pair<int, int> copies() const {
    int n = 0, charged = 0;
    for (const auto& a : plan.actions)
      if (a.kind == ActionKind::CopyOnStream) {
        ++n;
        charged += a.host_seconds > 0;
      }
    return {n, charged};
  }
};

// Every expert used (256 tokens x 4 of 16): each fused tensor is one copy (ggml-backend.cpp copy_experts),
// so only its first expert pays the copy's host cost. The last layer's experts run on the output row only
// (inp_out_ids: one token, below the op-offload batch) on the CPU: not copied.
TEST(OpOffload, ConsecutiveUsedExpertsOfOneFusedTensorAreOneCopy) {
  const CpuMoePrompt run(
      R"({"model_type": "qwen3_moe", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1000, "num_experts": 16,
          "num_experts_per_tok": 4, "moe_intermediate_size": 128, "max_position_embeddings": 4096})",
      256);
  const auto [copies, charged] = run.copies();
  EXPECT_EQ(copies, 16 * 3);  // every expert of the first layer, gate, up and down
  EXPECT_EQ(charged, 3);      // one copy per fused tensor
}

// With gaps between the used experts (64 experts, 2 per token, 32 tokens: about a third unused), one
// charged copy per run of consecutive used experts, counted from the step's own reads.
TEST(OpOffload, EachRunOfConsecutiveUsedExpertsIsOneCopy) {
  const CpuMoePrompt run(
      R"({"model_type": "qwen3_moe", "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
          "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64, "vocab_size": 1000, "num_experts": 64,
          "num_experts_per_tok": 2, "moe_intermediate_size": 64, "max_position_embeddings": 4096})",
      32);
  // The experts each kind's ops read, and the runs they make (the first layer's: the last one's run on the output
  // row only, on the CPU).
  std::map<std::string, std::set<int>> used;
  for (const auto& op : run.step.ops)
    for (const auto& r : op.reads) {
      if (op.tokens > 0) continue;
      const std::string& name = run.gen.header().tensors[r.tensor].name;
      if (name.find("_exps.weight") != std::string::npos) used[name].insert(static_cast<int>(r.offset / r.bytes));
    }
  int runs = 0, experts = 0;
  for (const auto& [kind, ids] : used) {
    experts += static_cast<int>(ids.size());
    int last = -2;
    for (const int e : ids) {
      runs += e != last + 1;
      last = e;
    }
  }
  ASSERT_LT(experts, 3 * 64);  // there are gaps
  ASSERT_GT(runs, 3);
  const auto [copies, charged] = run.copies();
  EXPECT_EQ(copies, experts);
  EXPECT_EQ(charged, runs);
}

}  // namespace
}  // namespace tiersim

namespace tiersim {
namespace {

// llama.cpp's MUL_MAT_ID (one kernel over every expert a batch routed to) has its own measured rates: an op over
// one expert's slice of a fused experts tensor takes gpu_gemm_id / gpu_gemv_id, a dense matrix gpu_gemm / gpu_gemv;
// a runtime without the _id rates prices both alike.
TEST(ExpertKernels, AnExpertSliceTakesTheRuntimesStackOfExpertsRatesAndADenseMatrixItsPlainOnes) {
  const auto config = model::parse_model_config(
      R"({"model_type": "qwen3_moe", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1000, "num_experts": 16,
          "num_experts_per_tok": 4, "moe_intermediate_size": 128, "max_position_embeddings": 4096})",
      "tiny-moe.json");
  model::GenerationOptions o;
  model::set_dtype(o, "Q8_0");
  o.prompt_tokens = 256;
  o.decode_tokens = 1;
  const auto hw = hw::resolve_profile("h100-measured");
  auto plans = [&](const runtime::RuntimeProfile& rt) {
    model::LlmTraceGenerator gen(config, o);
    strategy::StrategySpec spec;
    spec.placement = strategy::PartSpec::parse("llamacpp.ngl", "--placement");
    spec.custom = true;
    const auto p = strategy::compose(gen.header(), hw, spec);
    replay::StepPlanner planner({hw, rt}, gen.header(), p);
    std::vector<std::pair<trace::Step, replay::StepPlan>> out;
    trace::Step step;
    while (gen.next(step)) {
      out.emplace_back(step, replay::StepPlan{});
      planner.plan(out.back().first, out.back().second);
    }
    return std::make_pair(gen.header(), out);
  };
  runtime::RuntimeProfile rt = runtime::resolve_runtime("llamacpp");
  rt.gpu_gemv = {{"q8_0", 2e12}};
  rt.gpu_gemm = {{"q8_0", 200e12}};
  rt.gpu_gemm_id_share = 0;  // the assumed runtime's share of the dense rate: tested below
  runtime::RuntimeProfile with_id = rt;
  with_id.gpu_gemv_id = {{"q8_0", 0.5e12}};
  with_id.gpu_gemm_id = {{"q8_0", 20e12}};
  const auto [header, plain] = plans(rt);
  const auto [header2, id] = plans(with_id);
  ASSERT_EQ(plain.size(), 2u);  // the prompt, one decode token
  int experts = 0, dense = 0;
  for (std::size_t s = 0; s < plain.size(); ++s) {
    const auto& step = plain[s].first;
    const auto& a = plain[s].second.actions;
    const auto& b = id[s].second.actions;
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (a[i].kind != ActionKind::Kernel || a[i].op < 0) continue;
      const trace::Op& op = step.ops[static_cast<std::size_t>(a[i].op)];
      if (op.dtype != "q8_0" || (op.kind != trace::OpKind::Gemm && op.kind != trace::OpKind::Gemv)) continue;
      bool slice = false;
      double weight = 0;
      for (const auto& r : op.reads)
        if (header.tensors[r.tensor].kind == trace::TensorKind::Weight) {
          slice |= r.bytes < header.tensors[r.tensor].bytes;
          weight += static_cast<double>(r.bytes);
        }
      if (!slice) {
        ++dense;
        EXPECT_DOUBLE_EQ(a[i].cost.compute_seconds, b[i].cost.compute_seconds);
        continue;
      }
      ++experts;
      if (op.kind == trace::OpKind::Gemm) {
        EXPECT_DOUBLE_EQ(a[i].cost.compute_seconds, static_cast<double>(op.flops) / 200e12);
        EXPECT_DOUBLE_EQ(b[i].cost.compute_seconds, static_cast<double>(op.flops) / 20e12);
      } else {
        EXPECT_GE(a[i].cost.compute_seconds, weight / 2e12);
        EXPECT_GE(b[i].cost.compute_seconds, weight / 0.5e12);
        EXPECT_LT(a[i].cost.compute_seconds, b[i].cost.compute_seconds);
      }
    }
  }
  // The prompt's 256 x 4 draws hit all 16 in the first layer; its last layer routes the output row only (inp_out_ids),
  // 4; a decode token hits 4 in each of the 2 layers; x 3 kinds.
  EXPECT_EQ(experts, 16 * 3 + 4 * 3 + 2 * 4 * 3);
  EXPECT_GT(dense, 0);
  // A share of the dense rate (the assumed runtime's form) slows the experts' prompt products by it, and nothing else.
  runtime::RuntimeProfile share = rt;
  share.gpu_gemm_id_share = 0.25;
  const auto [header3, shared] = plans(share);
  int slowed = 0;
  for (std::size_t s = 0; s < plain.size(); ++s)
    for (std::size_t i = 0; i < plain[s].second.actions.size(); ++i) {
      const auto& a = plain[s].second.actions[i];
      const auto& c = shared[s].second.actions[i];
      if (a.kind != ActionKind::Kernel || a.op < 0) continue;
      const trace::Op& op = plain[s].first.ops[static_cast<std::size_t>(a.op)];
      bool slice = false;
      for (const auto& r : op.reads) slice |= header.tensors[r.tensor].kind == trace::TensorKind::Weight && r.bytes < header.tensors[r.tensor].bytes;
      if (slice && op.kind == trace::OpKind::Gemm) {
        ++slowed;
        EXPECT_DOUBLE_EQ(c.cost.compute_seconds, 4 * a.cost.compute_seconds);
      } else {
        EXPECT_DOUBLE_EQ(c.cost.compute_seconds, a.cost.compute_seconds);
      }
    }
  EXPECT_EQ(slowed, 16 * 3);  // the prompt's first layer: its last layer's experts see one row (GEMVs)
}

// A two-layer Qwen3 of hidden 256 (the matrix-kernel tests' model).
model::ModelConfig tiny_qwen3() {
  return model::parse_model_config(
      R"({"model_type": "qwen3", "hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1000,
          "max_position_embeddings": 4096})",
      "tiny.json");
}

// The first step of the tiny Qwen3 in Q8_0 as a GGUF trace, placed by llama.cpp's rule on the measured H100, and its
// plan under a runtime.
struct TinyGgufStep {
  hw::HardwareProfile hw = hw::resolve_profile("h100-measured");
  model::LlmTraceGenerator gen;
  placement::Placement p;
  trace::Step step;
  TinyGgufStep(std::uint32_t prompt, std::uint32_t decode) : gen(tiny_qwen3(), options(prompt, decode)) {
    strategy::StrategySpec spec;
    spec.placement = strategy::PartSpec::parse("llamacpp.ngl", "--placement");
    spec.custom = true;
    p = strategy::compose(gen.header(), hw, spec);
    EXPECT_TRUE(gen.next(step));
  }
  replay::StepPlan plan(const runtime::RuntimeProfile& rt) {
    replay::StepPlanner planner({hw, rt}, gen.header(), p);
    replay::StepPlan out;
    planner.plan(step, out);
    return out;
  }
  static model::GenerationOptions options(std::uint32_t prompt, std::uint32_t decode) {
    model::GenerationOptions o;
    model::set_dtype(o, "Q8_0");
    o.prompt_tokens = prompt;
    o.decode_tokens = decode;
    return o;
  }
};

// llama.cpp's matrix-vector kernel has one thread block per output row (ggml-cuda/mmvq.cu): a GGUF trace's decode GEMV
// says so (`blocks`), and a runtime's gpu_gemv_rows prices it as its fixed time plus the rows at the rate of their
// length, in place of gpu_gemv; transformers' GEMVs give no grid.
TEST(GemvRows, AGgufDecodeProductCostsItsFixedTimeAndItsRowsAtTheirRate) {
  const auto config = tiny_qwen3();
  const auto hw = hw::resolve_profile("h100-measured");
  auto decode = [&](const std::string& dtype, const runtime::RuntimeProfile& rt) {
    model::GenerationOptions o;
    model::set_dtype(o, dtype);
    o.prompt_tokens = 0;
    o.decode_tokens = 1;
    model::LlmTraceGenerator gen(config, o);
    strategy::StrategySpec spec;
    spec.placement = strategy::PartSpec::parse(dtype == "Q8_0" ? "llamacpp.ngl" : "resident", "--placement");
    spec.custom = true;
    const auto p = strategy::compose(gen.header(), hw, spec);
    replay::StepPlanner planner({hw, rt}, gen.header(), p);
    trace::Step step;
    EXPECT_TRUE(gen.next(step));
    replay::StepPlan plan;
    planner.plan(step, plan);
    return std::make_tuple(gen.header(), step, plan);
  };
  runtime::RuntimeProfile rt = runtime::resolve_runtime("llamacpp");
  rt.gpu_gemv = {{"q8_0", 2e12}};
  rt.kernel_floor = 0;
  runtime::GemvRowKernel k;
  k.fixed = 3e-6;
  k.row_rates = {{1, 100e9}};  // every row length at 100 GB/s
  rt.gpu_gemv_rows = {{"q8_0", k}};
  const auto [header, step, plan] = decode("Q8_0", rt);
  int priced = 0;
  for (const auto& a : plan.actions) {
    if (a.kind != ActionKind::Kernel || a.op < 0) continue;
    const trace::Op& op = step.ops[static_cast<std::size_t>(a.op)];
    if (op.kind != trace::OpKind::Gemv || op.dtype != "q8_0") continue;
    double weight = 0, out = 0;
    for (const auto& r : op.reads)
      if (header.tensors[r.tensor].kind == trace::TensorKind::Weight) weight += static_cast<double>(r.bytes);
    for (const auto& w : op.writes) out += static_cast<double>(w.bytes);
    // one block per output row: 16-bit activations, the head's logits in f32 (it runs after the 2 layers, group 2)
    EXPECT_EQ(static_cast<double>(op.blocks), out / (op.layer == 2 ? 4 : 2));
    EXPECT_NEAR(a.cost.compute_seconds, 3e-6 + weight / 100e9, 1e-12);
    ++priced;
  }
  EXPECT_EQ(priced, 2 * 7 + 1);  // q, k, v, o, gate, up, down per layer and the output head
  model::GenerationOptions hf;
  model::set_dtype(hf, "bf16");
  hf.decode_tokens = 1;
  model::LlmTraceGenerator gen(config, hf);
  trace::Step hf_step;
  ASSERT_TRUE(gen.next(hf_step));
  for (const auto& op : hf_step.ops) EXPECT_EQ(op.blocks, 0u);
}

// Without CUDA graphs the GPU waits between kernels the host launches one by one: a runtime's gpu_launch_gap adds that
// wait to every launch of every kernel (llamacpp-h100-nographs measured it: cpu_matmul_bench's products with and
// without graphs, raw/gpu_gemv_graphs.csv and gpu_gemv_nographs.csv); the graph-replayed runtime has none.
TEST(LaunchGap, EveryHostLaunchedKernelWaitsTheRuntimesGap) {
  TinyGgufStep decode(0, 1);
  auto kernels = [&](const runtime::RuntimeProfile& rt) {
    std::vector<std::pair<double, std::uint32_t>> k;  // work, launches
    for (const auto& a : decode.plan(rt).actions)
      if (a.kind == ActionKind::Kernel && a.op >= 0)
        k.emplace_back(a.work_seconds, decode.step.ops[static_cast<std::size_t>(a.op)].launches);
    return k;
  };
  runtime::RuntimeProfile rt = runtime::resolve_runtime("llamacpp-h100");
  EXPECT_EQ(rt.gpu_launch_gap, 0.0);
  const auto with_graphs = kernels(rt);
  rt.gpu_launch_gap = 0.5e-6;
  const auto without = kernels(rt);
  ASSERT_EQ(with_graphs.size(), without.size());
  ASSERT_GT(with_graphs.size(), 10u);
  for (std::size_t i = 0; i < without.size(); ++i)
    EXPECT_NEAR(without[i].first - with_graphs[i].first, 0.5e-6 * with_graphs[i].second, 1e-12) << i;
  EXPECT_GT(runtime::resolve_runtime("llamacpp-h100-nographs").gpu_launch_gap, 0.0);
}

// Above 8 tokens the product is llama.cpp's MMQ: a GGUF prompt's GEMM gives its weight's rows (`rows`), and a runtime's
// gpu_gemm_rows prices it as its fixed time plus the FLOPs as if the matrix had extra_rows more rows, at its rate.
TEST(GemmRows, AGgufPromptProductCostsItsShape) {
  TinyGgufStep prompt(64, 0);
  const trace::Step& step = prompt.step;
  runtime::RuntimeProfile rt = runtime::resolve_runtime("llamacpp");
  rt.gpu_gemm = {{"q8_0", 200e12}};
  rt.gpu_gemm_rows = {{"q8_0", runtime::GemmRowsKernel{5e-6, 100e12, 256}}};
  const replay::StepPlan plan = prompt.plan(rt);
  int priced = 0;
  for (const auto& a : plan.actions) {
    if (a.kind != ActionKind::Kernel || a.op < 0) continue;
    const trace::Op& op = step.ops[static_cast<std::size_t>(a.op)];
    if (op.kind != trace::OpKind::Gemm || op.dtype != "q8_0") continue;
    ASSERT_GT(op.rows, 0u);
    EXPECT_EQ(op.blocks, 0u);
    const double rows = op.rows;
    EXPECT_NEAR(a.cost.compute_seconds, 5e-6 + static_cast<double>(op.flops) * (rows + 256) / rows / 100e12, 1e-12);
    ++priced;
  }
  // q, k, v, o, gate, up, down of the first layer, q, k, v, o of the last (its FFN runs on the output row only,
  // inp_out_ids: GEMVs), and the head on the last token is a GEMV too
  EXPECT_EQ(priced, 7 + 4);
}

// llama.cpp's last layer after its attention keeps the rows whose logits are output (inp_out_ids, src/models/qwen3.cpp):
// at the prompt's last micro-batch one per sequence, marked `tokens`, its products GEMVs; at the micro-batches before
// it none (ggml skips the empty nodes); transformers runs every row through every layer.
TEST(LastLayer, LlamaCppRunsItsFfnOnTheOutputRowsOnly) {
  const auto config = tiny_qwen3();
  auto steps = [&](const std::string& dtype) {
    model::GenerationOptions o;
    model::set_dtype(o, dtype);
    o.prompt_tokens = 64;
    o.ubatch = 32;
    o.decode_tokens = 1;
    model::LlmTraceGenerator gen(config, o);
    std::vector<trace::Step> out;
    trace::Step step;
    while (gen.next(step)) out.push_back(step);
    return out;
  };
  auto matmuls = [](const trace::Step& s, std::int32_t layer, bool cut) {
    int n = 0;
    for (const auto& op : s.ops)
      if (op.layer == layer && (op.kind == trace::OpKind::Gemm || op.kind == trace::OpKind::Gemv) && (op.tokens > 0) == cut) ++n;
    return n;
  };
  const auto gguf = steps("Q8_0");
  ASSERT_EQ(gguf.size(), 3u);  // two micro-batches of 32, one decode token
  EXPECT_EQ(matmuls(gguf[0], 0, false), 7);
  EXPECT_EQ(matmuls(gguf[0], 1, false), 4);  // q, k, v, o: no FFN before the last micro-batch
  EXPECT_EQ(matmuls(gguf[0], 1, true), 0);
  EXPECT_EQ(matmuls(gguf[1], 1, false), 4);
  EXPECT_EQ(matmuls(gguf[1], 1, true), 3);   // gate, up, down on the output row
  for (const auto& op : gguf[1].ops)
    if (op.tokens > 0) {
      EXPECT_EQ(op.tokens, 1u);
      EXPECT_EQ(op.layer, 1);
      EXPECT_NE(op.kind, trace::OpKind::Gemm);
    }
  EXPECT_EQ(matmuls(gguf[2], 1, false), 7);  // decode: every row is an output
  const auto hf = steps("bf16");
  for (const auto& s : hf)
    for (const auto& op : s.ops) EXPECT_EQ(op.tokens, 0u);
}

// Against llama.cpp's own run (tests/fixtures/llamacpp_prompt_kernels.json: the kernels of Qwen3-4B Q4_K_M's 512-token
// prompt under Nsight Compute): 249 MMQ products (7 in each of 35 layers, 4 in the last, whose FFN runs on the output
// row) and 35 GLU kernels (none in the last layer, where it is fused into the matrix-vector product). tiersim's trace
// has the same 249 prompt-sized products; its last-layer FFN is gate, up and down on one row, where llama.cpp fuses
// gate, up and the GLU into one of its 3 MMVQ launches (gate+up, down, the head): the fusion is not modelled.
TEST(LastLayer, ThePromptsProductsAreTheOnesLlamaCppLaunched) {
  std::ifstream in(std::string(TIERSIM_SOURCE_DIR) + "/tests/fixtures/llamacpp_prompt_kernels.json");
  ASSERT_TRUE(in);
  const auto f = nlohmann::json::parse(in);
  const auto config = model::load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/" + f["model"].get<std::string>());
  ASSERT_EQ(config.num_hidden_layers, f["layers"].get<std::uint64_t>());
  model::GenerationOptions o;
  model::set_dtype(o, f["file_type"].get<std::string>());
  o.prompt_tokens = f["prompt_tokens"].get<std::uint32_t>();
  o.decode_tokens = 0;
  model::LlmTraceGenerator gen(config, o);
  trace::Step step;
  ASSERT_TRUE(gen.next(step));
  int gemms = 0, gemvs = 0;
  for (const auto& op : step.ops) {
    gemms += op.kind == trace::OpKind::Gemm;
    gemvs += op.kind == trace::OpKind::Gemv;
  }
  EXPECT_EQ(gemms, f["mul_mat_q"].get<int>());
  EXPECT_EQ(gemvs, f["mul_mat_vec_q"].get<int>() + 1);  // gate and up as two (fused in llama.cpp), down, the head
}

}  // namespace
}  // namespace tiersim
