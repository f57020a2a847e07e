// `sim plan`: each candidate's searched knob is the best point of the whole range that fits (checked against a
// fine manual grid of the same space), the table is ranked and marks the goal and the Pareto front, and what the
// planner cannot do is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/run_sim.hpp"

namespace tiersim::testing {
namespace {

std::vector<nlohmann::json> lines(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

const std::string kWorkload = "--model traces/models/qwen3-32b.json --dtype Q4_K_M --prompt 64 --decode 4";

TEST(Plan, EachSearchedKnobIsTheBestPointOfAFineGrid) {
  const auto plan = run_sim("plan " + kWorkload + " --hw rtx4070 --strategies layers-cpu,distorch-cpu --format jsonl", false);
  ASSERT_EQ(plan.code, 0) << plan.out;
  const auto rows = lines(plan.out);
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& r : rows) {
    ASSERT_TRUE(r.contains("tokens_per_s")) << r.dump();
    const bool layers = r["strategy"] == "layers-cpu";
    const std::string grid = layers ? "--policy layers --offload-exec cpu --layers 0:64:1"
                                    : "--policy bytes --donor cpu --offload-gb 0:21:0.25";
    const auto sweep = run_sim("sweep " + kWorkload + " --hw rtx4070 " + grid + " --format jsonl", false);
    ASSERT_EQ(sweep.code, 0) << sweep.out;
    double best = 0;
    int fitting = 0;
    for (const auto& p : lines(sweep.out))
      if (p["status"] == "ok") best = std::max(best, p["tps"].get<double>()), ++fitting;
    EXPECT_GT(fitting, 3) << grid;
    EXPECT_GE(r["tokens_per_s"].get<double>(), best * (1 - 1e-9)) << r["strategy"] << " " << r["setting"];
  }
}

// Each row says its prefill (time to the first token), the run's own: the same number `sim run` gives for the point.
TEST(Plan, EachLanguageModelRowSaysItsPrefillAsRunGivesIt) {
  const auto plan = run_sim("plan " + kWorkload + " --hw rtx4070 --strategies layers-cpu --format jsonl", false);
  ASSERT_EQ(plan.code, 0) << plan.out;
  const auto rows = lines(plan.out);
  ASSERT_EQ(rows.size(), 1u);
  ASSERT_TRUE(rows[0].contains("prefill_seconds")) << rows[0].dump();
  const std::string command = rows[0]["command"].get<std::string>();
  const auto run = run_sim(command.substr(std::string("sim ").size()) + " --json", false);
  ASSERT_EQ(run.code, 0) << run.out;
  EXPECT_DOUBLE_EQ(rows[0]["prefill_seconds"].get<double>(), nlohmann::json::parse(run.out)["prefill_seconds"].get<double>());
  EXPECT_GT(rows[0]["prefill_seconds"].get<double>(), 0.0);
}

// A mixture of experts: llama.cpp with --n-cpu-moe N, the best point of the whole 0..48 grid (a sweep of the same
// space), dropped for a dense model (it moves no experts) and where plain llama.cpp fits with none on the CPU.
TEST(Plan, LlamaCppsCpuMoeIsSearchedForAMixtureOfExperts) {
  const std::string moe = "--model traces/models/qwen3-30b-a3b.json --dtype Q4_K_M --prompt 64 --decode 4";
  const auto plan = run_sim("plan " + moe + " --hw rtx4070 --strategies llamacpp-cpu-moe,llamacpp --format jsonl", false);
  ASSERT_EQ(plan.code, 0) << plan.out;
  const auto rows = lines(plan.out);
  nlohmann::json cpu_moe;
  for (const auto& r : rows)
    if (r["strategy"] == "llamacpp-cpu-moe") cpu_moe = r;
  ASSERT_FALSE(cpu_moe.is_null()) << plan.out;
  ASSERT_TRUE(cpu_moe.contains("tokens_per_s")) << cpu_moe.dump();
  const auto sweep = run_sim("sweep " + moe + " --hw rtx4070 --policy llamacpp --n-cpu-moe 0:48:1 --format jsonl", false);
  ASSERT_EQ(sweep.code, 0) << sweep.out;
  double best = 0;
  int fitting = 0;
  for (const auto& p : lines(sweep.out))
    if (p["status"] == "ok") best = std::max(best, p["tps"].get<double>()), ++fitting;
  EXPECT_GT(fitting, 3);
  EXPECT_LT(fitting, 49);  // the 12 GB card does not hold every expert
  EXPECT_GE(cpu_moe["tokens_per_s"].get<double>(), best * (1 - 1e-9)) << cpu_moe["setting"];
  const auto dense = run_sim("plan " + kWorkload + " --hw rtx4070 --strategies llamacpp-cpu-moe");
  EXPECT_EQ(dense.code, 2) << dense.out;
  EXPECT_NE(dense.out.find("has none"), std::string::npos) << dense.out;
  const auto roomy = run_sim("plan " + moe + " --hw h200 --strategies llamacpp-cpu-moe,llamacpp --format jsonl", false);
  ASSERT_EQ(roomy.code, 0) << roomy.out;
  for (const auto& r : lines(roomy.out)) EXPECT_NE(r["strategy"], "llamacpp-cpu-moe") << r.dump();
}

TEST(Plan, RanksByTheGoalAndMarksTheParetoFront) {
  const auto r = run_sim("plan " + kWorkload + " --hw rtx4070,rtx5090 --strategies resident,layers-cpu,llamacpp "
                         "--min-tps 15 --format jsonl", false);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto rows = lines(r.out);
  ASSERT_GE(rows.size(), 4u);
  double previous = 1e300;
  bool any_pareto = false;
  for (const auto& row : rows) {
    if (!row.contains("tokens_per_s")) continue;  // the points that do not fit come last
    const double tps = row["tokens_per_s"];
    EXPECT_LE(tps, previous);
    previous = tps;
    EXPECT_EQ(row["meets_goal"].get<bool>(), tps >= 15) << row.dump();
    any_pareto |= row["pareto"].get<bool>();
    EXPECT_NE(row["command"].get<std::string>().find("sim run " + kWorkload), std::string::npos);
  }
  EXPECT_TRUE(any_pareto);
  EXPECT_EQ(rows.front()["hw"], "rtx5090");  // resident on the 32 GB card beats anything on 12 GB
}

TEST(Plan, RefusesWhatItCannotDo) {
  const auto policy = run_sim("plan " + kWorkload + " --hw rtx4070 --policy resident");
  EXPECT_EQ(policy.code, 2);
  EXPECT_NE(policy.out.find("--strategies"), std::string::npos) << policy.out;
  const auto unknown = run_sim("plan " + kWorkload + " --hw rtx4070 --strategies bogus");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.out.find("unknown strategy 'bogus'"), std::string::npos) << unknown.out;
  const auto format = run_sim("plan " + kWorkload + " --hw rtx4070 --format xml");
  EXPECT_EQ(format.code, 2);
}

TEST(Plan, CheapestRanksThePointsThatMeetTheGoalByPriceAndPricesCanBeReplaced) {
  const std::string hw = " --hw rtx5090,rtx4070,2xrtx3060-12gb --strategies resident,layers-cpu,llamacpp --min-tps 15";
  const auto r = run_sim("plan " + kWorkload + hw + " --cheapest --format jsonl", false);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto rows = lines(r.out);
  ASSERT_GE(rows.size(), 4u);
  double previous = 0;
  bool meeting = true;
  for (const auto& row : rows) {
    ASSERT_TRUE(row.contains("price_usd")) << row.dump();  // every machine here has a launch price
    if (!row.contains("meets_goal")) continue;
    if (!row["meets_goal"].get<bool>()) {
      meeting = false;
      continue;
    }
    EXPECT_TRUE(meeting) << "a point that meets the goal after one that does not: " << row.dump();
    EXPECT_GE(row["price_usd"].get<double>(), previous) << row.dump();
    previous = row["price_usd"];
  }
  for (const auto& row : rows)
    if (row["hw"] == "2xrtx3060-12gb") EXPECT_DOUBLE_EQ(row["price_usd"].get<double>(), 2 * 329.0);
  // What the user would pay replaces the launch price, per GPU, times the count.
  const auto used = run_sim("plan " + kWorkload + hw + " --cheapest --price rtx3060-12gb=200,rtx5090=2500 --format jsonl", false);
  ASSERT_EQ(used.code, 0) << used.out;
  for (const auto& row : lines(used.out)) {
    if (row["hw"] == "2xrtx3060-12gb") EXPECT_DOUBLE_EQ(row["price_usd"].get<double>(), 400);
    if (row["hw"] == "rtx5090") EXPECT_DOUBLE_EQ(row["price_usd"].get<double>(), 2500);
    EXPECT_EQ(row["command"].get<std::string>().find("--price"), std::string::npos);
    EXPECT_EQ(row["command"].get<std::string>().find("--cheapest"), std::string::npos);
  }
  for (const std::string bad : {"rtx9999=100", "rtx4070", "rtx4070=-5", "rtx4070=abc", "rtx4070=12x", "rtx4070=0x10",
                                "'rtx4070= 5'", "rtx4070=0", "rtx4070=700,rtx4070=900"}) {
    const auto e = run_sim("plan " + kWorkload + " --hw rtx4070 --price " + bad);
    EXPECT_EQ(e.code, 2) << bad;
    EXPECT_NE(e.out.find("--price"), std::string::npos) << e.out;
  }
  const auto unknown_hw = run_sim("plan " + kWorkload + " --hw rtx4070,rtx9999");
  EXPECT_EQ(unknown_hw.code, 2);
  EXPECT_NE(unknown_hw.out.find("rtx9999"), std::string::npos) << unknown_hw.out;
}

TEST(Plan, ATokenEmbeddingInHostMemoryIsNotTheCpuRunningLayers) {
  // llama.cpp keeps the token embedding in host memory and looks a row up per token: an 8-GPU layer split of
  // Qwen3-8B (the GPUs take turns, each busy an eighth of the step) is limited by its GPUs in turn, not by the CPU,
  // and on one GPU by whatever does limit it; a plan that leaves layers on the CPU still says so.
  const auto r = run_sim("plan --model traces/models/qwen3-8b.json --hw h100-sxm --strategies llamacpp --format jsonl", false);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto rows = lines(r.out);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["bottleneck"], "GPUs in turn (each runs its layers)") << rows[0].dump();
  // On one GPU, a host-bound step (a slow framework host) is the host's, not other GPUs' (none run layers).
  const auto one = run_sim("plan --model traces/models/qwen3-8b.json --hw h100-pcie --strategies llamacpp --format jsonl "
                           "--set 'runtime.per_launch=100 us'", false);
  ASSERT_EQ(one.code, 0) << one.out;
  EXPECT_EQ(lines(one.out)[0]["bottleneck"].get<std::string>().rfind("host (GPU busy", 0), 0u) << one.out;
  const auto layers = run_sim("plan --model traces/models/qwen3-32b.json --dtype Q4_K_M --hw rtx4070 --strategies layers-cpu "
                              "--format jsonl", false);
  ASSERT_EQ(layers.code, 0) << layers.out;
  EXPECT_EQ(lines(layers.out)[0]["bottleneck"], "CPU (the layers it runs)") << layers.out;
}

