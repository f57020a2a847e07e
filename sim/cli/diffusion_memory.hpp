#pragma once
// What PyTorch's caching allocator would report for a diffusion transformer's iterations run as ComfyUI runs them
// (sim/cli/inference_memory.hpp routes a diffusion model here): the allocations the trace itself implies, replayed on
// the compute GPU's memory (allocator_replay.hpp) - the weights the placement keeps on the GPU and the sampler's
// latents at load, then, op by op in each iteration, the copies of offloaded weights (allocated before the op that
// reads them, freed after) and the transient values (trace/transient_lifetimes.hpp: allocated before the op that
// starts them, freed after their last use). Modelled for weights on the compute GPU or copied from host memory.
#include <optional>

#include "cli/run_inputs.hpp"
#include "cli/simulation.hpp"
#include "report/reporters.hpp"

namespace tiersim::app {

std::optional<report::AllocatorMemory> diffusion_memory(const RunInputs& in, const TraceSpec& trace, const Simulation& sim);

}  // namespace tiersim::app
