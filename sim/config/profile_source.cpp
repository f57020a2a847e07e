#include "config/profile_source.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.hpp"

namespace tiersim::config {

ProfileSource find_profile(const std::string& spec, const std::vector<EmbeddedFile>& presets, const std::string& option,
                           const std::string& what, const std::string& preset_word) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(spec, ec)) {
    std::ifstream in(spec);
    if (!in) throw InputError(spec, 0, "", "cannot open " + what);
    std::stringstream ss;
    ss << in.rdbuf();
    return {ss.str(), spec};
  }
  if (std::filesystem::is_directory(spec, ec)) throw InputError(spec, 0, option, "is a directory, not a " + what);
  std::string names;
  for (const auto& f : presets) {
    if (spec == f.name) return {f.text, "preset:" + f.name};
    names += (names.empty() ? "" : ", ") + f.name;
  }
  throw InputError(spec, 0, option,
                   "no such file, and not a " + preset_word + " name (" + preset_word + "s: " + names + ")");
}

}  // namespace tiersim::config
