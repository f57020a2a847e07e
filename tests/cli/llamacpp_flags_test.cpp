// llama.cpp's user-facing flags as a user runs them: --fit on a 12 GB card, --ctx-size, and the runtime
// measured without CUDA graphs.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>

#include "support/run_sim.hpp"

namespace {

using tiersim::testing::run_sim;

const std::string kQwen14 = "run --model traces/models/qwen3-14b.json --dtype Q4_K_M --policy llamacpp --hw rtx4070 ";

TEST(LlamaCppFlags, FitKeepsEveryLayerOnA12GbCardAtAShorterContextAndMovesLayersForALongOne) {
  const auto fit = run_sim(kQwen14 + "--prompt 64 --decode 8");
  ASSERT_EQ(fit.code, 0) << fit.out;
  EXPECT_NE(fit.out.find("would print: -c 13824 -ngl -1"), std::string::npos) << fit.out;
  const auto longer = run_sim(kQwen14 + "--prompt 64 --decode 8 --ctx-size 32768");
  ASSERT_EQ(longer.code, 0) << longer.out;
  EXPECT_NE(longer.out.find("would print: -c 32768 -ngl 31"), std::string::npos) << longer.out;
  EXPECT_NE(longer.out.find("30 of 40 repeating layers on the GPU"), std::string::npos) << longer.out;
  // Off: llama.cpp loads every layer with the training context (40960) and does not fit.
  const auto off = run_sim(kQwen14 + "--prompt 64 --decode 8 --fit off --json", false);
  EXPECT_EQ(off.code, 3) << off.out;
  const auto bad = run_sim(kQwen14 + "--fit maybe");
  EXPECT_EQ(bad.code, 2) << bad.out;
  const auto bad_target = run_sim(kQwen14 + "--fit-target 1GiB");
  EXPECT_EQ(bad_target.code, 2) << bad_target.out;
  EXPECT_NE(bad_target.out.find("fit-target"), std::string::npos) << bad_target.out;
}

double tps(const std::string& args) {
  const auto r = run_sim(args + " --json", false);
  EXPECT_EQ(r.code, 0) << args << "\n" << r.out;
  return r.code == 0 ? nlohmann::json::parse(r.out)["tps"].get<double>() : 0.0;
}

TEST(LlamaCppFlags, WithoutCudaGraphsEveryKernelLaunchCostsTheHost) {
  // A model whose kernels are too small to keep the GPU ahead of the host (the 16-layer calibration model, hidden
  // 256): without graphs each launch's host time sets the pace. Measured 1224 against 517 us per token
  // (results/validation/llamacpp/raw/graphs.jsonl, the rows llamacpp-h100-nographs is calibrated from). Where the
  // GPU's kernels are long (Qwen3-4B, 255 against 315 tokens/s) the host keeps ahead and what is left is the GPU's own
  // gap before each host-launched kernel (the runtime's gpu_launch_gap; tests/engine/llamacpp_runtime_test.cpp).
  const std::string run = "run --model experiments/llamacpp/models/calib-tiny-16.json --dtype Q8_0 --policy llamacpp "
                          "--hw h100-measured --ngl 99 --prompt 0 --decode 32 --fit off --runtime ";
  const double with = tps(run + "llamacpp-h100"), without = tps(run + "llamacpp-h100-nographs");
  EXPECT_LT(without, 0.6 * with);
  EXPECT_GT(without, 0.3 * with);
}

// What llama.cpp's scheduler copies around each layer's KV store, from its own GGML_SCHED_DEBUG=2 output: per
// layer, the bytes of the CPU split that holds the SET_ROWS (its inputs: the new Kcur and Vcur) and the cache views
// the next GPU split takes in for FLASH_ATTN (cache_k_lN, cache_v_lN), with where FLASH_ATTN ran.
struct SchedRoundTrip {
  std::vector<double> to_host, to_gpu;  // per layer, bytes
  int set_rows_on_cpu = 0, flash_on_gpu = 0, other_cpu_nodes = 0;
};

SchedRoundTrip read_sched_log(const std::string& fixture) {
  std::ifstream in(std::string(TIERSIM_SOURCE_DIR) + "/tests/fixtures/" + fixture);
  EXPECT_TRUE(in.good()) << fixture;
  const std::regex split(R"(^## SPLIT #\d+: (\w+) # \d+ inputs)"), input(R"(\[(\S+)( \(view\))?( \(permuted\))? \(\s*(\d+)K\)\])");
  SchedRoundTrip r;
  std::string line;
  double inputs = 0, views = 0;
  bool cpu = false;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, split)) {
      cpu = m[1] == "CPU";
      inputs = views = 0;
      for (std::sregex_iterator it(line.begin(), line.end(), input), end; it != end; ++it) {
        inputs += 1024.0 * std::stod((*it)[4]);
        if ((*it)[1].str().rfind("cache_", 0) == 0) views += 1024.0 * std::stod((*it)[4]);
      }
    } else if (line.rfind("node #", 0) == 0) {
      if (line.find("SET_ROWS") != std::string::npos) {
        r.set_rows_on_cpu += cpu;
        if (cpu && (r.to_host.size() < r.to_gpu.size() + 1)) r.to_host.push_back(inputs);
      } else if (line.find("FLASH_ATTN") != std::string::npos) {
        r.flash_on_gpu += !cpu;
        r.to_gpu.push_back(views);
      } else if (cpu && line.find("GET_ROWS") == std::string::npos) {  // the embedding lookup aside
        ++r.other_cpu_nodes;
      }
    }
  }
  return r;
}

