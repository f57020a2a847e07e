#pragma once
// The managed-memory driver as the simulator sees it (shared/docs/uvm.md; nvidia-uvm on x86 + PCIe):
// - memory is tracked in VA blocks (2 MiB); a resident block takes the GPU pages its allocations cover (a whole
//   2 MiB for a large tensor's blocks, 12 KiB for a 10 KiB tensor's own block);
// - a GPU access to a block that is not on the GPU faults; the density prefetcher turns a dense access
//   into a migration of the whole block, a sparse one into the touched 64 KiB big pages;
// - the faulting kernel stalls while its faults are serviced: one fault latency per batch of
//   fault_batch_count blocks, a per-block driver overhead, and the bytes at the fault-migration rate;
// - when GPU memory is full, the block that became resident first is evicted (FIFO, not LRU: a block
//   is not moved on access) and written back to the host, unless it is a read-only duplicate;
// - PreferredLocation=CPU blocks stay in host memory: the first GPU touch maps them (a mapping fault),
//   then every access reads over the link; AccessedBy=GPU maps them from the start, and after an
//   eviction makes the GPU map the host copy instead of faulting it back;
// - ReadMostly: a GPU read makes a read-only duplicate (the host copy stays valid); a write collapses
//   it to the writer's copy.
// - A GEMV whose input vector is host-resident (PreferredLocation=CPU, or mapped) reads it over the
//   link once per thread block: the time cuBLAS takes for that shape (calib's remote_gemv rows, with the weight on
//   the GPU or host-resident too) where the profile measured it, else its weight's bytes at
//   gemv_remote_input_bandwidth (calib's zero_copy input_gemv rows), not the vector's bytes once.
// - Without demand paging (Windows and WSL2: concurrentManagedAccess = 0), the GPU never faults: the
//   managed data a kernel uses is migrated whole when it is launched, at the bulk (prefetch) rate, and
//   the footprint never exceeds GPU memory (the strategy refuses it), so nothing is evicted.
// Costs come from hw::ManagedMemorySpec (calibrated by calib/src/bench_managed.cu).
#include <algorithm>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "hardware/op_cost.hpp"
#include "hardware/profile.hpp"
#include "placement/placement.hpp"
#include "trace/trace.hpp"

