#pragma once
// What seed 000's advice adds to one activation of a per-tensor allocator (tiersim_calib --only advised_cycle,
// calib/src/bench_alloc_calls.cu bench_advised_cycle: beside a live set, per allocation cudaMallocManaged, the advice,
// a kernel writing the range, one reading it, cudaFree four allocations later; host seconds per whole cycle, by size)
// as the profile's managed_memory.advised_cycle: per advice and size, the variant's median less `none`'s at that size
// (0 where the advised cycle was not slower).
#include "fit/raw_csv.hpp"
#include "hardware/profile.hpp"

namespace tiersim::calib {

// Rows `um_advised_cycle,<none|prefer_cpu|prefer_cpu_accessed_by|prefer_cpu_read_mostly>_<size>`; the `_all` rows
// (every size pooled) are not used. An InputError naming the file when it has no `none` rows, a variant lacks a size
// `none` has, or a size does not parse.
hw::ManagedMemorySpec::AdvisedCycle fit_advised_cycle(const RawMeasurements& runs);

}  // namespace tiersim::calib
