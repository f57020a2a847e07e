#pragma once
// Files the command and output tests write and read back: a fresh folder under the build tree, and a file's bytes.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace tiersim::testing {

// An empty folder TIERSIM_BINARY_DIR/NAME (removed first if a previous run left it).
inline std::filesystem::path scratch_dir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(TIERSIM_BINARY_DIR) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// A file's whole contents ("" when it cannot be read).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace tiersim::testing
