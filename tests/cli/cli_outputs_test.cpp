// Outputs through the command: a lost write is an error naming the path (exit 2), never exit 0.
// Needs main.cpp to write through report::OutputFile and to call report::check_stdout after every
// command that prints, the list commands included.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/run_sim.hpp"

namespace tiersim::robustness {
namespace {

using testing::run_sim;
using testing::scratch_file;
using testing::SimRun;

void expect_lost(const std::string& args, const std::string& says) {
  const SimRun r = run_sim(args);
  EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
  if (!says.empty()) EXPECT_NE(r.out.find(says), std::string::npos) << args << "\n" << r.out;
}

TEST(CliOutputs, LostWritesAreErrorsNamingThePath) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  const std::string gen = "gen --model traces/models/qwen3-8b.json --prompt 8 --decode 2 ";
  expect_lost(gen + "-o /dev/full", "/dev/full: '-o': write failed");
  // Standard output lost: the message goes the same way (run_sim sends stderr after stdout), so the exit
  // code is what is checked.
  expect_lost("--trace traces/qwen.trace --policy ratio --split \"cuda:0,75%;cpu,25%\" --json > /dev/full", "");
  expect_lost("--trace traces/qwen.trace --policy ratio --split \"cuda:0,75%;cpu,25%\" --timeline /dev/full", "/dev/full: '--timeline': write failed");
  expect_lost("sweep --trace traces/qwen.trace --policy ratio --gb 0:2:1 -o /dev/full", "/dev/full: '-o'");
  for (const char* list : {"policies", "parts", "profiles", "runtimes"}) expect_lost(std::string(list) + " > /dev/full", "");
  expect_lost("--trace traces/qwen.trace --policy ratio --split \"cuda:0,75%;cpu,25%\" >&-", "");
}

TEST(CliOutputs, ADirectoryOrAMissingDirectoryIsNamed) {
  const std::string gen = "gen --model traces/models/qwen3-8b.json --prompt 8 --decode 2 ";
  expect_lost(gen + "-o traces", "traces: '-o': is a directory; give a file name");
  expect_lost(gen + "-o no-such-dir/x.trace", "directory 'no-such-dir' does not exist");
}

// A machine of eight GPUs with one in use: the idle seven are one line, not seven rows of 0 B (issue 42).
TEST(CliOutputs, IdleGpusAreOneLineOfTheMemoryTable) {
  const SimRun r = run_sim("--trace traces/qwen.trace --policy resident --hw h100-sxm");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("  cuda:1 to cuda:7: nothing placed (0 B)\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\n  cuda:3 "), std::string::npos) << r.out;
  const SimRun split = run_sim("--model qwen3-8b --decode 2 --policy ratio --split \"cuda:0,60%;cuda:1,40%\" --hw h200");
  ASSERT_EQ(split.code, 0) << split.out;
  EXPECT_NE(split.out.find("\n  cuda:1                 6.10 GiB"), std::string::npos) << split.out;  // a donor keeps its row
  EXPECT_NE(split.out.find("  cuda:2 to cuda:7: nothing placed"), std::string::npos) << split.out;
}

// `-o md` meant --format md: refused before anything runs, never a CSV file named md.
TEST(CliOutputs, AFormatsNameGivenAsTheOutputFileIsRefused) {
  for (const char* f : {"md", "csv", "jsonl", "json"}) {
    expect_lost(std::string("sweep --trace traces/qwen.trace --policy ratio --gb 0:2:1 -o ") + f, "--format " + std::string(f));
    EXPECT_FALSE(std::filesystem::exists(std::string(TIERSIM_SOURCE_DIR) + "/" + f)) << f;
  }
  expect_lost("plan --model qwen3-8b --hw h200 -o md", "is a format's name");
}

}  // namespace
}  // namespace tiersim::robustness
