// JSON errors for every command (docs/errors.md): under --json (always under run --config) a failure of sim run,
// sim train, sim sweep (offload sweep and grid) and sim plan (and plan --train) prints the same object on standard
// output, {"schema_version", "exit_code", "error": {"kind", "message", "file", "line", "key"}}, with the exit code
// (2 bad input, 3 capacity, 1 internal); without --json standard output stays empty and the error is text.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/run_sim.hpp"

namespace tiersim::robustness {
namespace {

using testing::run_sim;
using testing::SimRun;

const std::string kTrace = "--trace traces/qwen.trace";
const std::string kModel = "--model traces/models/qwen3-0.6b.json";

// `args` fails with exit `code` and standard output one JSON error object whose error names `key`; returns it.
nlohmann::json expect_json_error(const std::string& args, int code, const std::string& key) {
  const SimRun r = run_sim(args, false);
  EXPECT_EQ(r.code, code) << args << "\n" << r.out;
  if (!nlohmann::json::accept(r.out)) {
    ADD_FAILURE() << args << ": standard output is not one JSON object:\n" << r.out;
    return {};
  }
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["exit_code"], code) << args;
  EXPECT_TRUE(j.contains("schema_version")) << j.dump();
  EXPECT_EQ(j["error"]["kind"], code == 3 ? "capacity" : "input") << j.dump();
  EXPECT_EQ(j["error"]["key"], key) << args << "\n" << j.dump();
  EXPECT_FALSE(j["error"]["message"].get<std::string>().empty());
  return j;
}

// Without --json the same failure prints nothing on standard output.
void expect_text_error(const std::string& args) {
  const SimRun r = run_sim(args, false);
  EXPECT_EQ(r.code, 2) << args;
  EXPECT_EQ(r.out, "") << args;
}

TEST(JsonErrors, TrainPrintsTheErrorObject) {
  expect_json_error("train " + kModel + " --precision fp64 --json", 2, "--precision");
  expect_json_error("train " + kModel + " --hw rtx4070,nosuchgpu --json", 2, "--hw");
  // A value the command-line parser refuses names its option too.
  expect_json_error("train " + kModel + " --batch 0 --json", 2, "--batch");
  expect_json_error("train --json", 2, "--model");
  expect_text_error("train " + kModel + " --precision fp64");
}

TEST(JsonErrors, SweepPrintsTheErrorObject) {
  expect_json_error("sweep " + kTrace + " --policy bytes --gb 0:1:0 --json", 2, "--gb");
  expect_json_error("sweep " + kTrace + " --policy layers --layers 10,20 --format xml --json", 2, "--format");
  // A grid's lists are read before the options are parsed.
  expect_json_error("sweep " + kTrace + " --policy layers --layers 10,,20 --json", 2, "--layers");
  expect_text_error("sweep " + kTrace + " --policy bytes --gb 0:1:0");
}

TEST(JsonErrors, PlanPrintsTheErrorObject) {
  const std::string plan = "plan " + kModel + " --prompt 16 --decode 2 --hw rtx4070";
  expect_json_error(plan + " --strategies bogus --json", 2, "--strategies");
  expect_json_error(plan + " --format xml --json", 2, "--format");
  expect_json_error(plan + " --min-tps -1 --json", 2, "--min-tps");
  expect_json_error("plan --train " + kModel + " --hw rtx4070 --prompt 16 --json", 2, "--prompt");
  expect_text_error(plan + " --strategies bogus");
}

TEST(JsonErrors, RunParseErrorsAreJsonToo) {
  expect_json_error("run " + kTrace + " --policy resident --timeline-steps 0 --json", 2, "--timeline-steps");
  // An input error, as before.
  const auto j = expect_json_error("run --trace missing.trace --policy resident --json", 2, "");
  EXPECT_EQ(j["error"]["file"], "missing.trace");
}

// The plan's --json is its own: a good plan is unchanged by it (no error, the table as --format writes it).
TEST(JsonErrors, JsonIsNotPassedToThePlansPoints) {
  const std::string plan = "plan " + kModel + " --prompt 16 --decode 2 --hw rtx4070 --strategies resident --format jsonl";
  const SimRun plain = run_sim(plan, false), json = run_sim(plan + " --json", false);
  ASSERT_EQ(plain.code, 0) << plain.out;
  EXPECT_EQ(json.code, 0) << json.out;
  EXPECT_EQ(json.out, plain.out);
  const std::string grid = "sweep " + kTrace + " --policy layers --layers 10,20";
  const SimRun g = run_sim(grid, false), gj = run_sim(grid + " --json", false);
  ASSERT_EQ(g.code, 0) << g.out;
  EXPECT_EQ(gj.code, 0) << gj.out;
  EXPECT_EQ(gj.out, g.out);
}

}  // namespace
}  // namespace tiersim::robustness