TEST(Plan, ShardsMergeToTheBytesOfOneProcessInEveryFormat) {
  // sim plan --shard K/N searches a contiguous part of the candidates; sim merge ranks every shard's rows into the
  // plan's output: the same bytes as one sim plan, the goal, the prices given and the Pareto front included.
  const std::string dir = ::testing::TempDir();
  const std::string a = "plan " + kWorkload + " --hw rtx5090,rtx4070,2xrtx3060-12gb --strategies resident,layers-cpu,llamacpp"
                        " --min-tps 15 --cheapest --price rtx3060-12gb=200 --jobs 2";
  for (int k = 1; k <= 3; ++k) {
    const auto r = run_sim(a + " --shard " + std::to_string(k) + "/3 -o " + dir + "plan_shard" + std::to_string(k) + ".jsonl");
    ASSERT_EQ(r.code, 0) << r.out;
  }
  const std::string shards = dir + "plan_shard3.jsonl " + dir + "plan_shard1.jsonl " + dir + "plan_shard2.jsonl";
  for (const std::string format : {"md", "csv", "jsonl"}) {
    const auto whole = run_sim(a + " --format " + format, false);
    ASSERT_EQ(whole.code, 0) << whole.out;
    const auto merged = run_sim("merge " + shards + (format == "md" ? "" : " --format " + format), false);
    ASSERT_EQ(merged.code, 0) << merged.out;
    EXPECT_EQ(merged.out, whole.out) << format;
  }
  // What is refused: a shard missing or given twice, a sweep's shard among a plan's, --format on a shard, a training
  // plan, a row whose figure is not there (naming the file, its line and the key).
  auto refused = [](const SimRun& r, const std::string& says) {
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find(says), std::string::npos) << r.out;
  };
  refused(run_sim("merge " + dir + "plan_shard1.jsonl " + dir + "plan_shard2.jsonl"), "shard 3/3 is missing");
  refused(run_sim("merge " + shards + " " + dir + "plan_shard2.jsonl"), "given twice");
  const auto sweep = run_sim("sweep --trace traces/qwen.trace --policy ratio --hw rtx4090,rtx5090 --shard 1/1 -o " + dir +
                             "sweep_shard.jsonl");
  ASSERT_EQ(sweep.code, 0) << sweep.out;
  refused(run_sim("merge " + shards + " " + dir + "sweep_shard.jsonl"), "not a plan shard");
  refused(run_sim(a + " --shard 1/3 --format csv"), "--format");
  refused(run_sim("plan --model traces/models/qwen3-0.6b.json --train --hw h100-sxm --shard 1/2"), "--shard");
  {
    std::ifstream in(dir + "plan_shard2.jsonl");
    std::stringstream text;
    text << in.rdbuf();
    std::string t = text.str();
    const auto at = t.find("\"tps\":");
    ASSERT_NE(at, std::string::npos);
    t.replace(at, 6, "\"tpz\":");
    std::ofstream(dir + "plan_shard2_bad.jsonl") << t;
  }
  refused(run_sim("merge " + dir + "plan_shard1.jsonl " + dir + "plan_shard2_bad.jsonl " + dir + "plan_shard3.jsonl"),
          "plan_shard2_bad.jsonl:2: 'point.tps'");
}

