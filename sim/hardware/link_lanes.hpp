#pragma once
// A what-if on the host link's PCIe generation or lane count (`--set host_link.width=8`, `host_link.generation=4`):
// the profile's copy curves were measured (or published) at its own generation and width, so a changed link scales
// them. A pinned copy is the link's: its rates scale by the link's raw capacity (per-lane rate x lanes, PCIe base
// specifications: 0.25, 0.5, 0.985, 1.969, 3.938 GB/s per lane and direction for generations 1-5 after line coding,
// 7.56 and 15.13 for the FLIT-mode generations 6 and 7). A pageable copy is staged through a pinned buffer by host memcpy: it keeps its rates where the link is
// not the bottleneck and is capped at the scaled pinned rate of the same size where it becomes one. Latencies stay.
#include "hardware/profile.hpp"

namespace tiersim::hw {

// Raw rate of one PCIe lane, one direction, B/s, for generation 1-7 (0 outside).
double pcie_lane_rate(int generation);

// Rescales `link`'s curves from (from_generation, from_width) to its own generation and width.
void rescale_host_link(HostLinkSpec& link, int from_generation, int from_width);

}  // namespace tiersim::hw
