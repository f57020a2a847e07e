#pragma once
// What the unified-memory policies share: every weight (and, with --um-scope all, the KV cache and
// activations, as a CUDAPluggableAllocator backed by cudaMallocManaged gives them) in managed memory,
// the weights carrying the policy's cudaMemAdvise hints. The driver, not the policy, then decides where
// each block lives (sim/managed/managed_memory.hpp).
#include <cstdint>
#include <string>

#include "policies/policy.hpp"

namespace tiersim::policies {

placement::Placement managed_placement(const trace::Header& header, const hw::HardwareProfile& hw,
                                       const PolicyOptions& options, std::uint8_t weight_advice, bool prefetch,
                                       const std::string& policy);

}  // namespace tiersim::policies
