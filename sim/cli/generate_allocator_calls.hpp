#pragma once
// How many cudaMallocManaged / cudaFree pairs a per-tensor managed allocator (managed:allocator=per-tensor, the seeds'
// CUDAPluggableAllocator) is asked for in one prefill and one decode step of transformers' generate(): the allocations
// of model/inference/inference_allocations.hpp counted, for the step plan to charge each call's host time
// (placement::ManagedSpec::allocations_per_prefill / _decode) instead of one pair per trace op.
#include <optional>
#include <string>
#include <vector>

#include "cli/simulation.hpp"
#include "runtime/runtime_profile.hpp"

namespace tiersim::app {

struct GenerateAllocatorCalls {
  double prefill = 0;  // allocations in the prefill step
  double decode = 0;   // allocations in one decode step (0 without decode tokens)
  std::vector<double> prefill_bytes, decode_bytes;  // their sizes, in the order they are made
};

// nullopt where the allocations are not modelled: a runtime other than PyTorch's, a recorded trace, a GGUF model, a
// family or dtype inference_allocations does not cover, transformers' eager experts loop.
std::optional<GenerateAllocatorCalls> generate_allocator_calls(const TraceSpec& trace, const runtime::RuntimeProfile& runtime);

}  // namespace tiersim::app
