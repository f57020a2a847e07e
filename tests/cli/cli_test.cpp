// End-to-end: the `sim` binary as a user runs it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/run_sim.hpp"

namespace {

using tiersim::testing::SimRun;

SimRun sim(const std::string& args) { return tiersim::testing::run_sim(args); }

TEST(Cli, QwenUnderRatioPrintsAPrediction) {
  const SimRun r = sim("--trace traces/qwen.trace --policy ratio --split \"cuda:0,75%;cpu,25%\"");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("decode tokens/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rtx4090"), std::string::npos) << "names the default profile";
}

TEST(Cli, JsonHasTheDocumentedFields) {
  const SimRun r = sim("--trace traces/qwen.trace --policy ratio --split \"cuda:0,70%;cpu,30%\" --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"tps", "step_seconds", "prefill_seconds", "vram_peak_bytes", "offloaded_bytes",
                          "h2d_bytes_per_step", "policy", "hardware", "schema_version", "memory_per_tier"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["policy"], "ratio");
  EXPECT_EQ(j["hardware"], "rtx4090");
  EXPECT_GT(j["tps"].get<double>(), 0);
}

TEST(Cli, SameInputsGiveTheSameBytes) {
  const std::string args = "--trace traces/qwen.trace --policy bytes --split \"cuda:0,18g;cpu,*\" --prefetch 1 --json";
  EXPECT_EQ(sim(args).out, sim(args).out);
}

TEST(Cli, TpsFallsAsTheCpuShareGrowsAndNeverBeatsTheLink) {
  // Not strictly: DisTorch walks from the tail, so at 25% the 1.45 GiB embedding (the model's head) lands
  // on the cpu and is cast whole every token, while at 30% it no longer fits the cpu's remainder and
  // stays on the GPU as an orphan: 30% moves fewer bytes per token than 25%.
  double previous = 1e300;
  for (int cpu : {30, 40, 50}) {
    const SimRun r = sim("--trace traces/qwen.trace --policy ratio --split \"cuda:0," + std::to_string(100 - cpu) +
                      "%;cpu," + std::to_string(cpu) + "%\" --json");
    ASSERT_EQ(r.code, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out);
    const double tps = j["tps"].get<double>();
    const double h2d = j["h2d_bytes_per_step"].get<double>();
    EXPECT_LT(tps, previous) << cpu << "% on cpu";
    previous = tps;
    // Every decode step moves h2d bytes over the link from pageable memory (the preset's 16 GB/s).
    EXPECT_LE(tps, 16e9 / h2d) << cpu << "% on cpu";
  }
}

TEST(Cli, ResidentRefusesClearly) {
  const SimRun r = sim("--trace traces/qwen.trace --policy resident");
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.out.find("needs 28.27 GiB on cuda:0"), std::string::npos) << r.out;
}

TEST(Cli, BadInputGetsAClearErrorAndExitCode2) {
  for (const auto& [args, expect] : std::vector<std::pair<std::string, std::string>>{
           {"--trace traces/qwen.trace --policy magic", "unknown policy 'magic'"},
           {"--trace traces/qwen.trace --policy ratio --split \"cuda:0,80;cpu\"", "--split"},
           {"--trace traces/qwen.trace --policy ratio --hw nosuch", "not a preset name"},
           {"--trace nosuch.trace --policy ratio", "nosuch.trace: cannot open trace file: No such file or directory"},
           {"--trace traces/qwen.trace --policy ratio --prefetch -1", "prefetch"},
           {"--trace traces/qwen.trace --policy ratio --donor gpu7", "--donor"},
           {"--trace traces/qwen.trace --policy layers --layers 99", "--layers"},
           {"sweep --trace traces/qwen.trace --policy bytes --gb 5:1:1", "--gb"},
           {"--trace traces/qwen.trace --policy layers --offload-gb 3", "'--offload-gb': policy 'layers' does not use"},
           {"--trace traces/qwen.trace --policy resident --split \"cuda:0,1g\"", "'--split': policy 'resident'"},
           {"--trace traces/qwen.trace --policy ratio --layers 3", "'--layers': policy 'ratio'"},
           {"--trace traces/qwen.trace --policy ratio --split \"cuda:0,50%;cpu,50%\" --donor cuda:1", "--donor"},
           {"--trace traces/qwen.trace --policy ratio --split \"cuda:0,50%;cpu,50%\" --offload-gb 2", "not both"},
           {"--trace traces/qwen.trace --policy ratio --offload-gb -2", "offload-gb"},
           {"--trace traces/qwen.trace --policy ratio --engine analytic --timeline /tmp/tiersim-t.json", "--timeline"},
       }) {
    const SimRun r = sim(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(expect), std::string::npos) << args << "\n" << r.out;
  }
}

