// The presets keep their numbers: every line of cases.txt is run with --json and each number of the
// recorded output (expected/NNN.json, frozen by record.sh before strategies became compositions) must
// come back unchanged. A refused case must be refused with the same exit code. New keys in the output
// are allowed; strings (settings as printed) may be reworded; numbers may not move.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Case {
  int index = 0;
  std::string args;
};

std::vector<Case> read_cases() {
  std::ifstream in(std::string(TIERSIM_SOURCE_DIR) + "/tests/golden/cases.txt");
  std::vector<Case> cases;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    cases.push_back({static_cast<int>(cases.size()) + 1, line});
  }
  return cases;
}

std::pair<int, std::string> run(const std::string& args) {
  const std::string cmd = std::string("cd ") + TIERSIM_SOURCE_DIR + " && " + TIERSIM_SIM_BINARY + " " + args +
                          " --json 2>/dev/null";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 65536> buf;
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// Byte counts may have become integers: an integer equal to the recorded double rounded is the same number.
bool same_number(const nlohmann::json& expected, const nlohmann::json& actual) {
  if (!actual.is_number()) return false;
  if (expected.dump() == actual.dump()) return true;
  const double e = expected.get<double>(), a = actual.get<double>();
  if (actual.is_number_integer() && !expected.is_number_integer()) return std::llround(e) == actual.get<long long>();
  return e == a;
}

void compare(const nlohmann::json& expected, const nlohmann::json& actual, const std::string& path,
             std::vector<std::string>& diffs) {
  if (expected.is_object()) {
    for (auto it = expected.begin(); it != expected.end(); ++it) {
      if (it.value().is_string()) continue;  // settings as printed may be reworded or dropped
      // The error band is results/accuracy's data (regenerated whenever validation rows are added), not a
      // prediction: tests/accuracy checks it.
      if (path.empty() && it.key() == "accuracy") continue;
      if (!actual.is_object() || !actual.contains(it.key())) {
        diffs.push_back(path + "." + it.key() + ": missing");
        continue;
      }
      compare(it.value(), actual.at(it.key()), path + "." + it.key(), diffs);
    }
  } else if (expected.is_number()) {
    if (!same_number(expected, actual)) diffs.push_back(path + ": " + expected.dump() + " -> " + actual.dump());
  }
}

TEST(PresetsGolden, EveryPresetGivesTheRecordedNumbers) {
  const auto cases = read_cases();
  ASSERT_GE(cases.size(), 40u);
  for (const Case& c : cases) {
    char name[32];
    std::snprintf(name, sizeof name, "/tests/golden/expected/%03d.json", c.index);
    std::ifstream in(std::string(TIERSIM_SOURCE_DIR) + name);
    ASSERT_TRUE(in) << name;
    const auto expected = nlohmann::json::parse(in);
    const auto [code, out] = run(c.args);
    if (expected.contains("exit_code")) {
      EXPECT_EQ(code, expected["exit_code"].get<int>()) << c.args;
      continue;
    }
    ASSERT_EQ(code, 0) << c.args << "\n" << out;
    std::vector<std::string> diffs;
    compare(expected, nlohmann::json::parse(out), "", diffs);
    std::string text;
    for (const auto& d : diffs) text += "  " + d + "\n";
    EXPECT_TRUE(diffs.empty()) << "case " << c.index << ": " << c.args << "\n" << text;
  }
}

}  // namespace
