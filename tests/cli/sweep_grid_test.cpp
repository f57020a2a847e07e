// `sim sweep` grids: lists and ranges become axes (cli/sweep_grid.cpp), and the grid is written as CSV
// (RFC 4180), JSON lines or markdown (report/grid_report.cpp).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <cstdio>
#include <sstream>

#include "cli/sweep_grid.hpp"
#include "core/error.hpp"
#include "report/reporters.hpp"
#include "support/run_sim.hpp"

namespace tiersim {
namespace {

TEST(SweepGrid, ListsAndRangesAreAxesTheLastVaryingFastest) {
  const auto g = app::expand_grid({"--trace", "t", "--ngl", "10,20", "--hw=rtx4090,rtx5090", "--prefetch", "0:2:1"});
  ASSERT_EQ(g.axes.size(), 3u);
  EXPECT_EQ(g.axes[0].option, "--ngl");
  EXPECT_EQ(g.axes[1].option, "--hw");
  EXPECT_EQ(g.axes[2].values, (std::vector<std::string>{"0", "1", "2"}));
  ASSERT_EQ(g.points.size(), 12u);
  EXPECT_EQ(g.points[0].args, (std::vector<std::string>{"--trace", "t", "--ngl", "10", "--hw=rtx4090", "--prefetch", "0"}));
  EXPECT_EQ(g.points[1].values, (std::vector<std::string>{"10", "rtx4090", "1"}));
  EXPECT_EQ(g.points[3].values, (std::vector<std::string>{"10", "rtx5090", "0"}));
  EXPECT_EQ(g.points[11].values, (std::vector<std::string>{"20", "rtx5090", "2"}));
  // Real-valued range, and options whose values hold commas of their own stay whole.
  const auto gb = app::expand_grid({"--offload-gb", "0:1:0.5", "--split", "cuda:0,80%;cpu,20%"});
  ASSERT_EQ(gb.axes.size(), 1u);
  EXPECT_EQ(gb.axes[0].values, (std::vector<std::string>{"0", "0.5", "1"}));
  EXPECT_EQ(gb.points[2].args[3], "cuda:0,80%;cpu,20%");
  // No list: one point, the arguments as given.
  const auto one = app::expand_grid({"--ngl", "10"});
  EXPECT_TRUE(one.axes.empty());
  ASSERT_EQ(one.points.size(), 1u);
}

TEST(SweepGrid, BadListsNameTheirOption) {
  for (const auto& [args, key] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--ngl", "10,,20"}, "--ngl"},
           {{"--ngl", "0:x:1"}, "--ngl"},
           {{"--ngl", "10:0:1"}, "--ngl"},
           {{"--ngl", "0:10:0"}, "--ngl"},
           {{"--ngl", "0:1:0.5"}, "--ngl"},
           {{"--hw", "a,b", "--hw", "c,d"}, "--hw"},
           {{"--prompt", "0:400000:1"}, "--prompt"},
           {{"--ngl", "0:999:1", "--decode", "0:999:1"}, "--decode"}}) {
    try {
      app::expand_grid(args);
      ADD_FAILURE() << args[1] << " was accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.key(), key) << e.what();
    }
  }
}

TEST(SweepGrid, PointCommandsAreQuotedForTheShell) {
  EXPECT_EQ(app::point_command({"--ngl", "10", "--split", "cuda:0,80%;cpu,20%", "--ot", "a'b"}),
            "sim run --ngl 10 --split 'cuda:0,80%;cpu,20%' --ot 'a'\\''b'");
}

TEST(GridReport, CsvQuotesAsRfc4180AndMarkdownEscapesPipes) {
  report::GridRow ok;
  ok.values = {"10"};
  ok.ok = true;
  ok.summary.tps = 12.5;
  ok.summary.decode_steps = 4;  // a decode: its tokens/s is a figure (a diffusion point's would be empty)
  ok.vram_peak = 1e9;
  ok.command = "sim run --ngl 10";
  ok.error_band = "±9% / ±16% out";
  report::GridRow bad;
  bad.values = {"20"};
  bad.error = "needs 2 GiB, \"a\" | b\nc";
  bad.command = "sim run --ngl 20";
  std::ostringstream csv, md, jsonl;
  report::write_grid(csv, report::GridFormat::Csv, {"--ngl"}, {ok, bad});
  report::write_grid(md, report::GridFormat::Markdown, {"--ngl"}, {ok, bad});
  report::write_grid(jsonl, report::GridFormat::Jsonl, {"--ngl"}, {ok, bad});
  EXPECT_EQ(csv.str().substr(0, 5), "ngl,t");
  // No prefill step in the point: its prefill cell is empty, not 0.
  EXPECT_NE(csv.str().find("\r\n10,12.5,0,,1000000000,0,0,0,ok,±9% / ±16% out,,sim run --ngl 10\r\n"), std::string::npos) << csv.str();
  EXPECT_NE(csv.str().find("20,,,,,,,,error,,\"needs 2 GiB, \"\"a\"\" | b\nc\",sim run --ngl 20\r\n"), std::string::npos)
      << csv.str();
  EXPECT_NE(md.str().find("| needs 2 GiB, \"a\" \\| b c |"), std::string::npos) << md.str();
  std::istringstream lines(jsonl.str());
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(nlohmann::json::parse(line)["tps"], 12.5);
  std::getline(lines, line);
  EXPECT_EQ(nlohmann::json::parse(line)["status"], "error");
}

// A diffusion point has no decode: its tokens/s and decode step are empty cells (null in jsonl), never 0 (issue 42).
TEST(GridReport, AFigureThePointHasNoStepForIsEmptyNotZero) {
  report::GridRow it;
  it.values = {"1024"};
  it.ok = true;
  it.summary.iteration_steps = 20;
  it.summary.iteration_median = 1.5;
  it.command = "sim run --image 1024x1024";
  std::ostringstream csv, jsonl;
  report::write_grid(csv, report::GridFormat::Csv, {"--image"}, {it});
  report::write_grid(jsonl, report::GridFormat::Jsonl, {"--image"}, {it});
  EXPECT_NE(csv.str().find("\r\n1024,,,1.5,,0,0,0,0,ok,"), std::string::npos) << csv.str();
  const auto j = nlohmann::json::parse(jsonl.str());
  EXPECT_TRUE(j["tps"].is_null()) << j.dump();
  EXPECT_EQ(j["iteration_seconds"], 1.5);
}

// The offload sweep's CSV quotes as the grid's does: a refusal keeps its commas and quotes (they were blanked).
TEST(GridReport, TheOffloadSweepsCsvKeepsARefusalWhole) {
  report::SweepRow bad;
  bad.offload_gb = 4;
  bad.donor = "cpu";
  bad.error = "needs 25.98 GiB (weights 23.78 GiB, \"x\"), but cuda:0 has 24.00 GiB";
  std::ostringstream csv;
  report::write_sweep_csv(csv, {bad});
  EXPECT_NE(csv.str().find("\n4.000,cpu,,,,,,,,\"needs 25.98 GiB (weights 23.78 GiB, \"\"x\"\"), but cuda:0 has 24.00 GiB\",\n"),
            std::string::npos)
      << csv.str();
}

TEST(SweepGrid, TheCommandRunsEveryPointAndRefusesABadOneBeforeAny) {
  const auto r = testing::run_sim(
      "sweep --trace traces/qwen.trace --policy layers --layers 10,20 --hw rtx4090,rtx3090 --decode 2 --engine analytic "
      "--format jsonl",
      false);
  ASSERT_EQ(r.code, 0) << r.out;
  std::istringstream lines(r.out);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["status"], "ok") << line;
    EXPECT_NE(j["command"].get<std::string>().find("--layers " + j["layers"].get<std::string>()), std::string::npos);
    ++n;
  }
  EXPECT_EQ(n, 4);
  const auto bad = testing::run_sim("sweep --trace traces/qwen.trace --policy layers --layers 10,-3 --decode 2");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--layers"), std::string::npos) << bad.out;
  const auto both = testing::run_sim("sweep --trace traces/qwen.trace --policy bytes --gb 0:2:1 --hw rtx4090,rtx3090");
  EXPECT_EQ(both.code, 2) << both.out;
  const auto none = testing::run_sim("sweep --trace traces/qwen.trace --policy bytes");
  EXPECT_EQ(none.code, 2) << none.out;
  // An unknown profile in the last point is found before the first runs, and -oFILE is the sweep's.
  const auto hw = testing::run_sim("sweep --trace traces/qwen.trace --policy layers --layers 10 --hw rtx4090,nosuch");
  EXPECT_EQ(hw.code, 2) << hw.out;
  EXPECT_NE(hw.out.find("nosuch"), std::string::npos) << hw.out;
  const std::string file = std::string(TIERSIM_BINARY_DIR) + "/grid-o.csv";
  const auto attached = testing::run_sim("sweep --trace traces/qwen.trace --policy layers --layers 10,20 --decode 2 "
                                         "--engine analytic -o" + file);
  EXPECT_EQ(attached.code, 0) << attached.out;
  EXPECT_EQ(std::remove(file.c_str()), 0);
}

}  // namespace
}  // namespace tiersim
