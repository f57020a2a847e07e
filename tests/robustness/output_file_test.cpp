// Outputs: written to a temporary name and renamed when complete, every write checked, the path named
// in every error; the timeline streamed as spans arrive.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.hpp"
#include "report/output_file.hpp"
#include "report/timeline.hpp"
#include "support/scratch_files.hpp"

namespace tiersim::report {
namespace {

namespace fs = std::filesystem;

fs::path scratch_dir(const std::string& name) { return testing::scratch_dir("output_file_" + name); }
using testing::slurp;

std::size_t entries(const fs::path& dir) {
  return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

void expect_error(const std::string& path, const std::string& says, bool at_commit = false) {
  try {
    OutputFile out(path, "-o");
    out.stream() << "x\n";
    if (!at_commit) FAIL() << "opened " << path;
    out.commit();
    FAIL() << "committed " << path;
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), path);
    EXPECT_EQ(e.key(), "-o");
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(OutputFile, AppearsOnlyWhenCompleteAndLeavesNoTemporaryFile) {
  const fs::path dir = scratch_dir("complete");
  const fs::path path = dir / "out.csv";
  {
    OutputFile out(path.string(), "-o");
    out.stream() << "a,b\n1,2\n";
    EXPECT_FALSE(fs::exists(path)) << "nothing at the path before commit";
    out.commit();
  }
  EXPECT_EQ(slurp(path), "a,b\n1,2\n");
  EXPECT_EQ(entries(dir), 1u);
}

// An interrupted `gen` left a partial trace; six runs writing one --timeline left invalid JSON.
TEST(OutputFile, AnAbandonedWriteLeavesTheOldFileUntouched) {
  const fs::path dir = scratch_dir("abandoned");
  const fs::path path = dir / "trace.trace";
  std::ofstream(path) << "old\n";
  {
    OutputFile out(path.string(), "-o");
    out.stream() << "half of a new";
  }  // an exception unwinding past it, say
  EXPECT_EQ(slurp(path), "old\n");
  EXPECT_EQ(entries(dir), 1u);
}

TEST(OutputFile, BadPathsAreNamedBeforeAnyWork) {
  const fs::path dir = scratch_dir("bad");
  expect_error(dir.string(), "is a directory; give a file name");
  expect_error((dir / "missing" / "out.csv").string(), "does not exist");
}

// `sim gen -o /dev/full`, `--timeline /dev/full`, `sweep -o /dev/full` all exited 0.
TEST(OutputFile, ALostWriteIsAnErrorNamingThePath) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  expect_error("/dev/full", "write failed", true);
  EXPECT_TRUE(fs::is_character_file("/dev/full")) << "a device is written in place, never replaced";
}

TEST(OutputFile, DashIsStandardOutput) {
  OutputFile out("-", "-o");
  EXPECT_TRUE(out.is_stdout());
  EXPECT_EQ(&out.stream(), &std::cout);
  EXPECT_NO_THROW(out.commit());
}

TEST(Timeline, StreamsTheSameDocumentAsItRecords) {
  std::ostringstream streamed;
  Timeline t(2, streamed);
  t.span("host", "issue", 0, 1'000'000);
  t.span("cuda:0 compute", "gemv L0", 1'000'000, 3'000'000);
  t.span("host", "sync", 3'000'000, 3'500'000);
  EXPECT_EQ(t.size(), 3u);
  t.finish();
  t.finish();
  const auto j = nlohmann::json::parse(streamed.str());
  EXPECT_EQ(j["displayTimeUnit"], "ms");
  ASSERT_EQ(j["traceEvents"].size(), 5u);  // two track names, three spans
  EXPECT_EQ(j["traceEvents"][0]["ph"], "M");
  EXPECT_EQ(j["traceEvents"][0]["args"]["name"], "host");
  EXPECT_EQ(j["traceEvents"][2]["args"]["name"], "cuda:0 compute");
  EXPECT_EQ(j["traceEvents"][3]["tid"], 1);
  EXPECT_DOUBLE_EQ(j["traceEvents"][3]["dur"].get<double>(), 2.0);
  EXPECT_EQ(j["traceEvents"][4]["tid"], 0);

  // The same spans again give the same bytes.
  std::ostringstream again;
  Timeline second(2, again);
  second.span("host", "issue", 0, 1'000'000);
  second.span("cuda:0 compute", "gemv L0", 1'000'000, 3'000'000);
  second.span("host", "sync", 3'000'000, 3'500'000);
  second.finish();
  EXPECT_EQ(again.str(), streamed.str());
}

}  // namespace
}  // namespace tiersim::report
