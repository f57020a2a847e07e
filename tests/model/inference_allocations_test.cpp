// Inference allocations (model/inference/inference_allocations.hpp) replayed through the caching allocator:
// the events' consistency, the sizes that follow from the config, and `sim run`'s PyTorch memory and its
// out-of-memory outcome.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "cli/allocator_replay.hpp"
#include "cli/generate_allocator_calls.hpp"
#include "hardware/profile_loader.hpp"
#include "model/inference/inference_allocations.hpp"
#include "model/model_config.hpp"
#include "model/training/training_memory.hpp"
#include "runtime/runtime_loader.hpp"
#include "support/run_sim.hpp"

namespace tiersim::model {
namespace {

ModelConfig qwen8b() { return load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen3-8b.json"); }

// Bytes of the model's parameters in bf16, as the allocation sequence holds them.
double bf16_parameter_bytes(const ModelConfig& m) {
  double bytes = 0;
  for (const auto& [layer, n] : parameter_tensors(m)) bytes += 2.0 * static_cast<double>(n);
  return bytes;
}

TEST(InferenceAllocations, EveryFreeNamesALiveTensorAndTheCacheIsWhatIsLeft) {
  const ModelConfig m = qwen8b();
  InferenceShape s;
  s.batch = 2;
  s.prompt = 300;
  s.decode = 5;
  std::map<std::uint64_t, std::uint64_t> live;
  for (const auto& e : inference_allocations(m, s)) {
    ASSERT_TRUE(e.kind == AllocationEvent::Kind::Allocate || e.kind == AllocationEvent::Kind::Free);  // one stream
    if (e.allocates()) {
      ASSERT_TRUE(live.emplace(e.tensor, e.bytes).second);
    } else {
      ASSERT_EQ(live.erase(e.tensor), 1u) << e.tensor;
    }
  }
  const double params = bf16_parameter_bytes(m);
  double left = 0;
  for (const auto& [id, bytes] : live) left += static_cast<double>(bytes);
  // Weights and the KV cache stay: keys and values of every layer for batch x (prompt + decode) tokens.
  const double kv = 2.0 * m.num_hidden_layers * 2 * (300 + 5) * m.num_key_value_heads * m.head_dim * 2;
  EXPECT_NEAR(left, params + kv, 1.0);
}

TEST(InferenceAllocations, TheLongPromptsPeakIsTheMlpOnTopOfWeightsCacheAndResidualStreams) {
  const ModelConfig m = qwen8b();
  InferenceShape s;
  s.prompt = 32768;
  s.decode = 2;
  const auto r = app::replay_allocations(inference_allocations(m, s), 1e18, 80e9);
  ASSERT_FALSE(r.oom);
  const double params = bf16_parameter_bytes(m);
  const double T = 32768, h = static_cast<double>(m.hidden_size), I = static_cast<double>(m.intermediate_size);
  const double kv_layer = 2.0 * T * m.num_key_value_heads * m.head_dim * 2;
  // The last layer's MLP: its cache is complete, and SiLU(gate), up and their product are alive with the
  // embedding output, the layer's input, the attention residual and the norm's output (four residual widths).
  const double expected = params + m.num_hidden_layers * kv_layer + 3 * T * I * 2 + 4 * T * h * 2;
  EXPECT_NEAR(r.peak("prefill").allocated, expected, 0.002 * expected);
  EXPECT_GE(r.peak("prefill").reserved, r.peak("prefill").allocated);
  // Decode holds the cache, one token's work on top.
  EXPECT_LT(r.peak("decode").allocated, r.peak("prefill").allocated);
  EXPECT_GT(r.peak("decode").allocated, params + m.num_hidden_layers * kv_layer);
}

// accelerate's offload: an offloaded module's weights are not allocated at load, and its hook allocates them just
// before the module's output and frees them just after (hooks.py AlignDevicesHook pre_forward / post_forward).
TEST(InferenceAllocations, AccelerateHooksBringEachOffloadedModulesWeightsInForItsForward) {
  const ModelConfig m = qwen8b();
  InferenceShape s;
  s.prompt = 64;
  s.decode = 2;
  const auto resident = inference_allocations(m, s);
  s.offloaded.layers.assign(m.num_hidden_layers, false);
  for (std::size_t l = 20; l < m.num_hidden_layers; ++l) s.offloaded.layers[l] = true;
  s.offloaded.norm = s.offloaded.head = true;
  const auto events = inference_allocations(m, s);
  double loaded = 0, offloaded = 0, resident_loaded = 0;
  for (const auto& e : resident)
    if (e.allocates() && e.step == 0) resident_loaded += static_cast<double>(e.bytes);
  std::map<std::uint64_t, const AllocationEvent*> hooked;
  std::size_t freed_next = 0, hooks = 0;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i];
    if (e.allocates() && e.step == 0) loaded += static_cast<double>(e.bytes);
    if (e.allocates() && e.what.find("(accelerate hook)") != std::string::npos) {
      hooked[e.tensor] = &e;
      ++hooks;
      if (e.step == 1) offloaded += static_cast<double>(e.bytes);
      // Its module's output comes next (a norm's fp32 copy first), then the weights go.
      ASSERT_LT(i + 1, events.size());
      EXPECT_TRUE(events[i + 1].allocates());
    }
    if (e.kind == AllocationEvent::Kind::Free && hooked.count(e.tensor)) {
      ++freed_next;
      hooked.erase(e.tensor);
    }
  }
  EXPECT_TRUE(hooked.empty());  // every hook's weights freed
  EXPECT_EQ(freed_next, hooks);
  // 16 layers x 11 modules (2 norms, q, q_norm, k, k_norm, v, o, gate, up, down), the final norm and the head, per
  // forward: the prefill and 2 decode steps.
  EXPECT_EQ(hooks, 3u * (16 * 11 + 2));
  EXPECT_NEAR(loaded + offloaded, resident_loaded, 1.0);  // what leaves the load comes back in the first forward
  InferenceShape tied = s;
  tied.offloaded.head = false;
  ModelConfig small = load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen3-0.6b.json");
  tied.offloaded.layers.assign(small.num_hidden_layers, false);
  tied.offloaded.embedding = true;
  EXPECT_THROW(inference_allocations(small, tied), std::invalid_argument);  // tied, offloaded on one side
}

// Qwen3-MoE under transformers 5's grouped_mm (integrations/moe.py grouped_mm_experts_forward): at a long prompt the
// peak is the last layer's experts, where every local of the function is alive: the gathered hidden states, the masked
// down projection, the weighted rows and those rows in token order (four S x h tensors, S = tokens x top-k), the sort's
// and the gather's small per-row tensors, the router's logits and the routing, on top of the weights, the whole cache
// and the four residual-width tensors a layer holds (embedding output, layer input, attention residual, norm output).
TEST(InferenceAllocations, AQwen3MoeLongPromptsPeakIsItsLastLayersGroupedExperts) {
  const ModelConfig m = load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen3-30b-a3b.json");
  InferenceShape s;
  s.prompt = 16384;
  s.decode = 1;
  const auto r = app::replay_allocations(inference_allocations(m, s), 1e18, 200e9);
  ASSERT_FALSE(r.oom);
  const double params = bf16_parameter_bytes(m);
  EXPECT_NEAR(params / 2, static_cast<double>(m.total_params()), 1.0);  // the fused experts hold every parameter
  const double T = 16384, h = static_cast<double>(m.hidden_size), E = static_cast<double>(m.num_experts);
  const double k = static_cast<double>(m.num_experts_per_tok), S = T * k, a = 2;
  const double kv = m.num_hidden_layers * 2.0 * T * m.num_key_value_heads * m.head_dim * a;
  const double expected = params + kv + 4 * S * h * a + 4 * T * h * a + T * E * a + T * k * (a + 8) +
                          S * (8 + 8 + a + 4 + 1 + 8) + 2 * E * 4;
  EXPECT_NEAR(r.peak("prefill").allocated, expected, 0.001 * expected);
  // Mixtral's router keeps its weights in fp32: the weighted rows and the rows in token order are fp32 (S x h x 4).
  const ModelConfig mixtral = load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/mixtral-8x7b.json");
  InferenceShape short_prompt;
  short_prompt.prompt = 4096;
  std::uint64_t fp32_rows = 0;
  for (const auto& e : inference_allocations(mixtral, short_prompt))
    if (e.allocates() && e.step == 1 && e.what == "layer 0 rows in token order") fp32_rows = e.bytes;
  EXPECT_EQ(fp32_rows, 4096u * 2 * 4096 * 4);
  // The other families' blocks are refused, not priced as these.
  const ModelConfig gpt = load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/gpt-oss-20b.json");
  EXPECT_THROW(inference_allocations(gpt, InferenceShape{}), std::invalid_argument);
}

}  // namespace
}  // namespace tiersim::model