TEST(Cli, MalformedTraceNamesFileAndLine) {
  const std::string path = std::string(TIERSIM_SOURCE_DIR) + "/build-test-bad.trace";
  {
    std::ofstream f(path);
    f << "tiersim-trace 1\ntensor 0 weight 100 0 w\nstep decode tokens=1\nop gemv layer=0 read=0 bogus=1\nend\n";
  }
  const SimRun r = sim("--trace " + path + " --policy resident");
  std::remove(path.c_str());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("build-test-bad.trace:4: 'bogus'"), std::string::npos) << r.out;
}

TEST(Cli, SweepWritesOneRowPerPoint) {
  const SimRun r = sim("sweep --trace traces/qwen.trace --policy bytes --gb 0:8:2");
  ASSERT_EQ(r.code, 0) << r.out;
  std::istringstream in(r.out);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line.rfind("offload_gb,donor,tps", 0), 0u);
  int rows = 0, ok = 0;
  while (std::getline(in, line)) {
    ++rows;
    if (line.find(",ok") != std::string::npos) ++ok;
  }
  EXPECT_EQ(rows, 5);
  // DisTorch's virtual VRAM: below 8 GB the 1.45 GiB embedding is an orphan on the compute GPU and the
  // card overflows (issue 11's worked example); 8 GB fits.
  EXPECT_EQ(ok, 1);
}

