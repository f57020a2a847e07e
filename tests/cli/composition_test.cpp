// Strategies as compositions, results that record themselves, and the error contract, as a user runs them.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/run_sim.hpp"

namespace {

using tiersim::testing::SimRun;

SimRun sim(const std::string& args, bool with_stderr = true) { return tiersim::testing::run_sim(args, with_stderr); }

double tps(const std::string& args) {
  const SimRun r = sim(args + " --json", false);
  EXPECT_EQ(r.code, 0) << args << "\n" << r.out;
  return r.code == 0 ? nlohmann::json::parse(r.out)["tps"].get<double>() : 0.0;
}

TEST(Composition, PartsGivenDirectlyEqualTheirPreset) {
  const std::string t = "--trace traces/qwen.trace --json";
  const auto preset = nlohmann::json::parse(sim(t + " --policy ratio --split \"cuda:0,70%;cpu,30%\" --prefetch 1", false).out);
  const auto parts = nlohmann::json::parse(
      sim(t + " --placement distorch.ratio --split \"cuda:0,70%;cpu,30%\" --offload copy:host=pageable,prefetch=1", false).out);
  EXPECT_EQ(preset["tps"], parts["tps"]);
  EXPECT_EQ(preset["vram_peak_bytes"], parts["vram_peak_bytes"]);
  const auto um = nlohmann::json::parse(sim(t + " --policy um-cpu", false).out);
  const auto um_parts = nlohmann::json::parse(sim(t + " --placement all-gpu --memory managed:prefer-cpu", false).out);
  EXPECT_EQ(um["tps"], um_parts["tps"]);
}

TEST(Composition, WhatCouldNotBeSaidBefore) {
  // (a) a DisTorch split whose offloaded part is managed memory read in place (PreferredLocation=CPU):
  // no copies, the offloaded bytes read remotely every step.
  const SimRun a = sim("--trace traces/qwen.trace --policy ratio --split \"cuda:0,75%;cpu,25%\" "
                       "--memory managed:prefer-cpu,scope=offloaded --json", false);
  ASSERT_EQ(a.code, 0) << a.out;
  const auto ja = nlohmann::json::parse(a.out);
  EXPECT_GT(ja["remote_read_bytes_per_step"].get<double>(), 5e9);
  // (b) seed 000's allocator (every GPU-side allocation managed, per tensor, with advice) under a layer split.
  const SimRun b = sim("--trace traces/qwen.trace --placement layers:layers=30 "
                       "--memory managed:prefer-cpu,allocator=per-tensor --json", false);
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_GT(nlohmann::json::parse(b.out)["h2d_bytes_per_step"].get<double>(), 5e9);  // the 10 CPU layers, copied
  // (c) a 70B model at 4 bits over two RTX 3090: run as a pipeline each GPU executes its half and only
  // hidden states cross; as a donor cuda:1's half is copied to cuda:0 every token.
  const std::string c = "--model traces/models/llama-3.1-70b.json --dtype q4 --decode 8 --policy ratio "
                        "--split \"cuda:0,50%;cuda:1,50%\" ";
  const double pipeline = tps(c + "--hw rtx3090x2-nvlink --offload execute");
  const double donor = tps(c + "--hw rtx3090x2-nvlink");
  const double pipeline_pcie = tps(c + "--hw rtx3090x2-pcie --offload execute");
  const double donor_pcie = tps(c + "--hw rtx3090x2-pcie");
  EXPECT_GT(pipeline, 4 * donor);
  EXPECT_GT(pipeline, pipeline_pcie);  // the hand-over is small: the link matters little
  EXPECT_GT(pipeline_pcie, 0.8 * pipeline);
  EXPECT_GT(donor, 3 * donor_pcie);    // streaming half the model: the link is everything
  // The pipeline's bound: each token reads all ~36 GiB of weights once at 2 x 936 GB/s... in turn, so
  // no faster than one GPU reading them all.
  EXPECT_LT(pipeline, 936e9 / 36e9);
}

TEST(Composition, OptionsAPartDoesNotReadAreErrorsNamingTheFlag) {
  for (const auto& [args, expect] : std::vector<std::pair<std::string, std::string>>{
           {"--policy um-cpu --host-memory pageable", "'--host-memory'"},
           {"--policy resident --prefetch 3 --offload-exec cpu", "'--prefetch'"},
           {"--policy resident --offload-exec cpu", "'--offload-exec': policy 'resident' offloads no weight"},
           {"--policy resident --prefetch 3", "'--prefetch'"},
           {"--policy ratio --allocator per-tensor", "'--allocator': policy 'ratio' does not use this option"},
           {"--placement all-gpu --memory managed:colour=blue", "option 'colour'"},
           {"--placement distorch.ratio --offload copy:prefetch=-1", "'prefetch'"},
           {"--placement nosuch", "unknown placement 'nosuch'"},
           {"--policy ratio --offload copy:prefetch=1 --prefetch 2", "give it once"},
           {"--policy ratio --memory managed --offload execute", "not modelled"},
           {"--placement all-gpu --set gpu.memory=lots", "gpu.memory"},
           {"--placement all-gpu --set gpu=nosuch", "neither a file nor a hardware preset"},
           // Numbers on the command line: human ranges, no NaN, no wrap-around.
           {"--policy bytes --offload-gb nan", "must be a number from 0 to 1000000 (GB of 1e9 bytes), got 'nan'"},
           {"--policy bytes --offload-gb 1e400", "got '1e400'"},
           {"--policy resident --prompt 4294967295", "must be a whole number from 0 to 16777216"},
           {"--policy resident --batch 0", "--batch: must be a whole number from 1 to 65536"},
           {"--policy resident --prefetch 1.5", "--prefetch: must be a whole number"},
           // Found by review: each was an internal error (exit 1) or a capacity error (exit 3).
           {"--placement device_map:file=/tmp", "'/tmp' is a directory, not a JSON device map"},
           {"--policy bytes --split \"cuda:5,2gb;cpu,*\"", "'--split': cuda:5 is not on 'rtx4090'"},
           {"--policy layers --donor cuda:1", "'--donor': cuda:1 is not on 'rtx4090'"},
           {"--placement layers:layers=50", "option 'layers': must be between 0 and 40"},
           {"--placement all-gpu --set peer_link=rtx4090", "has no peer_link section"},
       }) {
    const SimRun r = sim("--trace traces/qwen.trace " + args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(expect), std::string::npos) << args << "\n" << r.out;
  }
}

TEST(Composition, OptionsAreNamedByThemselvesAndDirectoriesSaySo) {
  const SimRun split = sim("--trace traces/qwen.trace --policy ratio --split nonsense");
  EXPECT_EQ(split.code, 2);
  EXPECT_EQ(split.out.rfind("error: '--split': ", 0), 0u) << split.out;  // no "<input>:" prefix
  const SimRun dir = sim("--trace traces --policy resident");
  EXPECT_EQ(dir.code, 2);
  EXPECT_NE(dir.out.find("is a directory"), std::string::npos) << dir.out;
}

TEST(Results, ASweepReadsItsTraceOnceAndEachRowIsTheSingleRun) {
  const SimRun sweep = sim("sweep --trace traces/qwen.trace --policy bytes --gb 8:12:4", false);
  ASSERT_EQ(sweep.code, 0) << sweep.out;
  std::istringstream in(sweep.out);
  std::string header, row;
  std::getline(in, header);
  for (const char* gb : {"8", "12"}) {
    ASSERT_TRUE(std::getline(in, row));
    const auto single = nlohmann::json::parse(sim("--trace traces/qwen.trace --policy bytes --offload-gb " + std::string(gb) + " --json", false).out);
    char expect[64];
    std::snprintf(expect, sizeof expect, ",%g,", single["tps"].get<double>());
    EXPECT_NE(row.find(expect), std::string::npos) << row << " vs " << expect;
  }
}

TEST(Composition, HardwareComposedFromPartsOfOtherProfiles) {
  // An RTX 4090 with an RTX 5090's PCIe 5.0 link: the same split streams the host's share faster.
  const std::string t = "--trace traces/qwen.trace --policy ratio --split \"cuda:0,75%;cpu,25%\"";
  const double gen4 = tps(t);
  const double gen5 = tps(t + " --set host_link=rtx5090");
  EXPECT_GT(gen5, 1.3 * gen4);
}

TEST(Results, ReRunFromTheirJsonToTheSameBytes) {
  const std::string path = std::string(TIERSIM_BINARY_DIR) + "/composition-rerun.json";
  for (const std::string args :
       {"--trace traces/qwen.trace --policy ratio --split \"cuda:0,70%;cpu,30%\" --prefetch 1 --engine analytic",
        "--model traces/models/llama-3.1-70b.json --dtype q4 --decode 4 --hw rtx3090x2-nvlink --policy ratio "
        "--split \"cuda:0,50%;cuda:1,50%\" --offload execute --set gpu.memory=\"25 GiB\" --set runtime.per_launch=\"7 us\"",
        "--trace traces/qwen.trace --placement layers:layers=30 --memory managed:prefer-cpu,allocator=per-tensor "
        "--runtime pytorch-hf-h200 --lengths fresh"}) {
    const SimRun first = sim(args + " --json", false);
    ASSERT_EQ(first.code, 0) << args << "\n" << first.out;
    {
      std::ofstream f(path);
      f << first.out;
    }
    const SimRun again = sim("run --config " + path, false);
    EXPECT_EQ(again.code, 0) << again.out;
    EXPECT_TRUE(again.out == first.out) << args;
    const auto j = nlohmann::json::parse(first.out);
    EXPECT_TRUE(j["inputs"].contains("hardware"));
    EXPECT_TRUE(j["vram_peak_bytes"].is_number_integer());
  }
  EXPECT_EQ(sim("run --config " + path + " --prefetch 2").code, 2);  // the config holds every input
  // A result names its trace or model and the digest of its bytes: another file under that name is refused.
  const std::string model = std::string(TIERSIM_BINARY_DIR) + "/composition-model.json";
  {
    std::ifstream src(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen3-8b.json");
    std::ofstream(model) << src.rdbuf();
  }
  const SimRun first = sim("--model " + model + " --decode 2 --policy resident --hw h200 --json", false);
  ASSERT_EQ(first.code, 0) << first.out;
  std::ofstream(path) << first.out;
  EXPECT_EQ(sim("run --config " + path).code, 0);
  std::ofstream(model, std::ios::app) << "\n";
  const SimRun changed = sim("run --config " + path);
  EXPECT_EQ(changed.code, 2);
  EXPECT_NE(changed.out.find("is not the file this result was computed from"), std::string::npos) << changed.out;
  std::remove(model.c_str());
  std::remove(path.c_str());
}

TEST(Results, FailuresPrintAJsonErrorObject) {
  const SimRun cap = sim("--model traces/models/llama-3.1-70b.json --policy resident --json", false);
  EXPECT_EQ(cap.code, 3);
  const auto e = nlohmann::json::parse(cap.out)["error"];
  EXPECT_EQ(e["kind"], "capacity");
  EXPECT_EQ(e["device"], "cuda:0");
  EXPECT_GT(e["needed_bytes"].get<double>(), e["available_bytes"].get<double>());
  const SimRun bad = sim("--trace traces/qwen.trace --policy ratio --split nonsense --json", false);
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(nlohmann::json::parse(bad.out)["error"]["key"], "--split");
  const SimRun v = sim("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(v.out.rfind("tiersim ", 0), 0u) << v.out;
}

TEST(Results, OnlyTheStepKindsATraceHasAreSummarised) {
  const std::string path = std::string(TIERSIM_BINARY_DIR) + "/iterations.trace";
  {
    std::ofstream t(path);
    t << "tiersim-trace 1\nmeta model dit\nmeta batch 1\ntensor 0 weight 100000000 0 blocks.0\n"
         "tensor 1 act 1000000 -1 activations\n";
    for (int s = 0; s < 4; ++s) t << "step iteration tokens=1\nop gemm layer=0 read=0 write=1 flops=1000000000000\n";
    t << "end\n";
  }
  const SimRun r = sim("--trace " + path + " --policy resident");
  std::remove(path.c_str());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("s/iteration"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("tokens/s"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("prefill"), std::string::npos) << r.out;
}

TEST(Composition, ManagedWeightsAreMappedUnlessTheCpuWroteThem) {
  // PreferredLocation=CPU weights loaded with cudaMemcpy (the default, filled=copy) or written by GPU kernels are
  // mapped from the start; only CPU-written ones pay a mapping fault per block at the first GPU touch.
  auto faults = [](const std::string& extra) {
    const auto r = sim("--trace traces/qwen.trace --policy um-cpu --decode 2 --json" + extra, false);
    EXPECT_EQ(r.code, 0) << r.out;
    return nlohmann::json::parse(r.out)["managed_memory"]["mapping_faults"].get<long long>();
  };
  EXPECT_EQ(faults(""), 0);
  EXPECT_EQ(faults(" --um-filled gpu"), 0);
  EXPECT_EQ(faults(" --memory managed:prefer-cpu,filled=copy"), 0);
  EXPECT_GT(faults(" --um-filled cpu"), 0);
  const auto bad = sim("--trace traces/qwen.trace --memory managed:prefer-cpu,filled=disk");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("filled"), std::string::npos) << bad.out;
}

}  // namespace
