#pragma once
// Factories of the placement rules, one per file; registry.cpp lists them.
#include "policies/strategy/parts.hpp"

namespace tiersim::strategy {

std::unique_ptr<PlacementRule> make_all_gpu(config::Section& options);
std::unique_ptr<PlacementRule> make_distorch_bytes(config::Section& options);
std::unique_ptr<PlacementRule> make_distorch_ratio(config::Section& options);
std::unique_ptr<PlacementRule> make_distorch_fraction(config::Section& options);
std::unique_ptr<PlacementRule> make_first_layers(config::Section& options);
std::unique_ptr<PlacementRule> make_accelerate_auto(config::Section& options);
std::unique_ptr<PlacementRule> make_accelerate_balanced(config::Section& options);
std::unique_ptr<PlacementRule> make_accelerate_balanced_low_0(config::Section& options);
std::unique_ptr<PlacementRule> make_accelerate_sequential(config::Section& options);
std::unique_ptr<PlacementRule> make_explicit_device_map(config::Section& options);
// A device map's JSON text (`file` names it in errors): module names to devices. Duplicate keys, a value that is not a
// device and JSON that does not parse are InputErrors naming the file, the line and the key.
std::map<std::string, placement::DeviceId> parse_device_map_json(const std::string& text, const std::string& file);
std::unique_ptr<PlacementRule> make_comfy_lowvram(config::Section& options);
std::unique_ptr<PlacementRule> make_llamacpp_ngl(config::Section& options);

// Reads a `donor` option (cpu or cuda:N, not the compute GPU), cpu when absent.
placement::DeviceId read_donor(config::Section& options);

// Reads a `dynamic-vram=off|on` option of a ComfyUI rule: `on` (current ComfyUI's default: weights placed
// at run time by memory pressure) is not modelled and refused with `why_not`, which names the flag.
void refuse_dynamic_vram(config::Section& options, const std::string& why_not);

// The message for a device the machine does not have (InputError naming `key`, `file` when given).
void check_on_machine(placement::DeviceId d, const hw::HardwareProfile& hw, const std::string& key,
                      const std::string& file = "");

}  // namespace tiersim::strategy
