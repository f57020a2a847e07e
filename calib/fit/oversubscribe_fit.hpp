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
//
// Since session 31, with decoder passes (tiersim_calib --only oversubscribe_decoder: a decoder's weights as one
// cudaMallocManaged range each, read layer after layer by the cuBLAS GEMV a decode runs, past a ballooned GPU) the two
// costs come from those instead, for the kernels a decode faults with. Their faults batch better than the 64 MiB
// streaming passes' (ReadMostly 13-15 GB/s against 9-11, plain 8.0-8.8 against 7.1-7.6 on the H200), faster even than
// the undersubscribed fault path above (12.8 GB/s, a streaming first touch), so an overhead on top of that path
// cannot express them. The profile then says what a fault that must evict migrates per second, its driver work
// included, but its batches' latency and the write-back:
//   evicting_fault_bandwidth  = 1 / median over ReadMostly GEMV passes of (seconds - batch latencies) per byte
//   evict_writeback_bandwidth = 1 / (median over plain GEMV passes of the same - 1 / evicting_fault_bandwidth)
// where a pass's batch latencies are fault_latency per batch of fault_batch_count blocks, per weight (one kernel
// each), from the file's `oversubscribe_decoder_layer` line. Every steady pass (the second on) at a ratio above 1.
#include <string>
#include <vector>

#include "fit/raw_csv.hpp"
#include "hardware/profile.hpp"

namespace tiersim::calib {

struct OversubscribeFit {
  bool fitted = false;
  double evict_block_overhead = 0;       // s per evicted block (the 64 MiB passes)
  double evicting_fault_bandwidth = 0;   // B/s (the decoder passes; then evict_block_overhead is 0)
  double evict_writeback_bandwidth = 0;  // B/s
  double plain_rate = 0, read_mostly_rate = 0, fault_path_rate = 0;  // B/s, what the fit read (for the report)
  int passes = 0;                                                    // steady passes used (plain + ReadMostly)
  std::string why_not;                                               // when not fitted
};

// The chunk tiersim_calib's oversubscribe passes launch one kernel for (calib/src/bench_oversubscribe.cu).
inline constexpr double kOversubscribeChunk = 64.0 * 1048576.0;

// `decoder_passes`: tiersim_calib --only oversubscribe_decoder files, each with its own layer; when given, the fit is
// theirs (their GEMV rows), else raw's 64 MiB passes'.
OversubscribeFit fit_oversubscription(const RawMeasurements& raw, const hw::ManagedMemorySpec& fault_costs,
                                      const std::vector<RawMeasurements>& decoder_passes = {});

}  // namespace tiersim::calib