namespace tiersim::managed {

// The smallest GPU chunk the driver backs a block with (PAGE_SIZE): a block takes GPU memory in chunks no larger than
// the part of the block its allocation covers (nvidia-uvm uvm_va_block.c block_gpu_chunk_size: "the largest allowed
// size" that is aligned to the start and fits within block->end), so a 10 KiB tensor's block holds 12 KiB of GPU
// memory, not 2 MiB.
constexpr double kGpuPage = 4096.0;

// What servicing one kernel's (or one prefetch's) accesses cost and moved.
struct AccessCost {
  std::uint32_t faulted_blocks = 0;
  std::uint32_t mapping_faults = 0;
  std::uint32_t evicted_blocks = 0;
  double migrated_bytes = 0;     // host -> GPU
  double written_back_bytes = 0; // GPU -> host (evictions)
  double remote_bytes = 0;       // read or written over the link without migrating
  double duplicated_bytes = 0;   // part of migrated_bytes that left a valid host copy (ReadMostly)
  double launch_migrated_bytes = 0;  // host -> GPU at kernel launch, no faults (no demand paging)
  double remote_input_bytes = 0;     // a GEMV's host-resident input, re-read per output row
  // A GEMV whose input vector is host-resident, for the profile's per-shape times (ManagedMemorySpec::remote_gemv):
  // the vector's bytes, its weight's bytes, and the part of remote_bytes that is the vector's own.
  double gemv_input_bytes = 0, gemv_weight_bytes = 0, gemv_input_remote_bytes = 0;
  double remote_reread_bytes = 0;    // a matrix product's host-resident weight read again, once per tile of its rows
  double fresh_touch_seconds = 0;    // the first writes of fresh allocations (a per-tensor allocator's), populated
};

struct ManagedStats {
  std::uint64_t faulted_blocks = 0, fault_batches = 0, mapping_faults = 0, evicted_blocks = 0;
  double migrated_bytes = 0, written_back_bytes = 0, remote_bytes = 0, prefetched_bytes = 0;
};

// Whether a GPU access of a block with this advice makes a read-only GPU copy although PreferredLocation=CPU would
// keep it in host memory: a read of a ReadMostly block under demand paging ("if cudaMemAdviseSetReadMostly is also
// set on this memory region ..., then the policies associated with that advice will override the policies of this
// advice": CUDA Runtime API, cudaMemAdvise, cudaMemAdviseSetPreferredLocation). Not with AccessedBy=GPU, whose
// mapping means the GPU never faults (nothing measured says it duplicates then).
inline bool read_duplicates(std::uint8_t advice, bool write, bool demand_paging) {
  return (advice & placement::kReadMostly) != 0 && (advice & placement::kAccessedByGpu) == 0 && !write && demand_paging;
}

// What the advice on one allocation of a per-tensor allocator (one cudaMallocManaged per tensor, advised at
// allocation, as seed 000's) adds to its cycle: calib's advised_cycle for the advice and size (the whole cycle with the
// advice less without: the calls, the kernels' faults and remote accesses), charged per call by the step plan.
// Measured on Linux; nothing without demand paging, without PreferredLocation=CPU, or for a Windows sysmem-fallback
// allocation (not advice).
inline double advised_cycle_extra(const hw::ManagedMemorySpec& spec, std::uint8_t advice, double bytes, bool demand_paging) {
  if (!demand_paging || !(advice & placement::kPreferCpu) || (advice & placement::kSysmemFallback)) return 0.0;
  return spec.advised_cycle_seconds((advice & placement::kAccessedByGpu) != 0, read_duplicates(advice, false, demand_paging),
                                    bytes);
}

// A GEMV's input vector of `bytes`, `remote` of them reached over the link, whose weight has `weight_bytes`: its
// re-reads (one per output row) and, for the per-shape times, its operands' sizes, when the profile prices either.
inline void add_remote_gemv_input(const hw::ManagedMemorySpec& spec, double weight_bytes, double bytes, double remote,
                                  AccessCost& c) {
  if (!(weight_bytes > 0 && remote > 0 && bytes > 0) || (spec.gemv_remote_input_bandwidth <= 0 && spec.remote_gemv.empty()))
    return;
  c.remote_input_bytes += weight_bytes * remote / bytes;
  c.gemv_input_bytes += bytes;
  c.gemv_weight_bytes = weight_bytes;
  c.gemv_input_remote_bytes += remote;
}

// Seconds a GEMV whose input vector is host-resident takes by itself, from the profile's per-shape times (with the
// weight host-resident too when most of the weight's bytes were read over the link); 0 when the kernel is none, or
// the profile has no such times (gemv_remote_input_bandwidth then prices the re-reads as a stall).
inline double remote_gemv_seconds(const hw::ManagedMemorySpec& spec, const AccessCost& c) {
  if (c.gemv_weight_bytes <= 0 || spec.remote_gemv.empty()) return 0.0;
  const bool weight_remote = c.remote_bytes - c.gemv_input_remote_bytes >= 0.5 * c.gemv_weight_bytes;
  return spec.remote_gemv_seconds(c.gemv_input_bytes, c.gemv_weight_bytes, weight_remote);
}

// The distinct host-input GEMV shapes a run priced from the profile's per-shape times, split by whether the profile
// measured the shape itself or took it from the nearest measured input width (a neighbour can be 10x off: cuBLAS's
// grid for 1024 x 2560 takes 13 ms on the H200, for 4096 x 2560 2.3 ms). What the answer says it assumed.
class GemvShapeCoverage {
 public:
  void add(const hw::ManagedMemorySpec& spec, const AccessCost& c) {
    if (c.gemv_weight_bytes <= 0 || spec.remote_gemv.empty()) return;
    const std::pair<double, double> shape{c.gemv_input_bytes, c.gemv_weight_bytes};
    if (measured_.count(shape) || nearest_.count(shape)) return;  // a step's GEMVs repeat: look each shape up once
    (spec.remote_gemv_measured(shape.first, shape.second) ? measured_ : nearest_).insert(shape);
  }
  std::uint64_t measured() const { return measured_.size(); }
  std::uint64_t from_nearest() const { return nearest_.size(); }

