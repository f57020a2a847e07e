#pragma once
// The Windows driver's sysmem fallback (windows_platform.cpp says what rests on what): the device
// allocations the compute GPU cannot hold live in shared system memory, and kernels read and write them
// over the link.
#include "policies/strategy/parts.hpp"

namespace tiersim::strategy {

// Walks the compute GPU's device allocations in the order a PyTorch program makes them (the weights as
// the model is loaded, in the trace's order, then the KV cache, then activations) and puts each that
// no longer fits in what VRAM has left (after the reserve and the copy path's staging buffers, which
// are allocated first) in system memory: a managed tensor with kSysmemFallback (mapped, remote, never
// migrated). A later, smaller allocation can still fit. The activation workspace (one tensor in a
// trace, many allocations in a run) keeps what still fits at its start in VRAM (vram_prefix). Says
// what moved in `resolved`.
void spill_to_system_memory(const trace::Header& header, const hw::HardwareProfile& hw, placement::Placement& p,
                            Resolved& resolved);

}  // namespace tiersim::strategy
