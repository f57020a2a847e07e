#include "managed/managed_memory.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/error.hpp"
#include "core/units.hpp"

namespace tiersim::managed {

namespace {

// One Block of state per VA block is modelled; 2^24 of them is 32 TiB in 2 MiB blocks.
constexpr double kMaxBlocks = 16'777'216.0;

// Refuses a block size that would model an absurd number of blocks (va_block "1 B" under um took one
// block per byte: 15 GB of memory, then bad_alloc) before anything is allocated.
void check_block_count(const hw::ManagedMemorySpec& spec, const trace::Header& header,
                       const placement::Placement& placement) {
  if (!(spec.va_block >= 1.0) || !std::isfinite(spec.va_block))
    throw InputError("", 0, "managed_memory.va_block", "must be a finite size of at least 1 B");
  double footprint = 0;  // bytes, with per-tensor block alignment counted at its worst
  for (const auto& t : header.tensors)
    if (placement.managed.managed[t.id]) footprint += static_cast<double>(t.bytes) + spec.va_block;
  const double blocks = footprint / spec.va_block;
  if (blocks > kMaxBlocks)
    throw InputError("", 0, "managed_memory.va_block",
                     "a VA block of " + units::format_bytes(spec.va_block) + " splits " +
                         units::format_bytes(footprint) + " into " +
                         std::to_string(static_cast<std::uint64_t>(std::min(blocks, 1e19))) +
                         " blocks; at most 16,777,216 are modelled (the driver's block is 2 MiB)");
}

}  // namespace

ManagedMemory::ManagedMemory(const hw::ManagedMemorySpec& spec, const trace::Header& header,
                             const placement::Placement& placement, double gpu_capacity)
    : spec_(spec), first_block_(header.tensors.size(), -1), offset_in_block_(header.tensors.size(), 0.0),
      bytes_(header.tensors.size(), 0.0) {
  check_block_count(spec, header, placement);
  if (!(gpu_capacity < 1e18)) throw std::invalid_argument("managed memory: GPU capacity out of range");
  capacity_bytes_ = std::max(0.0, std::floor(gpu_capacity / kGpuPage) * kGpuPage);
  demand_paging_ = placement.managed.demand_paging;
  // Layout: a caching allocator packs tensors into shared segments; cudaMallocManaged per tensor
  // gives each its own block-aligned range.
  double cursor = 0;  // bytes from the start of managed VA space
  for (const auto& t : header.tensors) {
    if (!placement.managed.managed[t.id]) continue;
    if (!placement.managed.caching_allocator) cursor = std::ceil(cursor / spec.va_block) * spec.va_block;
    const auto first = static_cast<std::int64_t>(std::floor(cursor / spec.va_block));
    first_block_[t.id] = first;
    bytes_[t.id] = static_cast<double>(t.bytes);
    offset_in_block_[t.id] = cursor - static_cast<double>(first) * spec.va_block;
    cursor += static_cast<double>(std::max<std::uint64_t>(t.bytes, 1));
    const auto last = static_cast<std::size_t>(std::ceil(cursor / spec.va_block));
    if (where_.size() < last)
      where_.resize(last, Where::Host), mapped_.resize(last, 0), advice_.resize(last, 0), size_.resize(last, 0);
    // What of each block the tensor covers, in GPU pages: the GPU memory the block takes when resident.
    for (std::size_t b = static_cast<std::size_t>(first); b < last; ++b) {
      const double lo = std::max(cursor - static_cast<double>(std::max<std::uint64_t>(t.bytes, 1)),
                                 static_cast<double>(b) * spec.va_block);
      const double hi = std::min(cursor, static_cast<double>(b + 1) * spec.va_block);
      const double covered = static_cast<double>(size_[b]) + std::ceil((hi - lo) / kGpuPage) * kGpuPage;
      size_[b] = static_cast<std::uint32_t>(std::min(covered, std::ceil(spec.va_block / kGpuPage) * kGpuPage));
    }
    const bool mapped_at_start = placement.managed.weights_mapped && t.kind == trace::TensorKind::Weight;
    for (std::size_t b = static_cast<std::size_t>(first); b < last; ++b) {
      advice_[b] |= placement.managed.advice[t.id];
      // A GPU-filled PreferredLocation=CPU weight keeps the mappings its filling made (managed_first_read.cu).
      if ((advice_[b] & placement::kAccessedByGpu) || (mapped_at_start && (advice_[b] & placement::kPreferCpu)))
        mapped_[b] = 1;
    }
    // A sysmem-fallback tensor's VRAM-resident start: device memory, never migrated or evicted (no
    // FIFO entry, not counted as managed residency); its accesses are local.
    const double prefix = placement::vram_prefix_of(placement, t.id);
    for (std::size_t b = static_cast<std::size_t>(first); prefix > 0 && b < last; ++b)
      if ((static_cast<double>(b + 1) * spec.va_block) - (static_cast<double>(first) * spec.va_block + offset_in_block_[t.id]) <= prefix)
        where_[b] = Where::Gpu;
  }
  if (where_.size() > UINT32_MAX) throw std::length_error("managed footprint too large");
  fifo_.assign(std::max<std::size_t>(where_.size(), 1), Run{});
  touched_step_.assign(where_.size(), 0);
}

void ManagedMemory::push_resident(std::uint32_t first, std::uint32_t count) {
  if (fifo_runs_ > 0) {
    std::size_t last = fifo_head_ + fifo_runs_ - 1;
    if (last >= fifo_.size()) last -= fifo_.size();
    if (fifo_[last].first + fifo_[last].count == first) {
      fifo_[last].count += count;
      return;
    }
  }
  std::size_t tail = fifo_head_ + fifo_runs_;
  if (tail >= fifo_.size()) tail -= fifo_.size();
  fifo_[tail] = {first, count};
  ++fifo_runs_;
}

void ManagedMemory::evict_for(double bytes, std::uint32_t& evicted, double& written_back) {
  while (bytes > 0 && fifo_runs_ > 0) {
    Run& run = fifo_[fifo_head_];
    // The oldest blocks of the run until they free `bytes`.
    std::uint32_t take = 0;
    double freed = 0;
    while (take < run.count && freed < bytes) freed += size_[run.first + take++];
    const std::uint32_t end = run.first + take;
    for (std::uint32_t b = run.first; b < end; ++b)
      if (where_[b] == Where::Gpu) written_back += size_[b];  // the only copy
    std::fill(where_.begin() + run.first, where_.begin() + end, Where::Host);
    // With AccessedBy the GPU maps the host copy instead of faulting it back later.
    for (std::uint32_t b = run.first; b < end; ++b) mapped_[b] = (advice_[b] & placement::kAccessedByGpu) != 0;
    run.first += take;
    run.count -= take;
    if (run.count == 0) {
      if (++fifo_head_ == fifo_.size()) fifo_head_ = 0;
      --fifo_runs_;
    }
    resident_bytes_ -= freed;
    evicted += take;
    bytes -= freed;
  }
}

void ManagedMemory::become_resident(std::uint32_t b, Where where) {
  where_[b] = where;
  push_resident(b, 1);
  resident_bytes_ += size_[b];
  peak_bytes_ = std::max(peak_bytes_, resident_bytes_);
}

void ManagedMemory::make_room(std::uint32_t b, AccessCost& cost) {
  if (capacity_bytes_ < size_[b]) throw std::runtime_error("no GPU memory left for managed memory");
  if (resident_bytes_ + size_[b] > capacity_bytes_) {
    std::uint32_t evicted = 0;
    double written_back = 0;
    evict_for(resident_bytes_ + size_[b] - capacity_bytes_, evicted, written_back);
    cost.evicted_blocks += evicted;
    cost.written_back_bytes += written_back;
  }
}

void ManagedMemory::touch_block(std::uint32_t b, double touched, bool write, bool prefetch, AccessCost& cost) {
  const bool prefer_cpu = (advice_[b] & placement::kPreferCpu) != 0;
  if (where_[b] != Where::Host) {
    // On the GPU already. A write to a read-only duplicate invalidates the host copy.
    if (write && where_[b] == Where::Both) where_[b] = Where::Gpu;
    if (!prefetch) count_working(b);
    return;
  }
  // Host-resident. PreferredLocation=CPU (unless explicitly prefetched) and mapped AccessedBy blocks
  // are accessed where they are, except a read of a ReadMostly block: read duplication overrides the preferred
  // location ("if cudaMemAdviseSetReadMostly is also set on this memory region ..., then the policies associated
  // with that advice will override the policies of this advice": CUDA Runtime API, cudaMemAdvise,
  // cudaMemAdviseSetPreferredLocation), so the read makes a GPU copy. Seed 000's mode 3 (PreferredLocation=CPU +
  // ReadMostly) past VRAM measured so (results/validation/um-oversubscription: at the ReadMostly fault rate, not
  // the remote-read rate).
  if (!prefetch && !read_duplicates(advice_[b], write, demand_paging_) && (prefer_cpu || mapped_[b])) {
    if (!mapped_[b]) {
      mapped_[b] = 1;
      ++cost.mapping_faults;
    }
    cost.remote_bytes += touched;
    return;
  }
  make_room(b, cost);
  if (!demand_paging_ && !prefetch) {
    // Migrated whole with the launch of the kernel that uses it (Windows/WSL2); read duplication does
    // not occur without concurrentManagedAccess (cudaMemAdvise, CUDA runtime API).
    cost.launch_migrated_bytes += size_[b];
    become_resident(b, Where::Gpu);
    count_working(b);
    return;
  }
  const bool read_mostly = (advice_[b] & placement::kReadMostly) != 0 && !write;
  // The density prefetcher moves the whole block once more than the threshold of it is touched.
  double moved = size_[b];
  if (!prefetch && touched < spec_.prefetch_threshold * spec_.va_block)
    moved = std::min(moved, std::max(spec_.big_page, std::ceil(touched / spec_.big_page) * spec_.big_page));
  cost.migrated_bytes += moved;
  if (read_mostly) cost.duplicated_bytes += moved;
  if (!prefetch) ++cost.faulted_blocks;
  become_resident(b, read_mostly ? Where::Both : Where::Gpu);
  if (!prefetch) count_working(b);
}

void ManagedMemory::touch_range(std::uint32_t tensor, double offset, double bytes, bool write, bool prefetch,
                                AccessCost& cost) {
  const std::int64_t first = first_block_[tensor];
  if (first < 0 || bytes <= 0) return;
  // Bytes from the start of the tensor's first block: the range covers blocks [i0, n) of the tensor.
  const double start = offset_in_block_[tensor] + offset;
  const double end = start + bytes;
  const auto i0 = static_cast<std::int64_t>(std::floor(start / spec_.va_block));
  const auto n = static_cast<std::int64_t>(std::ceil(end / spec_.va_block));
  // What an oversubscribed run does to nearly every block, a run of blocks at a time: host-resident blocks without
  // advice, touched past the prefetch threshold, faulted in whole under demand paging after evicting the oldest
  // resident blocks. Block by block (touch_block) each evicts one block then becomes resident; a run of k evicts
  // the k oldest first, which are the same blocks as long as the ring holds k of them before the run (k is at
  // most the capacity), and ends in the same state. The counts are added once: byte totals are whole multiples
  // of the block, exact in a double in any order. Everything else goes through touch_block.
  const double whole = spec_.prefetch_threshold * spec_.va_block;
  const bool fast = demand_paging_ && !prefetch;
  std::uint32_t faulted = 0, evicted = 0;
  double written_back = 0, migrated = 0;
  auto touched = [&](std::int64_t i) {
    return std::min(end, static_cast<double>(i + 1) * spec_.va_block) - std::max(start, static_cast<double>(i) * spec_.va_block);
  };
  // Only the first and the last block can be touched in part: the others are whole.
  auto eligible = [&](std::int64_t i) {
    const auto b = static_cast<std::size_t>(first + i);
    return fast && where_[b] == Where::Host && advice_[b] == 0 && ((i > i0 && i + 1 < n) || touched(i) >= whole);
  };
  for (std::int64_t i = i0; i < n;) {
    Where& where = where_[static_cast<std::size_t>(first + i)];
    if (where != Where::Host) {  // on the GPU already (touch_block's first case)
      if (write && where == Where::Both) where = Where::Gpu;
      if (!prefetch) count_working(static_cast<std::uint32_t>(first + i));
      ++i;
      continue;
    }
    if (!eligible(i)) {
      touch_block(static_cast<std::uint32_t>(first + i), touched(i), write, prefetch, cost);
      ++i;
      continue;
    }
    std::int64_t j = i + 1;
    while (j < n && eligible(j)) ++j;
    const auto k = static_cast<std::size_t>(j - i);
    const auto b0 = static_cast<std::uint32_t>(first + i);
    double run_bytes = 0;
    for (std::size_t b = b0; b < b0 + k; ++b) run_bytes += size_[b];
    if (run_bytes > capacity_bytes_) {  // the run outgrows the GPU: block by block
      for (; i < j; ++i) touch_block(static_cast<std::uint32_t>(first + i), spec_.va_block, write, prefetch, cost);
      continue;
    }
    if (resident_bytes_ + run_bytes > capacity_bytes_)
      evict_for(resident_bytes_ + run_bytes - capacity_bytes_, evicted, written_back);
    std::fill(where_.begin() + b0, where_.begin() + b0 + k, Where::Gpu);
    push_resident(b0, static_cast<std::uint32_t>(k));
    resident_bytes_ += run_bytes;
    peak_bytes_ = std::max(peak_bytes_, resident_bytes_);
    faulted += static_cast<std::uint32_t>(k);
    migrated += run_bytes;
    for (std::size_t b = b0; b < b0 + k; ++b) count_working(static_cast<std::uint32_t>(b));
    i = j;
  }
  cost.faulted_blocks += faulted;
  cost.evicted_blocks += evicted;
  cost.migrated_bytes += migrated;
  cost.written_back_bytes += written_back;
}

void ManagedMemory::access(std::uint32_t tensor, std::uint64_t bytes, bool write, AccessCost& cost,
                           std::uint64_t reread, std::uint64_t offset, double reads, bool fresh) {
  const double remote_before = cost.remote_bytes;
  touch_range(tensor, static_cast<double>(offset), static_cast<double>(bytes), write, false, cost);
  const double remote = cost.remote_bytes - remote_before;
  // The vector's own bytes stay a remote read of the kernel; its re-reads, one per output row, come on top.
  add_remote_gemv_input(spec_, static_cast<double>(reread), static_cast<double>(bytes), remote, cost);
  if (reads > 1) cost.remote_reread_bytes += (reads - 1) * remote;
  if (fresh) cost.fresh_touch_seconds += spec_.fresh_first_write_seconds(static_cast<double>(bytes));
}

double ManagedMemory::stall_seconds(const hw::ManagedMemorySpec& spec, const AccessCost& c) {
  double t = 0;
  if (c.faulted_blocks > 0) {
    const double batches = std::ceil(static_cast<double>(c.faulted_blocks) / spec.fault_batch_count);
    // The share of the faults that had to evict, at the rate measured for them (when the profile has it).
    const double evicting = spec.evicting_fault_bandwidth > 0
                                ? std::min(1.0, static_cast<double>(c.evicted_blocks) / c.faulted_blocks) : 0.0;
    t += batches * spec.fault_latency +
         (1 - evicting) * (c.faulted_blocks * spec.fault_block_overhead + c.migrated_bytes / spec.fault_migration_bandwidth);
    if (evicting > 0) t += evicting * c.migrated_bytes / spec.evicting_fault_bandwidth;
  }
  t += c.launch_migrated_bytes / spec.prefetch_to_gpu;
  // Without per-shape times (remote_gemv_seconds), the re-reads at their rate.
  if (c.remote_input_bytes > 0 && spec.remote_gemv.empty()) t += c.remote_input_bytes / spec.gemv_remote_input_bandwidth;
  t += c.mapping_faults * spec.mapping_fault_cost;
  t += c.fresh_touch_seconds;
  t += c.evicted_blocks * spec.evict_block_overhead;
  t += writeback_seconds(spec, c.written_back_bytes);
  return t;
}

double ManagedMemory::prefetch_to_gpu(std::uint32_t tensor, AccessCost& cost) {
  touch_range(tensor, 0, bytes_[tensor], false, true, cost);
  // A prefetch past the GPU's memory evicts as it goes; its write-back overlaps the copy in part, as a fault's does
  // (calib's oversubscribe rows on the H200: prefetching twice what the GPU holds ran at 15.6 GB/s; the copy then the
  // write-back at evict_to_cpu would give 9.1, this overlap 13.2).
  return cost.migrated_bytes / spec_.prefetch_to_gpu + writeback_seconds(spec_, cost.written_back_bytes);
}

void ManagedMemory::record(const AccessCost& c, bool prefetch) {
  gemv_coverage_.add(spec_, c);
  stats_.faulted_blocks += c.faulted_blocks;
  if (c.faulted_blocks > 0)
    stats_.fault_batches += static_cast<std::uint64_t>(std::ceil(static_cast<double>(c.faulted_blocks) / spec_.fault_batch_count));
  stats_.mapping_faults += c.mapping_faults;
  stats_.evicted_blocks += c.evicted_blocks;
  stats_.migrated_bytes += c.migrated_bytes + c.launch_migrated_bytes;
  stats_.written_back_bytes += c.written_back_bytes;
  stats_.remote_bytes += c.remote_bytes + c.remote_input_bytes + c.remote_reread_bytes;  // bytes that crossed the link
  if (prefetch) stats_.prefetched_bytes += c.migrated_bytes;
}

}  // namespace tiersim::managed
