#pragma once
// Runs the `sim` binary as a user would, for the command-line and robustness tests: bad input must end
// in a message and an exit code, never a signal.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace tiersim::testing {

struct SimRun {
  int code = -1;      // exit code; -1 when killed by a signal (an abort)
  std::string out;    // stdout and stderr together (stdout alone with with_stderr false, for JSON)
};

// Runs from the repository root, or from `dir` when given (a folder with no traces/ in it, say).
inline SimRun run_sim(const std::string& args, bool with_stderr = true, const std::string& dir = TIERSIM_SOURCE_DIR) {
  const std::string cmd = "cd " + dir + " && " + TIERSIM_SIM_BINARY + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null");
  SimRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Writes `text` to a file under the build directory and returns its path.
inline std::string scratch_file(const std::string& name, const std::string& text) {
  const std::string path = std::string(TIERSIM_BINARY_DIR) + "/robustness_" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// A run expected to succeed (checked), its standard output parsed as the JSON of `args --json`.
inline nlohmann::json run_sim_json(const std::string& args) {
  const SimRun r = run_sim(args + " --json", false);
  EXPECT_EQ(r.code, 0) << r.out;
  return nlohmann::json::parse(r.out);
}

}  // namespace tiersim::testing
