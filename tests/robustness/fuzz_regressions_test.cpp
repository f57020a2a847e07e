// Replays every input the fuzzers found (tests/fuzz/regressions/<fuzzer>/) and the hand-written
// seeds (tests/fuzz/corpus/<fuzzer>/) through the fuzzers' own entry points, built with the normal
// compiler: findings stay fixed in CI without clang. A regression crashes or traps this test. They run from the
// repository root, as run_fuzzers.sh runs the fuzzers: a result's inputs (run_config) name files relative to it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/fuzz_targets.hpp"

namespace tiersim::fuzz {
namespace {

namespace fs = std::filesystem;

// The working directory changed for one scope, then restored.
struct InDirectory {
  explicit InDirectory(const fs::path& dir) : before(fs::current_path()) { fs::current_path(dir); }
  ~InDirectory() { fs::current_path(before); }
  fs::path before;
};

std::size_t replay(const std::string& folder) {
  const InDirectory root(TIERSIM_SOURCE_DIR);
  std::size_t n = 0;
  for (const auto& target : kTargets) {
    const fs::path dir = fs::path(TIERSIM_SOURCE_DIR) / "tests/fuzz" / folder / target.name;
    if (!fs::is_directory(dir)) continue;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file() && e.path().filename().string().front() != '.') files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      SCOPED_TRACE(f.string());
      EXPECT_EQ(target.run(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()), 0);
      ++n;
    }
  }
  return n;
}

TEST(FuzzRegressions, EveryFoundInputEndsInAReportedError) { replay("regressions"); }

TEST(FuzzRegressions, TheSeedCorporaRunClean) { EXPECT_GT(replay("corpus"), 0u); }

// The seeds of the fuzzers whose inputs name other files (a result's inputs: the trace, model and routing file with
// their digests) read whole, past every check: a seed gone stale would only ever end in an error.
TEST(FuzzRegressions, TheRunConfigAndRoutingSeedsReadWhole) {
  const InDirectory root(TIERSIM_SOURCE_DIR);
  std::size_t n = 0;
  for (const std::string target : {"run_config", "routing_file"})
    for (const auto& e : fs::directory_iterator(fs::path("tests/fuzz/corpus") / target)) {
      std::ifstream in(e.path(), std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      try {
        if (target == "routing_file") {
          (void)model::parse_routing_file(bytes, e.path().string());
        } else {
          const std::string once = dump_json(
              nlohmann::ordered_json{{"inputs", app::inputs_to_json(app::inputs_from_config_text(bytes, e.path().string()))}});
          EXPECT_EQ(dump_json(nlohmann::ordered_json{
                        {"inputs", app::inputs_to_json(app::inputs_from_config_text(once, "rewritten.json"))}}),
                    once)
              << e.path();
        }
        ++n;
      } catch (const std::exception& x) {
        ADD_FAILURE() << e.path() << ": " << x.what();
      }
    }
  EXPECT_GE(n, 7u);
}

}  // namespace
}  // namespace tiersim::fuzz