 private:
  std::set<std::pair<double, double>> measured_, nearest_;
};

// What writing `bytes` of evicted blocks back adds to the fault or prefetch that evicted them: evict_writeback_bandwidth
// where the profile measured it (the write-back overlaps the migration in part), else evict_to_cpu after it.
inline double writeback_seconds(const hw::ManagedMemorySpec& spec, double bytes) {
  return bytes / (spec.evict_writeback_bandwidth > 0 ? spec.evict_writeback_bandwidth : spec.evict_to_cpu);
}

class ManagedMemory {
 public:
  // `gpu_capacity` is the GPU memory managed blocks may occupy (bytes).
  ManagedMemory(const hw::ManagedMemorySpec& spec, const trace::Header& header, const placement::Placement& placement,
                double gpu_capacity);

  bool is_managed(std::uint32_t tensor) const { return first_block_[tensor] >= 0; }
  // A kernel touches `bytes` of `tensor` from byte `offset` on (reading, or writing when `write`): the blocks of
  // that range, not of the tensor's start (one expert of a fused expert tensor). `reread`: the tensor is a GEMV's
  // input vector; if it is reached remotely, this many bytes are read again over the link at
  // gemv_remote_input_bandwidth (when the profile has it), a stall on top of the kernel. `reads`: how many times the
  // kernel reads these bytes (a matrix product's weight, once per tile of its rows: gemm_weight_reads); the part
  // reached remotely crosses the link that many times (remote_reread_bytes: all but the first).
  // `fresh`: the bytes are a new allocation the kernel writes first (a per-tensor allocator's output tensor): the
  // driver populates them at that touch (fresh_touch_seconds), a stall on top of the kernel.
  void access(std::uint32_t tensor, std::uint64_t bytes, bool write, AccessCost& cost, std::uint64_t reread = 0,
              std::uint64_t offset = 0, double reads = 1, bool fresh = false);
  // Seconds the kernel stalls for the faults accumulated in `cost`.
  double stall_seconds(const AccessCost& cost) const { return stall_seconds(spec_, cost); }
  static double stall_seconds(const hw::ManagedMemorySpec& spec, const AccessCost& cost);
  // Blocks the managed tensors occupy under the placement's allocator layout, and the GPU memory they take when all
  // are resident (each block the GPU pages its allocations cover: a small tensor's block is not 2 MiB).
  std::size_t footprint_blocks() const { return where_.size(); }
  double footprint_bytes() const {
    double bytes = 0;
    for (std::uint32_t s : size_) bytes += s;
    return bytes;
  }
  // cudaMemPrefetchAsync of a whole tensor to the GPU: migrates (evicting as needed) with no faults.
  // Returns its seconds on the copy stream.
  double prefetch_to_gpu(std::uint32_t tensor, AccessCost& cost);
  // Adds one kernel's or one prefetch's cost to the run's totals.
  void record(const AccessCost& cost, bool prefetch);

