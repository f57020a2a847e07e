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
// The same for a run of `trace` on `in`'s machine and runtime (in.trace is not read).
std::optional<report::AllocatorMemory> inference_memory(const RunInputs& in, const TraceSpec& trace, const Simulation& sim);

// For the commands that predict many points (plan, sweep): why the caching allocator's replay runs out of memory
// for a point simulated on `machine` with `spec` (the reason `sim run` would exit 3), or nothing where it fits or
// is not modelled.
std::optional<std::string> allocator_out_of_memory(const RunInputs& machine, const TraceSpec& spec, const Simulation& sim);

}  // namespace tiersim::app
