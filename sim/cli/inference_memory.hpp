#pragma once
// What PyTorch's caching allocator would report for a run whose framework is PyTorch + transformers (a runtime
// named pytorch-*): the generate loop's allocations (model/inference/inference_allocations.hpp) replayed on the
// compute GPU's memory (allocator_replay.hpp). Modelled for a dense decoder from its config, every weight on the
// compute GPU; otherwise the result says why not.
#include <optional>

#include "cli/run_inputs.hpp"
#include "cli/simulation.hpp"
#include "report/reporters.hpp"

namespace tiersim::app {

// nullopt when the run's framework is not PyTorch (llama.cpp keeps its own buffers).
std::optional<report::AllocatorMemory> inference_memory(const RunInputs& in, const Simulation& sim);

}  // namespace tiersim::app