// The same, as tiersim runs it: the GPU track's copies before each layer's attention kernel in the first step.
SchedRoundTrip timeline_round_trip(const std::string& args) {
  // One file per test: ctest runs the tests that call this in parallel processes.
  const std::string path = ::testing::TempDir() + "tiersim_kv_round_trip_" +
                           ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".json";
  const auto run = run_sim(args + " --timeline " + path + " --timeline-steps 1", false);
  EXPECT_EQ(run.code, 0) << run.out;
  std::ifstream in(path);
  const auto events = nlohmann::json::parse(in)["traceEvents"];
  SchedRoundTrip r;
  double to_host = 0, to_gpu = 0;
  for (const auto& e : events) {
    if (e.value("ph", "") != "X" || !e.contains("args") || !e["args"].is_object()) continue;
    const std::string name = e["name"];
    if (name == "activations to host") to_host = e["args"].value("bytes", 0.0);
    if (name == "activations to GPU") to_gpu = e["args"].value("bytes", 0.0);
    if (name.rfind("attention L", 0) == 0 && e["args"].contains("bytes")) {  // the GPU kernel
      r.to_host.push_back(to_host);
      r.to_gpu.push_back(to_gpu);
      ++r.flash_on_gpu;
    }
  }
  std::remove(path.c_str());
  return r;
}

// --no-kv-offload against llama.cpp's own scheduler (tests/fixtures/llamacpp_nkvo_sched.log, a decode graph of this
// very calibration model): flash attention stays on and runs on the GPU; per layer the CPU runs the two KV stores
// alone, their inputs the new keys and values, and the next GPU split takes the cache's K and V views (256 cells).
TEST(LlamaCppFlags, NoKvOffloadCopiesTheCacheViewsInAsLlamaCppsSchedulerDoes) {
  const SchedRoundTrip ll = read_sched_log("llamacpp_nkvo_sched.log");
  EXPECT_EQ(ll.set_rows_on_cpu, 4);
  EXPECT_EQ(ll.other_cpu_nodes, 0);
  ASSERT_EQ(ll.flash_on_gpu, 2);
  EXPECT_EQ(ll.to_gpu, (std::vector<double>{131072, 131072}));
  const SchedRoundTrip ts = timeline_round_trip(
      "run --model experiments/llamacpp/models/calib-tiny-2.json --dtype F16 --policy llamacpp --hw h100-measured "
      "--ngl 99 --prompt 0 --decode 4 --fit off --ctx-size 128 --no-kv-offload --runtime llamacpp-h100");
  ASSERT_EQ(ts.flash_on_gpu, 2);
  EXPECT_EQ(ts.to_gpu, ll.to_gpu);
  // Kcur and Vcur in f32 (2 KV heads x 64 x 4 bytes each): under 1 KiB, which the log prints as 0K.
  EXPECT_EQ(ts.to_host, (std::vector<double>{1024, 1024}));
}

// A CPU layer's prompt micro-batch under op offload (tests/fixtures/llamacpp_offload_sched.log: 64 tokens at -ngl 0):
// its weights are copied in, flash attention follows them to the GPU, and its KV cache, in host memory, goes through
// the same round trip: Kcur and Vcur (32 KiB each) out to the CPU's stores, the K and V views (64 KiB each) back in.
TEST(LlamaCppFlags, OpOffloadCopiesAHostKvCacheAroundTheGpusAttentionAsLlamaCppsSchedulerDoes) {
  const SchedRoundTrip ll = read_sched_log("llamacpp_offload_sched.log");
  EXPECT_EQ(ll.set_rows_on_cpu, 4);
  EXPECT_EQ(ll.other_cpu_nodes, 0);
  ASSERT_EQ(ll.flash_on_gpu, 2);
  const SchedRoundTrip ts = timeline_round_trip(
      "run --model experiments/llamacpp/models/calib-tiny-2.json --dtype F16 --policy llamacpp --hw h100-measured "
      "--ngl 0 --prompt 64 --decode 0 --fit off --ctx-size 64 --runtime llamacpp-h100");
  ASSERT_EQ(ts.flash_on_gpu, 2);
  EXPECT_EQ(ts.to_gpu, ll.to_gpu);
  EXPECT_EQ(ts.to_host, ll.to_host);
}

