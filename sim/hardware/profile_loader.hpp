#pragma once
// Reads hardware profiles from YAML (schema: calib/profiles/SCHEMA.md). Every key is declared once
// here; unknown keys, missing keys and impossible values are InputErrors naming the file, line and key.
#include <string>
#include <utility>

#include <yaml-cpp/yaml.h>
#include <vector>

#include "hardware/profile.hpp"

namespace tiersim::hw {

HardwareProfile parse_profile(const std::string& yaml_text, const std::string& source_name);
// The same from a parsed tree (a YAML document, a result's JSON, a tree with --set overrides applied).
HardwareProfile parse_profile_node(const YAML::Node& root, const std::string& source_name);
HardwareProfile load_profile_file(const std::string& path);

// `spec` is a file path if one exists there, else the name of an embedded preset, else a catalogue composition
// (hardware/catalogue.hpp: `2xrtx3090+nvlink`).
HardwareProfile resolve_profile(const std::string& spec);
// The same as a tree the loader would read (for --set overrides), and where it came from: the path,
// "preset:NAME" or "catalogue:CANONICAL".
std::pair<YAML::Node, std::string> profile_tree(const std::string& spec);

struct PresetInfo {
  std::string name;
  std::string description;
};
std::vector<PresetInfo> list_presets();
inline constexpr const char* kDefaultProfile = "rtx4090";

}  // namespace tiersim::hw
