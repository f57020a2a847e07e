#pragma once
// Factories of the memory kinds, one per file; registry.cpp lists them.
#include "policies/strategy/parts.hpp"

namespace tiersim::strategy {

std::unique_ptr<MemoryKind> make_device_memory(config::Section& options);
std::unique_ptr<MemoryKind> make_managed_memory(config::Section& options);

}  // namespace tiersim::strategy