// Screening by the bound prunes event-engine runs, never the answer: the same table as predicting every value.
TEST(Plan, ScreeningGivesTheExhaustiveAnswerWithFewerRuns) {
  for (const std::string& workload :
       {kWorkload + " --hw rtx4070,2xrtx3060-12gb,rtx5060ti-16gb --strategies layers-cpu,layers-stream,distorch-cpu,distorch-gpu1",
        std::string("--model traces/models/flux.1-schnell.json --steps 2 --resolution 512x512 --hw rtx3060-12gb,2xrtx4070 "
                    "--strategies distorch-cpu,distorch-gpu1")}) {
    const auto screened = run_sim("plan " + workload + " --format jsonl", false);
    const auto exhaustive = run_sim("plan " + workload + " --format jsonl --exhaustive", false);
    ASSERT_EQ(screened.code, 0) << screened.out;
    ASSERT_EQ(exhaustive.code, 0) << exhaustive.out;
    EXPECT_EQ(screened.out, exhaustive.out) << workload;
    EXPECT_GE(lines(screened.out).size(), 3u);
    const auto counts = run_sim("plan " + workload + " --format jsonl -o /dev/null");
    EXPECT_NE(counts.out.find("pruned by their bound"), std::string::npos) << counts.out;
    EXPECT_EQ(counts.out.find(" 0 pruned"), std::string::npos) << counts.out;  // the bound did cut runs
  }
}

