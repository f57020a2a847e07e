#include "config/profile_source.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "core/input_file.hpp"

namespace tiersim::config {

ProfileSource find_profile(const std::string& spec, const std::vector<EmbeddedFile>& presets, const std::string& option,
                           const std::string& what, const std::string& preset_word) {
  std::error_code ec;
  if (std::filesystem::is_directory(spec, ec)) throw InputError(spec, 0, option, "is a directory, not a " + what);
  // A file that exists is read (a FIFO or a device is refused by the reader, never taken for a preset's name).
  if (std::filesystem::exists(spec, ec)) return {io::read_file(spec, "", what), spec};
  std::string names;
  for (const auto& f : presets) {
    if (spec == f.name) return {f.text, "preset:" + f.name};
    names += (names.empty() ? "" : ", ") + f.name;
  }
  throw InputError(spec, 0, option,
                   "no such file, and not a " + preset_word + " name (" + preset_word + "s: " + names + ")");
}

}  // namespace tiersim::config
