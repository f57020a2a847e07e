// Replays every input the fuzzers found (tests/fuzz/regressions/<fuzzer>/) and the hand-written
// seeds (tests/fuzz/corpus/<fuzzer>/) through the fuzzers' own entry points, built with the normal
// compiler: findings stay fixed in CI without clang. A regression crashes or traps this test.
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

std::size_t replay(const std::string& folder) {
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

}  // namespace
}  // namespace tiersim::fuzz