namespace tiersim::testing {
namespace {

TEST(RunCommand, PytorchMemoryOfAMixtureOfExpertsIsQwen3MoesAndMixtralsUnderGroupedMm) {
  const std::string run = "run --json --model traces/models/qwen3-30b-a3b.json --policy resident --hw h200 "
                          "--runtime pytorch-hf-h100 --prompt 512 --decode 2";
  const auto grouped = run_sim(run, false);
  ASSERT_EQ(grouped.code, 0) << grouped.out;
  const auto g = nlohmann::json::parse(grouped.out)["pytorch_memory"];
  EXPECT_FALSE(g.contains("not_modelled")) << g.dump();
  EXPECT_GT(g["prefill_peak_allocated_bytes"].get<double>(), 60e9);  // 61.1 GB of bf16 weights
  const auto eager = nlohmann::json::parse(run_sim(run + " --experts-impl eager", false).out)["pytorch_memory"];
  EXPECT_NE(eager["not_modelled"].get<std::string>().find("eager"), std::string::npos) << eager.dump();
  const auto gpt = nlohmann::json::parse(run_sim("run --json --model traces/models/gpt-oss-20b.json --policy resident "
                                                 "--hw h200 --runtime pytorch-hf-h100 --prompt 64 --decode 2",
                                                 false).out)["pytorch_memory"];
  EXPECT_NE(gpt["not_modelled"].get<std::string>().find("gpt_oss"), std::string::npos) << gpt.dump();
}

TEST(RunCommand, PytorchMemoryIsReportedAndRunningOutIsTheOutcome) {
  const std::string base = "run --model traces/models/qwen3-8b.json --hw rtx4090 --runtime pytorch-hf-h100 "
                           "--policy resident --decode 4 --json --prompt ";
  const auto fits = run_sim(base + "16384", false);
  ASSERT_EQ(fits.code, 0) << fits.out;
  const auto j = nlohmann::json::parse(fits.out)["pytorch_memory"];
  EXPECT_GT(j["prefill_peak_reserved_bytes"].get<double>(), j["prefill_peak_allocated_bytes"].get<double>());
  EXPECT_GT(j["prefill_peak_allocated_bytes"].get<double>(), j["decode_peak_allocated_bytes"].get<double>());
  // 32k tokens: weights, cache and the static activation estimate fit the card, the prefill's transients do not.
  const auto oom = run_sim(base + "32768", false);
  EXPECT_EQ(oom.code, 3) << oom.out;
  const auto o = nlohmann::json::parse(oom.out)["pytorch_memory"]["out_of_memory"];
  EXPECT_EQ(o["phase"], "prefill");
  EXPECT_EQ(o["step"], 1);
  EXPECT_EQ(o["device"], "cuda:0");
  EXPECT_GT(o["requested_bytes"].get<double>(), 0);
  EXPECT_NE(o["tensor"].get<std::string>().find("layer"), std::string::npos);
  const auto console = run_sim("run --model traces/models/qwen3-8b.json --hw rtx4090 --runtime pytorch-hf-h100 "
                               "--policy resident --decode 4 --prompt 32768", false);
  EXPECT_EQ(console.code, 3);
  EXPECT_NE(console.out.find("OUT OF MEMORY in step 1 (prefill)"), std::string::npos) << console.out;
  // accelerate's own offload is modelled: its GPU part, the activations and one offloaded module's weights at a time.
  const auto acc = run_sim("run --model traces/models/qwen3-8b.json --hw rtx4090 --runtime pytorch-hf-h100 "
                           "--policy accelerate --placement \"accelerate.auto:max_memory=0=8GiB;cpu=100GiB\" "
                           "--prompt 4096 --decode 2 --json", false);
  ASSERT_EQ(acc.code, 0) << acc.out;
  const auto a = nlohmann::json::parse(acc.out)["pytorch_memory"];
  ASSERT_FALSE(a.contains("not_modelled")) << a.dump();
  EXPECT_GT(a["prefill_peak_allocated_bytes"].get<double>(), 7e9);
  EXPECT_LT(a["prefill_peak_allocated_bytes"].get<double>(), 9.5e9);
  // Offloaded weights of another framework, llama.cpp, a GGUF file: no allocator prediction (JSON says why;
  // llama.cpp has none).
  const auto off = run_sim("run --model traces/models/qwen3-8b.json --hw rtx4090 --policy ratio --json", false);
  EXPECT_EQ(off.code, 0) << off.out;
  EXPECT_TRUE(nlohmann::json::parse(off.out)["pytorch_memory"].contains("not_modelled"));
  const auto llama = run_sim("run --model traces/models/qwen3-8b.json --hw rtx4090 --policy llamacpp --ngl 99 --json", false);
  EXPECT_FALSE(nlohmann::json::parse(llama.out).contains("pytorch_memory")) << llama.out.substr(0, 300);
}

TEST(RunCommand, AllocConfIsPytorchsAndTravelsWithTheResult) {
  const std::string base = "run --model traces/models/qwen3-8b.json --hw h100-measured --runtime pytorch-hf-h100 "
                           "--policy resident --decode 4 --prompt 32768 --json";
  const auto plain = run_sim(base, false), expandable = run_sim(base + " --alloc-conf expandable_segments:True", false);
  ASSERT_EQ(plain.code, 0);
  ASSERT_EQ(expandable.code, 0) << expandable.out;
  const auto p = nlohmann::json::parse(plain.out), e = nlohmann::json::parse(expandable.out);
  // Expandable segments map what is asked for, 2 MiB at a time: less reserved beyond what is allocated.
  EXPECT_LT(e["pytorch_memory"]["prefill_peak_reserved_bytes"].get<double>(),
            p["pytorch_memory"]["prefill_peak_reserved_bytes"].get<double>());
  EXPECT_EQ(e["inputs"]["alloc_conf"], "expandable_segments:True");
  EXPECT_FALSE(p["inputs"].contains("alloc_conf"));
  // A setting PyTorch would refuse, or one not modelled, is bad input naming the flag.
  for (const char* bad : {"max_split_size_mb:5", "backend:cudaMallocAsync", "expandable_segments:yes"}) {
    const auto r = run_sim(base + " --alloc-conf " + bad, true);
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_NE(r.out.find("--alloc-conf"), std::string::npos) << r.out;
  }
  const auto t = run_sim("train --model traces/models/qwen3-4b.json --hw h100-measured --optimizer sgd --json "
                         "--alloc-conf expandable_segments:True", false);
  ASSERT_EQ(t.code, 0) << t.out;
  const auto tj = nlohmann::json::parse(t.out);
  EXPECT_EQ(tj["alloc_conf"], "expandable_segments:True");
  EXPECT_LT(tj["allocator_peak_reserved_bytes"].get<double>() - tj["allocator_peak_allocated_bytes"].get<double>(),
            1e9);
}

TEST(GenerateAllocatorCalls, TheModelledCountsAreTheAllocatorsMeasuredCallsWithinThreePercent) {
  // The allocator's own count of cudaMallocManaged calls in one prefill (128 tokens) and each decode token of
  // transformers' generate() on an H200 (allocator_census --sizes, results/validation/um-oversubscription/
  // allocator_sizes.jsonl): what the per-tensor allocator's host time is charged for. The model leaves out generate's
  // own bookkeeping (about 10 calls per token) and over-counts a few small tensors.
  const std::map<std::string, std::string> file = {{"Qwen3-8B", "qwen3-8b.json"}, {"Llama-3.1-8B", "llama-3.1-8b.json"}};
  std::ifstream log(std::string(TIERSIM_SOURCE_DIR) + "/results/validation/um-oversubscription/allocator_sizes.jsonl");
  ASSERT_TRUE(log) << "allocator_sizes.jsonl";
  const runtime::RuntimeProfile runtime = runtime::resolve_runtime("pytorch-hf-h200");
  int checked = 0;
  for (std::string line; std::getline(log, line);) {
    const auto row = nlohmann::json::parse(line);
    app::TraceSpec trace;
    trace.model_path = std::string(TIERSIM_SOURCE_DIR) + "/traces/models/" + file.at(row["model"].get<std::string>());
    trace.generation.prompt_tokens = row["prompt"].get<std::uint32_t>();
    trace.generation.decode_tokens = row["tokens"].get<std::uint32_t>();
    const auto calls = app::generate_allocator_calls(trace, runtime);
    ASSERT_TRUE(calls.has_value()) << row["model"];
    const double prefill = row["prefill_allocs"].get<double>(), decode = row["per_token"][1]["allocs"].get<double>();
    EXPECT_NEAR(calls->prefill, prefill, 0.03 * prefill) << row["model"];
    EXPECT_NEAR(calls->decode, decode, 0.03 * decode) << row["model"];
    ++checked;
  }
  EXPECT_EQ(checked, 2);
  // llama.cpp's runtime makes no such calls: not modelled.
  app::TraceSpec trace;
  trace.model_path = std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen3-8b.json";
  EXPECT_FALSE(app::generate_allocator_calls(trace, runtime::resolve_runtime("llamacpp-h100")).has_value());
}

TEST(GenerateAllocatorCalls, TheAdviceOnEveryCallIsChargedOnceAtItsSize) {
  // Seed 000's mode 3 (PreferredLocation=CPU + ReadMostly on every allocation) on h200-measured, whose
  // managed_memory.advised_cycle prices each call of the per-tensor allocator at its size: a Qwen3-8B decode step
  // is slower than with the same profile without the table by exactly the sum over generate()'s modelled calls (the
  // GPU has room; each op's cudaFree waits for the GPU, so host time adds to the step).
  const std::string dir = TIERSIM_SOURCE_DIR;
  std::ifstream in(dir + "/calib/profiles/h200-measured.yaml");
  std::stringstream text;
  text << in.rdbuf();
  std::string yaml = text.str();
  const auto at = yaml.find("  advised_cycle:\n");
  ASSERT_NE(at, std::string::npos);
  auto end = at + std::string("  advised_cycle:\n").size();
  while (yaml.compare(end, 4, "    ") == 0) end = yaml.find('\n', end) + 1;
  yaml.erase(at, end - at);
  const std::string without = ::testing::TempDir() + "h200-without-advised-cycle.yaml";
  std::ofstream(without) << yaml;
  const std::string run = "--model traces/models/qwen3-8b.json --prompt 128 --decode 3 --placement all-gpu --json "
                          "--memory managed:prefer-cpu,read-mostly,allocator=per-tensor,advise=all --hw ";
  auto step = [&](const std::string& hw) {
    const SimRun r = run_sim(run + hw, false);
    EXPECT_EQ(r.code, 0) << r.out;
    return r.code == 0 ? nlohmann::json::parse(r.out)["step_seconds"].get<double>() : 0.0;
  };
  app::TraceSpec trace;
  trace.model_path = dir + "/traces/models/qwen3-8b.json";
  trace.generation.prompt_tokens = 128;
  trace.generation.decode_tokens = 3;
  const auto calls = app::generate_allocator_calls(trace, runtime::resolve_runtime("pytorch-eager"));
  ASSERT_TRUE(calls.has_value());
  ASSERT_EQ(calls->decode_bytes.size(), static_cast<std::size_t>(calls->decode));
  const auto profile = hw::resolve_profile("h200-measured");
  double expected = 0;
  for (double b : calls->decode_bytes) expected += profile.managed_memory->advised_cycle_seconds(false, true, b);
  EXPECT_GT(expected, 0.02);  // ~2200 calls of 10-60 us
  EXPECT_NEAR(step("h200-measured") - step(without), expected, 1e-6 + 1e-3 * expected);
}

}  // namespace
}  // namespace tiersim::testing
