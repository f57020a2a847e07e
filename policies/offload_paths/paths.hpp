#pragma once
// Factories of the offload paths, one per file; registry.cpp lists them.
#include "policies/strategy/parts.hpp"

namespace tiersim::strategy {

std::unique_ptr<OffloadPath> make_copy_path(config::Section& options);
std::unique_ptr<OffloadPath> make_execute_path(config::Section& options);

// Moves each layer whole to the device holding most of its weight bytes (ties to the compute GPU, then
// the lower device) when `moves(device)` says layers that end up there run there; the weights of a
// layer that stays on the compute GPU keep their homes. Weights taken by managed memory are left alone.
void snap_layers(const trace::Header& header, placement::Placement& p, bool (*runs_there)(placement::DeviceId));

}  // namespace tiersim::strategy
