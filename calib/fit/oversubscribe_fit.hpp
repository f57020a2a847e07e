#pragma once
// Managed memory past the GPU's memory (tiersim_calib --only oversubscribe: a balloon leaves a few GiB, managed
// buffers of 1.05-2x that are read pass after pass, one kernel per 64 MiB chunk) as the profile's
// managed_memory.evict_block_overhead and evict_writeback_bandwidth. Every pass after the first faults every block
// back in (LRU by migration: the next block needed is the oldest). A ReadMostly buffer's evicted blocks are dropped
// (the host copy stays valid), a plain buffer's written back first:
//   evict_writeback_bandwidth = 1 / (plain seconds per byte - ReadMostly seconds per byte)
//   evict_block_overhead      = (ReadMostly seconds per byte - the fault path's seconds per byte) x va_block
// where the fault path is the profile's undersubscribed fault costs for the same 64 MiB kernels (fault_latency per
// batch, fault_block_overhead per block, fault_migration_bandwidth). Medians over every pass but the first of every
// ratio above 1.
#include <string>

#include "fit/raw_csv.hpp"
#include "hardware/profile.hpp"

namespace tiersim::calib {

struct OversubscribeFit {
  bool fitted = false;
  double evict_block_overhead = 0;       // s per evicted block
  double evict_writeback_bandwidth = 0;  // B/s
  double plain_rate = 0, read_mostly_rate = 0, fault_path_rate = 0;  // B/s, what the fit read (for the report)
  int passes = 0;                                                    // steady passes used (plain + ReadMostly)
  std::string why_not;                                               // when not fitted
};

// The chunk tiersim_calib's oversubscribe passes launch one kernel for (calib/src/bench_oversubscribe.cu).
inline constexpr double kOversubscribeChunk = 64.0 * 1048576.0;

OversubscribeFit fit_oversubscription(const RawMeasurements& raw, const hw::ManagedMemorySpec& fault_costs);

}  // namespace tiersim::calib