// Constraints: a budget, a VRAM margin and a host RAM size each machine gets (as --set in its rows' commands, so
// that the commands reproduce them), GPU counts multiplying the catalogue's cards.
TEST(Plan, BudgetMarginHostRamAndCountsConstrainTheSpace) {
  const std::string base = "plan " + kWorkload + " --hw rtx3060-12gb,rtx5090 --strategies llamacpp --min-tps 15 --format jsonl";
  const auto budget = run_sim(base + " --count 1,2 --max-price 1000", false);
  ASSERT_EQ(budget.code, 0) << budget.out;
  std::set<std::string> machines;
  for (const auto& row : lines(budget.out)) {
    machines.insert(row["hw"]);
    if (row.contains("meets_goal") && row["meets_goal"].get<bool>()) EXPECT_LE(row["price_usd"].get<double>(), 1000);
    if (row["hw"] == "1xrtx5090") EXPECT_FALSE(row["meets_goal"].get<bool>());  // fast enough, over the budget
  }
  EXPECT_EQ(machines, (std::set<std::string>{"1xrtx3060-12gb", "2xrtx3060-12gb", "1xrtx5090", "2xrtx5090"}));
  const auto margin = run_sim(base + " --vram-margin 2 --host-ram 48", false);
  const auto none = run_sim(base, false);
  ASSERT_EQ(margin.code, 0) << margin.out;
  std::map<std::string, double> offloaded;
  for (const auto& row : lines(none.out)) offloaded[row["hw"]] = row["offloaded_bytes"];
  for (const auto& row : lines(margin.out)) {
    const std::string command = row["command"];
    EXPECT_NE(command.find("--set 'gpu.reserved=2.6 GiB' --set 'host.memory=48 GiB'"), std::string::npos) << command;
    // Less GPU memory to fill: llama.cpp's --fit leaves more of the model on the CPU.
    if (row["hw"] == "rtx3060-12gb") EXPECT_GT(row["offloaded_bytes"].get<double>(), offloaded["rtx3060-12gb"]);
  }
  EXPECT_EQ(run_sim(base + " --count 0").code, 2);
  EXPECT_EQ(run_sim(base + " --vram-margin -1").code, 2);
}

