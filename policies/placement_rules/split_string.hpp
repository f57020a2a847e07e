#pragma once
// ComfyUI-MultiGPU DisTorch allocation strings, and the per-device byte quotas they mean:
//   bytes     "cuda:0,2.5gb;cpu,*"    fill devices in order with that many bytes; * takes the rest (cpu by default)
//   ratio     "cuda:0,80%;cpu,20%"    shares of the model, normalised (8%,8%,4% = 40/40/20)
//   fraction  "cuda:0,0.8;cpu,0.5"    fraction of each device's total memory usable for the model
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "hardware/profile.hpp"
#include "placement/placement.hpp"

namespace tiersim::policies {

enum class SplitMode { Bytes, Ratio, Fraction };

struct SplitEntry {
  placement::DeviceId device = placement::kCpu;
  double value = 0;       // bytes, ratio share, or fraction
  bool wildcard = false;  // bytes mode "*"
};

// Throws InputError (key "--split") naming the entry that does not parse.
std::vector<SplitEntry> parse_split(std::string_view text, SplitMode mode);

// Bytes of the model each device may hold, as DisTorch computes them. `model_bytes` is the total
// weight size; device capacities come from the profile.
// Bytes and ratio shares become fractions of each device's total memory written with 4 decimals, as
// DisTorch writes them (distorch_2.py), then bytes again; fractions are used as written.
std::map<placement::DeviceId, double> split_quotas(const std::vector<SplitEntry>& entries, SplitMode mode,
                                                   double model_bytes, const hw::HardwareProfile& hw);

// DisTorch's virtual-VRAM mode (the node's virtual_vram_gb and donor list; default 4 GiB to the cpu).
std::map<placement::DeviceId, double> virtual_vram_quotas(double model_bytes, double vram_bytes,
                                                          placement::DeviceId compute,
                                                          const std::vector<placement::DeviceId>& donors,
                                                          const hw::HardwareProfile& hw);

}  // namespace tiersim::policies
