#pragma once
// A strategy is a placement rule x a memory kind x an offload path (parts.hpp), each named with its
// options. The ten policy names of earlier versions are presets of these parts (presets.hpp) and give
// the same numbers; parts can also be given directly (sim --placement/--memory/--offload).
#include <string>

#include "hardware/profile.hpp"
#include "placement/placement.hpp"
#include "policies/strategy/part_spec.hpp"
#include "trace/trace.hpp"

namespace tiersim::strategy {

struct StrategySpec {
  std::string preset;   // the preset it started from ("" if none)
  bool custom = false;  // a part was given directly, replacing the preset's
  PartSpec placement{"all-gpu"};
  PartSpec memory{"device"};
  PartSpec offload{"copy"};
  PartSpec platform{"linux"};  // the OS's driver model (linux, windows, wsl2): not a strategy choice, but it
                               // decides what managed memory and device memory past VRAM do
  // The preset's name, or the composition "placement + memory + offload" when parts were given, with
  // " on PLATFORM" unless it is plain linux.
  std::string label() const;
};

// Places every tensor: runs the placement rule, applies the memory kind and the offload path, checks
// capacity. InputError for options a part does not read or combinations that are not modelled (naming
// the flag that gave them), CapacityError when the model cannot fit.
placement::Placement compose(const trace::Header& header, const hw::HardwareProfile& hw, const StrategySpec& spec);

}  // namespace tiersim::strategy
