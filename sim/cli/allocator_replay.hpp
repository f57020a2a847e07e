#pragma once
// Replays a framework's allocations (model/allocation_event.hpp) through PyTorch's caching allocator model on one
// GPU's memory: the peak allocated and reserved of every (step, phase) run, each measured as
// torch.cuda.reset_peak_memory_stats() at its start and max_memory_allocated/reserved() at its end would, or
// the allocation that does not fit (as torch.OutOfMemoryError would name it). Every allocation is on the default
// stream; a FreeAfterUse's block is held for one side stream until its UseEnd (CachingAllocator::free_after_use).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/allocation_event.hpp"
#include "report/reporters.hpp"

namespace tiersim::app {

struct PhasePeak {
  std::uint32_t step = 0;
  std::string phase;
  double allocated = 0, reserved = 0;  // peaks over the phase run
};

struct AllocatorReplay {
  std::vector<PhasePeak> phases;  // in order; up to the failing one when out of memory
  std::optional<report::AllocationFailure> oom;
  // The largest peaks over the runs of `phase` (every phase when empty) from step `from_step` on.
  PhasePeak peak(const std::string& phase = "", std::uint32_t from_step = 0) const;
};

// `alloc_conf`: PYTORCH_CUDA_ALLOC_CONF as PyTorch reads it (expandable_segments:True, max_split_size_mb:N,
// roundup_power2_divisions:N, max_non_split_rounding_mb:N); empty = the defaults. A setting it cannot model is
// an InputError naming `flag`.
// Parses `alloc_conf` as replay_allocations does, an InputError naming `flag` when it does not parse: a command checks
// its --alloc-conf whether or not its run replays allocations (a recorded trace, llama.cpp's runtime), so that a
// setting is never accepted without being read.
void check_alloc_conf(const std::string& alloc_conf, const std::string& flag = "--alloc-conf");

// `capacity_bytes` at 2^64 or more (HUGE_VAL): no limit.
AllocatorReplay replay_allocations(const std::vector<model::AllocationEvent>& events, double capacity_bytes,
                                   double total_memory_bytes, const std::string& alloc_conf = "",
                                   const std::string& flag = "--alloc-conf");

}  // namespace tiersim::app