// --n-cpu-moe N: the expert matrices of the first N layers in host memory (one -ot pattern per layer), the
// attention and the router on the GPU; decode slows as more experts are read by the CPU.
TEST(LlamaCppFlags, NCpuMoeKeepsTheFirstLayersExpertsInHostMemory) {
  const std::string run = "run --model traces/models/qwen3-30b-a3b.json --dtype Q4_K_M --policy llamacpp --hw rtx4090 "
                          "--ngl 99 --prompt 32 --decode 8 --ctx-size 4096 ";
  const auto half = run_sim(run + "--n-cpu-moe 24");
  ASSERT_EQ(half.code, 0) << half.out;
  EXPECT_NE(half.out.find("72 tensors (8.17 GiB) placed by 24 pattern(s)"), std::string::npos) << half.out;
  // --fit's first step as llama.cpp runs it for a mixture of experts too: the model fits as given, nothing changes.
  EXPECT_NE(half.out.find("--fit                  llama-fit-params would print: -c 4096 -ngl 99 ("), std::string::npos) << half.out;
  const double none = tps(run), some = tps(run + "--n-cpu-moe 24"), all = tps(run + "--cpu-moe");
  EXPECT_GT(none, 2 * some);
  EXPECT_GT(some, all);
  EXPECT_EQ(run_sim(run + "--n-cpu-moe -1").code, 2);
  // A user's own -ot pattern anchored at the tensor name's end matches the fused expert tensors as in llama.cpp
  // (the trace's names are the file's: blk.N.ffn_up_exps.weight, not one name per expert).
  const auto anchored = run_sim(run + "--override-tensor 'ffn_.*_exps\\.weight$=CPU'");
  ASSERT_EQ(anchored.code, 0) << anchored.out;
  EXPECT_NE(anchored.out.find("144 tensors (16.35 GiB) placed by 1 pattern(s)"), std::string::npos) << anchored.out;
  EXPECT_DOUBLE_EQ(tps(run + "--override-tensor 'ffn_.*_exps\\.weight$=CPU'"), all);
}

// A skewed routing and its seed are inputs of the result: re-running its JSON gives the same bytes.
TEST(LlamaCppFlags, ARoutingIsReRunFromItsResult) {
  const std::string file = std::string(TIERSIM_BINARY_DIR) + "/zipf-result.json";
  const auto first = run_sim("run --model traces/models/qwen3-30b-a3b.json --dtype Q4_K_M --policy llamacpp --hw h200 "
                             "--ngl 99 --prompt 64 --decode 4 --ctx-size 4096 --routing zipf:1.5 --routing-seed 9 --json",
                             false);
  ASSERT_EQ(first.code, 0) << first.out;
  { std::ofstream(file) << first.out; }
  const auto again = run_sim("run --config " + file, false);
  EXPECT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(again.out, first.out);
  EXPECT_NE(first.out.find("\"routing_zipf\": 1.5"), std::string::npos);
  EXPECT_EQ(run_sim("run --model traces/models/qwen3-30b-a3b.json --routing zipf:0").code, 2);
  std::remove(file.c_str());
}

// transformers' experts implementation is an input of the result (re-run from its JSON to the same bytes), costs
// eager's host syncs, and is refused by name where it does not apply.
TEST(LlamaCppFlags, AnExpertsImplementationIsReRunFromItsResultAndCheckedByName) {
  const std::string file = std::string(TIERSIM_BINARY_DIR) + "/experts-result.json";
  const std::string run = "run --model traces/models/qwen3-30b-a3b.json --hw h100-measured --runtime pytorch-hf-h100 "
                          "--policy resident --prompt 16 --decode 4 --json ";
  const auto eager = run_sim(run + "--experts-impl eager", false);
  ASSERT_EQ(eager.code, 0) << eager.out;
  { std::ofstream(file) << eager.out; }
  const auto again = run_sim("run --config " + file, false);
  EXPECT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(again.out, eager.out);
  EXPECT_NE(eager.out.find("\"experts_implementation\": \"eager\""), std::string::npos);
  const auto grouped = run_sim(run, false);
  ASSERT_EQ(grouped.code, 0) << grouped.out;
  EXPECT_EQ(grouped.out.find("experts_implementation"), std::string::npos);  // the default is not written
  const double step_eager = nlohmann::json::parse(eager.out)["step_seconds"].get<double>();
  const double step_grouped = nlohmann::json::parse(grouped.out)["step_seconds"].get<double>();
  EXPECT_GT(step_eager, 1.5 * step_grouped);  // 41 host syncs and 94 more launches a layer
  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {"--policy resident --model traces/models/qwen3-30b-a3b.json --experts-impl batched_mm", "grouped_mm or eager"},
           {"--policy resident --model traces/models/qwen3-4b.json --experts-impl eager", "dense"},
           {"--policy resident --model traces/models/qwen3-30b-a3b.json --dtype Q4_K_M --experts-impl eager", "MUL_MAT_ID"},
           {"--policy resident --model traces/models/flux.1-dev.json --experts-impl eager", "--experts-impl"}}) {
    const auto r = run_sim(args);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_NE(r.out.find(says), std::string::npos) << r.out;
  }
  std::remove(file.c_str());
}

}  // namespace
