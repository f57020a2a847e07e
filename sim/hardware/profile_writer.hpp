#pragma once
// Hardware and runtime profiles written back in their own schemas (calib/profiles/SCHEMA.md,
// calib/runtimes/SCHEMA.md), with quantities in base units written so that reading them gives the
// same doubles back: a result's JSON carries the numbers it was computed from and `sim run --config`
// re-reads them through the same strict loaders; `sim profiles show` prints them as YAML.
#include <nlohmann/json.hpp>

#include "hardware/profile.hpp"
#include "runtime/runtime_profile.hpp"

namespace tiersim::config {

nlohmann::ordered_json profile_to_json(const hw::HardwareProfile& p);
nlohmann::ordered_json runtime_to_json(const runtime::RuntimeProfile& r);
// A JSON document as block-style YAML.
std::string json_to_yaml(const nlohmann::ordered_json& j);

}  // namespace tiersim::config