TEST(Cli, ShippedQwenTraceIsWhatTheGeneratorWrites) {
  const std::string out = std::string(TIERSIM_SOURCE_DIR) + "/build-test-qwen.trace";
  const SimRun r = sim("gen --model traces/models/qwen3-14b.json --prompt 512 --decode 64 -o " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream a(out), b(std::string(TIERSIM_SOURCE_DIR) + "/traces/qwen.trace");
  std::stringstream sa, sb;
  sa << a.rdbuf();
  sb << b.rdbuf();
  std::remove(out.c_str());
  EXPECT_TRUE(sa.str() == sb.str()) << "regenerate traces/qwen.trace with the command in traces/README.md";
}

TEST(Cli, UnifiedMemoryJsonReportsTheDriver) {
  const SimRun r = sim("--trace traces/qwen.trace --policy um --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("managed_memory"));
  EXPECT_GT(j["managed_memory"]["faulted_blocks_per_step"].get<double>(), 10000);  // oversubscribed: thrashing
  EXPECT_GT(j["managed_memory"]["footprint_bytes"].get<double>(), j["managed_memory"]["gpu_capacity_bytes"].get<double>());
  const SimRun bad = sim("--trace traces/qwen.trace --policy um --allocator bump");
  EXPECT_EQ(bad.code, 2);
}

TEST(Cli, CapturedTracesReplayToTheirOwnProfiledStep) {
  // A captured trace's host times add up to its step's host time up to the last launch; replayed
  // resident it must give back the profiled step (results/validation/lease3/*-capture.json), at fresh
  // sequence lengths (the cuDNN plan build inside layer 0's attention) and at warm ones.
  for (const std::string m : {"qwen3-8b", "qwen3-14b"}) {
    std::ifstream in(std::string(TIERSIM_SOURCE_DIR) + "/results/validation/lease3/" + m + "-capture.json");
    const auto summary = nlohmann::json::parse(in);
    for (const std::string regime : {"fresh", "warm"}) {
      const std::string trace = "traces/captured/" + m + "-h200" + (regime == "warm" ? "-warm" : "") + ".trace";
      const SimRun r = sim("--trace " + trace + " --hw h200-measured --runtime pytorch-hf-h200 --policy resident --lengths fresh --json");
      ASSERT_EQ(r.code, 0) << r.out;
      std::vector<double> profiled;
      for (const auto& s : summary[regime]["steps"]) profiled.push_back(s["profiled_s"].get<double>());
      std::sort(profiled.begin(), profiled.end());
      EXPECT_NEAR(nlohmann::json::parse(r.out)["step_seconds"].get<double>(), profiled[1], 0.02 * profiled[1])
          << m << " " << regime;
    }
  }
}

TEST(Cli, FreshLengthsAddTheNewLengthAttentionCostToAGeneratedTrace) {
  const std::string args = "--model traces/models/qwen3-8b.json --prompt 128 --decode 4 --hw h200-measured --runtime pytorch-hf-h200 "
                           "--policy resident --json --lengths ";
  const SimRun warm = sim(args + "warm"), fresh = sim(args + "fresh");
  ASSERT_EQ(warm.code, 0) << warm.out;
  ASSERT_EQ(fresh.code, 0) << fresh.out;
  const auto w = nlohmann::json::parse(warm.out), f = nlohmann::json::parse(fresh.out);
  EXPECT_EQ(f["execution"]["sequence_lengths"], "fresh");
  EXPECT_EQ(w["execution"]["sequence_lengths"], "warm");
  // Host-bound: the whole cost shows in the step (pytorch-hf-h200: the cuDNN plan build, ~33 ms).
  EXPECT_GT(f["step_seconds"].get<double>() - w["step_seconds"].get<double>(), 0.025);
  EXPECT_EQ(sim("--trace traces/qwen.trace --policy ratio --lengths cold").code, 2);
}

TEST(Cli, AnalyticEngineRunsFromTheSameCommand) {
  const SimRun r = sim("--trace traces/qwen.trace --policy ratio --split \"cuda:0,75%;cpu,25%\" --engine analytic --json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["engine"], "analytic");
}

}  // namespace

namespace tiersim::testing {
namespace {

// sim --model FILE.gguf: the header's hyperparameters and every tensor's own type and bytes.
TEST(CliGguf, AGgufModelRunsWithItsOwnTypesAndRefusesAnotherDtype) {
  const std::string file = "tests/fuzz/corpus/gguf_header/qwen3-tiny.gguf";
  const auto ok = run_sim("run --model " + file + " --policy llamacpp --hw rtx4090 --prompt 8 --decode 2 --json", false);
  ASSERT_EQ(ok.code, 0) << ok.out;
  const auto j = nlohmann::json::parse(ok.out);
  EXPECT_EQ(j["inputs"]["trace"]["model"], file);
  const auto dtype = run_sim("run --model " + file + " --dtype Q4_K_M --policy llamacpp --hw rtx4090");
  EXPECT_EQ(dtype.code, 2);
  EXPECT_NE(dtype.out.find("drop --dtype"), std::string::npos) << dtype.out;
  // Cut inside its header: an error naming the file, not a crash.
  std::ifstream in(std::string(TIERSIM_SOURCE_DIR) + "/" + file, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = scratch_file("cut.gguf", bytes.substr(0, 300));
  const auto bad = run_sim("run --model " + cut + " --policy llamacpp --hw rtx4090");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("cut.gguf"), std::string::npos) << bad.out;
  // A general.name that is not UTF-8 names the model by its architecture; the JSON stays JSON.
  std::string renamed = bytes;
  const auto at = renamed.find("Tiny Qwen3");
  ASSERT_NE(at, std::string::npos);
  renamed[at] = '\xff';
  const std::string odd_file = scratch_file("odd.gguf", renamed);
  const auto odd = run_sim("run --model " + odd_file + " --policy llamacpp --hw rtx4090 --json", false);
  ASSERT_EQ(odd.code, 0) << odd.out;
  EXPECT_TRUE(nlohmann::json::accept(odd.out)) << odd.out;
  const auto console = run_sim("run --model " + odd_file + " --policy llamacpp --hw rtx4090");
  EXPECT_NE(console.out.find("tiersim: qwen3 on rtx4090"), std::string::npos) << console.out;
}

}  // namespace
}  // namespace tiersim::testing

// A trace op's blocks=N (PyTorch's GroupNorm statistics: one thread block per sample and group) moves its bytes at
// N times the runtime's gpu_block_reduction rate when that is below the memory rate, in both engines; a runtime
// without the rate leaves the op at the memory rate.
TEST(Cli, AnOpsBlocksCapItsRateAtTheRuntimesBlockRate) {
  const std::string trace = tiersim::testing::scratch_file("blocks.trace",
                                         "tiersim-trace 1\nmeta model toy\nmeta batch 1\n"
                                         "tensor 0 weight 1000 0 layers.0.w\ntensor 1 act 1000000000 -1 activations\n"
                                         "step prefill tokens=1\nop norm layer=0 read=0,1 blocks=32\nend\n");
  const std::string runtime = tiersim::testing::scratch_file("block_rate.yaml",
                                           "tiersim_runtime: 1\nname: blocks\ndescription: \"d\"\nsource: \"s\"\n"
                                           "per_launch: \"0 us\"\nper_copy: \"0 us\"\nper_prefetch: \"0 us\"\n"
                                           "per_step: \"0 us\"\nnew_length_attention: \"0 us\"\npeer_copy_sync: \"0 us\"\n"
                                           "peer_copy_overlaps_compute: true\n");
  const std::string blocks = tiersim::testing::scratch_file("block_rate_on.yaml", std::string(
                                           "tiersim_runtime: 1\nname: blocks\ndescription: \"d\"\nsource: \"s\"\n"
                                           "per_launch: \"0 us\"\nper_copy: \"0 us\"\nper_prefetch: \"0 us\"\n"
                                           "per_step: \"0 us\"\nnew_length_attention: \"0 us\"\npeer_copy_sync: \"0 us\"\n"
                                           "peer_copy_overlaps_compute: true\n"
                                           "gpu_block_reduction: {source: \"test\", block_rate: \"2.5 GB/s\"}\n"));
  auto prefill = [&](const std::string& rt, const std::string& engine) {
    const SimRun r = sim("--trace " + trace + " --hw h100-measured --policy resident --json --engine " + engine +
                         " --runtime " + rt);
    EXPECT_EQ(r.code, 0) << r.out;
    return nlohmann::json::parse(r.out)["prefill_seconds"].get<double>();
  };
  for (const std::string engine : {"event", "analytic"}) {
    // 1 GB through 32 blocks of 2.5 GB/s: 12.5 ms (plus a launch floor of microseconds).
    EXPECT_NEAR(prefill(blocks, engine), 1e9 / (32 * 2.5e9), 1e-4) << engine;
    EXPECT_LT(prefill(runtime, engine), 1e-3) << engine;  // at the memory rate, ~0.5 ms
  }
}

// gpu_cast shares are measured on casts to bf16 and a cast kernel is bound by its elements: in an fp32 trace (ComfyUI's
// text encoders) an fp8 weight's cast to fp32 takes the time of the same elements cast to bf16 (1 + 2 bytes each at
// the share of the memory rate), not of its 1 + 4 bytes.
TEST(Cli, ACastToFp32TakesTheTimeOfTheSameElementsCastToBf16) {
  const std::string base = "tiersim_runtime: 1\nname: cast\ndescription: \"d\"\nsource: \"s\"\n"
                           "per_launch: \"0 us\"\nper_copy: \"0 us\"\nper_prefetch: \"0 us\"\n"
                           "per_step: \"0 us\"\nnew_length_attention: \"0 us\"\npeer_copy_sync: \"0 us\"\n"
                           "peer_copy_overlaps_compute: true\n";
  const std::string cast = tiersim::testing::scratch_file("cast_share.yaml", base + "gpu_cast: {source: \"t\", fp8: 0.5}\n");
  const std::string plain = tiersim::testing::scratch_file("cast_none.yaml", base);
  auto prefill = [&](const std::string& dtype, const std::string& rt) {
    const std::string trace = tiersim::testing::scratch_file(
        "cast_" + dtype + ".trace", "tiersim-trace 1\nmeta model toy\nmeta batch 1\nmeta dtype " + dtype + "\n"
                                    "tensor 0 weight 1000000000 0 layers.0.w\ntensor 1 act 4000000000 -1 activations\n"
                                    "step prefill tokens=1\nop elementwise layer=0 read=0 write=1 dtype=fp8\nend\n");
    const SimRun r = sim("--trace " + trace + " --hw h100-measured --policy resident --json --runtime " + rt);
    EXPECT_EQ(r.code, 0) << r.out;
    return nlohmann::json::parse(r.out)["prefill_seconds"].get<double>();
  };
  // Without a share both move 5 GB at the memory rate; with it, fp32 costs 3 GB's worth at half the rate (1.2x the
  // plain time), where a bf16 trace's op (the same bytes, as written) costs 5 GB's at half the rate (2x).
  EXPECT_NEAR(prefill("fp32", cast) / prefill("fp32", plain), 1.2, 0.01);
  EXPECT_NEAR(prefill("bf16", cast) / prefill("bf16", plain), 2.0, 0.01);
}