// Weight formats as choices: every candidate once per --dtype in the list, each row naming its own and its command
// carrying it.
TEST(Plan, DtypeChoicesArePlannedSideBySide) {
  const auto r = run_sim("plan --model traces/models/qwen3-32b.json --dtype Q4_K_M,Q8_0 --prompt 64 --decode 4 "
                         "--hw rtx5090 --strategies llamacpp --format jsonl", false);
  ASSERT_EQ(r.code, 0) << r.out;
  std::set<std::string> dtypes;
  for (const auto& row : lines(r.out)) {
    const std::string d = row["dtype"];
    dtypes.insert(d);
    EXPECT_NE(row["command"].get<std::string>().find("--dtype " + d), std::string::npos) << row.dump();
  }
  EXPECT_EQ(dtypes, (std::set<std::string>{"Q4_K_M", "Q8_0"}));
  EXPECT_EQ(run_sim("plan --model traces/models/qwen3-32b.json --dtype Q4_K_M,bogus --hw rtx5090").code, 2);
}

TEST(Plan, ADiffusionModelIsPlannedInSecondsPerIteration) {
  const auto r = run_sim("plan --model traces/models/flux.1-dev.json --steps 2 --resolution 512x512 --hw rtx4070,rtx3090 "
                         "--max-s-per-iteration 3 --format jsonl", false);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto rows = lines(r.out);
  ASSERT_FALSE(rows.empty());
  EXPECT_TRUE(rows.front().contains("s_per_iteration")) << rows.front().dump();
  EXPECT_TRUE(rows.front()["meets_goal"].get<bool>());
}

