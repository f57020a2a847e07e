#pragma once
// Where a profile named on the command line comes from: a file when one exists at that path, else an
// embedded preset of that name. One lookup for hardware and runtime profiles, and for the trees that
// --set edits before the loaders read them.
#include <string>
#include <vector>

#include "config/embedded_files.hpp"

namespace tiersim::config {

struct ProfileSource {
  std::string text;
  std::string origin;  // the path, or "preset:NAME"
};

// `what` names the kind ("hardware profile"), `preset_word` what a preset is called ("preset", with
// its plural "presets" in the message); InputError naming `option` when neither a file nor a preset.
ProfileSource find_profile(const std::string& spec, const std::vector<EmbeddedFile>& presets, const std::string& option,
                           const std::string& what, const std::string& preset_word);

}  // namespace tiersim::config
