#pragma once
// Reads runtime profiles (calib/runtimes/SCHEMA.md) with the strict reader: every key declared once
// here; unknown, missing or impossible values are InputErrors naming the file, line and key.
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "runtime/runtime_profile.hpp"

namespace tiersim::runtime {

RuntimeProfile parse_runtime(const std::string& yaml_text, const std::string& source_name);
RuntimeProfile parse_runtime_node(const YAML::Node& root, const std::string& source_name);
// `spec` is a file path if one exists there, otherwise the name of an embedded runtime.
RuntimeProfile resolve_runtime(const std::string& spec);

struct RuntimeInfo {
  std::string name;
  std::string description;
};
std::vector<RuntimeInfo> list_runtimes();
// The runtime a run uses when none is named: eager PyTorch with assumed (not measured) costs.
inline constexpr const char* kDefaultRuntime = "pytorch-eager";

}  // namespace tiersim::runtime