// A training workload: every machine x fine-tuning set-up through sim train, ranked like the inference plan, each
// row's command reproducing its numbers.
TEST(Plan, ATrainingWorkloadRanksMachinesAndSetUpsBySimTrain) {
  const auto plan = run_sim("plan --train --model traces/models/qwen3-1.7b.json --seq 512 --hw rtx4070,rtx4090 "
                            "--strategies bf16-adamw,bf16-adamw-cpu,lora-qv --format jsonl", false);
  ASSERT_EQ(plan.code, 0) << plan.out;
  const auto rows = lines(plan.out);
  ASSERT_EQ(rows.size(), 6u);
  double last = HUGE_VAL;
  bool fitting = true;
  for (const auto& r : rows) {
    const std::string command = r["command"];
    ASSERT_EQ(command.rfind("sim train ", 0), 0u) << command;
    if (!r.contains("tokens_per_s")) {
      fitting = false;
      EXPECT_TRUE(r.contains("error")) << r.dump();
      continue;
    }
    EXPECT_TRUE(fitting) << "a fitting row below one that does not fit";
    EXPECT_LE(r["tokens_per_s"].get<double>(), last);  // ranked by speed
    last = r["tokens_per_s"];
    const auto again = run_sim(command.substr(4) + " --json", false);
    ASSERT_EQ(again.code, 0) << again.out;
    const auto j = nlohmann::json::parse(again.out);
    EXPECT_DOUBLE_EQ(j["tokens_per_s"].get<double>(), r["tokens_per_s"].get<double>()) << command;
    EXPECT_EQ(r["vram_peak_bytes"].get<double>(), std::llround(j["allocator_peak_reserved_bytes"].get<double>()));
  }
  // Full fine-tuning with AdamW on the GPU does not fit 12 GB; offloading its state to the CPU does.
  std::map<std::string, bool> fits;
  for (const auto& r : rows) fits[r["hw"].get<std::string>() + " " + r["strategy"].get<std::string>()] = r.contains("tokens_per_s");
  EXPECT_FALSE(fits["rtx4070 bf16-adamw"]);
  EXPECT_TRUE(fits["rtx4070 bf16-adamw-cpu"]);
  EXPECT_TRUE(fits["rtx4090 bf16-adamw"]);
  for (const auto& [args, what] : std::vector<std::pair<std::string, std::string>>{
           {"plan --train --model traces/models/qwen3-1.7b.json --strategies lora-99", "--strategies"},
           {"plan --model traces/models/qwen3-1.7b.json --seq 512", "--seq"},
           {"plan --train --model traces/models/qwen3-1.7b.json --prompt 512", "--prompt"},
           {"plan --train --model traces/models/qwen3-1.7b.json --max-s-per-iteration 2", "--max-s-per-iteration"},
           {"plan --train --model traces/models/qwen3-1.7b.json --engine analytic", "--engine"},
           {"plan --train --model traces/models/qwen3-30b-a3b.json --hw rtx4090", "mixture of experts"}}) {
    const auto r = run_sim(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(what), std::string::npos) << r.out;
  }
}

// A point sim run would end with "out of memory" (exit 3: PyTorch's caching allocator replaying generate()) does not
// fit in a plan or a sweep either, with the same reason.
TEST(Plan, APointTheCachingAllocatorCannotHoldDoesNotFit) {
  const std::string point = "--model traces/models/qwen3-8b.json --hw rtx4090 --runtime pytorch-hf-h100 --decode 4";
  const auto run = run_sim("run " + point + " --policy resident --prompt 32768");
  EXPECT_EQ(run.code, 3) << run.out;
  const auto plan = run_sim("plan " + point + " --prompt 32768 --strategies resident --format jsonl", false);
  ASSERT_EQ(plan.code, 0) << plan.out;
  const auto rows = lines(plan.out);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_FALSE(rows[0].contains("tokens_per_s")) << rows[0].dump();
  EXPECT_NE(rows[0]["error"].get<std::string>().find("caching allocator runs out of memory in step 1's prefill"),
            std::string::npos) << rows[0].dump();
  const auto sweep = run_sim("sweep " + point + " --policy resident --prompt 1024,32768 --format jsonl", false);
  ASSERT_EQ(sweep.code, 0) << sweep.out;
  const auto points = lines(sweep.out);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0]["status"], "ok");
  EXPECT_EQ(points[1]["status"], "error");
  EXPECT_NE(points[1]["error"].get<std::string>().find("caching allocator"), std::string::npos) << points[1].dump();
}

}  // namespace
}  // namespace tiersim::testing