  // A new step begins: step_working_bytes() counts from zero again.
  void begin_step() {
    ++step_;
    step_working_ = 0;
  }
  // The GPU memory of the blocks the current step has touched on the GPU (faulted in, or resident already; not the
  // blocks read over the link): a decode step's working set, which decides whether the run fits or thrashes.
  double step_working_bytes() const { return step_working_; }
  double resident_bytes() const { return resident_bytes_; }
  double peak_resident_bytes() const { return peak_bytes_; }
  double capacity_bytes() const { return capacity_bytes_; }
  // The GPU memory block `b` takes when resident (the GPU pages of it its allocations cover).
  double block_bytes(std::size_t b) const { return size_[b]; }
  const ManagedStats& stats() const { return stats_; }
  const hw::ManagedMemorySpec& spec() const { return spec_; }

 private:
  enum class Where : std::uint8_t { Host, Gpu, Both };
  // Each VA block's state, one array per field (the loops over a run of blocks read one field at a time).
  void make_room(std::uint32_t b, AccessCost& cost);  // frees what block b needs, evicting the oldest
  void become_resident(std::uint32_t b, Where where);
  void touch_block(std::uint32_t b, double touched, bool write, bool prefetch, AccessCost& cost);
  void touch_range(std::uint32_t tensor, double offset, double bytes, bool write, bool prefetch, AccessCost& cost);

  hw::ManagedMemorySpec spec_;
  std::vector<std::int64_t> first_block_;   // by tensor; -1 when not managed
  std::vector<double> offset_in_block_;     // by tensor: byte offset of its start within its first block
  std::vector<double> bytes_;               // by tensor
  std::vector<Where> where_;          // by block: where its valid copy is
  std::vector<std::uint8_t> mapped_;  // by block: the GPU has a mapping to the host copy
  std::vector<std::uint8_t> advice_;  // by block: placement::kPreferCpu | kAccessedByGpu | kReadMostly
  std::vector<std::uint32_t> size_;   // by block: the GPU memory it takes when resident (bytes, whole GPU pages)
  bool demand_paging_ = true;
  // The driver's eviction order: resident blocks, oldest first, as runs of consecutive block numbers in a ring
  // (a tensor's blocks become resident together, so runs are long). A block enters when it becomes resident (only
  // a host-resident block does) and leaves when it is evicted (the only way back to the host), so it is in the
  // ring at most once and the ring never holds more runs than blocks.
  struct Run {
    std::uint32_t first = 0, count = 0;
  };
  std::vector<Run> fifo_;
  std::size_t fifo_head_ = 0, fifo_runs_ = 0;
  void push_resident(std::uint32_t first, std::uint32_t count);  // appends to the newest run when consecutive
  // Evicts the oldest resident blocks until they free `bytes` (or none is left), counting the blocks evicted and
  // the bytes written back (those whose only copy was on the GPU).
  void evict_for(double bytes, std::uint32_t& evicted, double& written_back);
  double capacity_bytes_ = 0;
  std::vector<std::uint32_t> touched_step_;  // by block: the last step that touched it on the GPU (0: none)
  std::uint32_t step_ = 1;
  double step_working_ = 0;
  void count_working(std::uint32_t b) {
    if (touched_step_[b] != step_) touched_step_[b] = step_, step_working_ += size_[b];
  }
  double resident_bytes_ = 0;
  double peak_bytes_ = 0;
  ManagedStats stats_;
  GemvShapeCoverage gemv_coverage_;

 public:
  const GemvShapeCoverage& gemv_coverage() const { return gemv_coverage_; }
};

// Seconds a kernel on managed memory takes, as both engines price it: its faults' stall, then the kernel at its other
// bounds with what it reads over the link, or a host-input GEMV's measured time where that is longer.
inline double kernel_seconds(const hw::ManagedMemorySpec& spec, const hw::GpuOpCost& op, const AccessCost& c) {
  return ManagedMemory::stall_seconds(spec, c) +
         std::max(op.seconds(c.remote_bytes, spec.remote_read_bandwidth, c.remote_reread_bytes), remote_gemv_seconds(spec, c));
}

}  // namespace tiersim::managed
