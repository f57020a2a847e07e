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
  capacity_blocks_ = static_cast<std::size_t>(std::max(0.0, std::floor(gpu_capacity / spec.va_block)));
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
    if (blocks_.size() < last) blocks_.resize(last);
    for (std::size_t b = static_cast<std::size_t>(first); b < last; ++b) {
      blocks_[b].advice |= placement.managed.advice[t.id];
      if (blocks_[b].advice & placement::kAccessedByGpu) blocks_[b].mapped = true;
    }
    // A sysmem-fallback tensor's VRAM-resident start: device memory, never migrated or evicted (no
    // FIFO entry, not counted as managed residency); its accesses are local.
    const double prefix = placement::vram_prefix_of(placement, t.id);
    for (std::size_t b = static_cast<std::size_t>(first); prefix > 0 && b < last; ++b)
      if ((static_cast<double>(b + 1) * spec.va_block) - (static_cast<double>(first) * spec.va_block + offset_in_block_[t.id]) <= prefix)
        blocks_[b].where = Where::Gpu;
  }
  if (blocks_.size() > UINT32_MAX) throw std::length_error("managed footprint too large");
  fifo_.assign(std::max<std::size_t>(blocks_.size(), 1), 0);
}

void ManagedMemory::become_resident(std::uint32_t b, Where where) {
  blocks_[b].where = where;
  std::size_t tail = fifo_head_ + fifo_size_;
  if (tail >= fifo_.size()) tail -= fifo_.size();
  fifo_[tail] = b;
  ++fifo_size_;
  ++resident_blocks_;
  peak_blocks_ = std::max(peak_blocks_, resident_blocks_);
}

void ManagedMemory::make_room(AccessCost& cost) {
  while (resident_blocks_ >= capacity_blocks_ && fifo_size_ > 0) {
    const std::uint32_t b = fifo_[fifo_head_];
    if (++fifo_head_ == fifo_.size()) fifo_head_ = 0;
    --fifo_size_;
    Block& v = blocks_[b];
    if (v.where == Where::Gpu) cost.written_back_bytes += spec_.va_block;  // the only copy: write it back
    v.where = Where::Host;
    // With AccessedBy the GPU maps the host copy instead of faulting it back later.
    v.mapped = (v.advice & placement::kAccessedByGpu) != 0;
    --resident_blocks_;
    ++cost.evicted_blocks;
  }
  if (capacity_blocks_ == 0) throw std::runtime_error("no GPU memory left for managed memory");
}

void ManagedMemory::touch_block(std::uint32_t b, double touched, bool write, bool prefetch, AccessCost& cost) {
  Block& blk = blocks_[b];
  const bool prefer_cpu = (blk.advice & placement::kPreferCpu) != 0;
  if (blk.where != Where::Host) {
    // On the GPU already. A write to a read-only duplicate invalidates the host copy.
    if (write && blk.where == Where::Both) blk.where = Where::Gpu;
    return;
  }
  // Host-resident. PreferredLocation=CPU (unless explicitly prefetched) and mapped AccessedBy blocks
  // are accessed where they are.
  if (!prefetch && (prefer_cpu || blk.mapped)) {
    if (!blk.mapped) {
      blk.mapped = true;
      ++cost.mapping_faults;
    }
    cost.remote_bytes += touched;
    return;
  }
  make_room(cost);
  if (!demand_paging_ && !prefetch) {
    // Migrated whole with the launch of the kernel that uses it (Windows/WSL2); read duplication does
    // not occur without concurrentManagedAccess (cudaMemAdvise, CUDA runtime API).
    cost.launch_migrated_bytes += spec_.va_block;
    become_resident(b, Where::Gpu);
    return;
  }
  const bool read_mostly = (blk.advice & placement::kReadMostly) != 0 && !write;
  // The density prefetcher moves the whole block once more than the threshold of it is touched.
  double moved = spec_.va_block;
  if (!prefetch && touched < spec_.prefetch_threshold * spec_.va_block)
    moved = std::max(spec_.big_page, std::ceil(touched / spec_.big_page) * spec_.big_page);
  cost.migrated_bytes += moved;
  if (read_mostly) cost.duplicated_bytes += moved;
  if (!prefetch) ++cost.faulted_blocks;
  become_resident(b, read_mostly ? Where::Both : Where::Gpu);
}

void ManagedMemory::touch_range(std::uint32_t tensor, double bytes, bool write, bool prefetch, AccessCost& cost) {
  const std::int64_t first = first_block_[tensor];
  if (first < 0 || bytes <= 0) return;
  const double start = offset_in_block_[tensor];
  const double end = start + bytes;
  const auto n = static_cast<std::int64_t>(std::ceil(end / spec_.va_block));
  // What an oversubscribed run does to nearly every block, in a tight loop: a host-resident block without advice,
  // touched past the prefetch threshold, faulted in whole under demand paging, after evicting the oldest resident
  // blocks if the GPU is full. touch_block does the same (and everything else) one call at a time. The counts
  // are added once at the end: byte totals are whole multiples of the block, exact in a double in any order.
  const double whole = spec_.prefetch_threshold * spec_.va_block;
  const bool fast = demand_paging_ && !prefetch;
  std::uint32_t faulted = 0, evicted = 0, written_back = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double lo = std::max(start, static_cast<double>(i) * spec_.va_block);
    const double hi = std::min(end, static_cast<double>(i + 1) * spec_.va_block);
    const auto b = static_cast<std::uint32_t>(first + i);
    Block& blk = blocks_[b];
    if (fast && blk.where == Where::Host && blk.advice == 0 && hi - lo >= whole) {
      while (resident_blocks_ >= capacity_blocks_ && fifo_size_ > 0) {  // make_room
        const std::uint32_t old = fifo_[fifo_head_];
        if (++fifo_head_ == fifo_.size()) fifo_head_ = 0;
        --fifo_size_;
        Block& v = blocks_[old];
        if (v.where == Where::Gpu) ++written_back;
        v.where = Where::Host;
        v.mapped = (v.advice & placement::kAccessedByGpu) != 0;
        --resident_blocks_;
        ++evicted;
      }
      if (capacity_blocks_ == 0) throw std::runtime_error("no GPU memory left for managed memory");
      become_resident(b, Where::Gpu);
      ++faulted;
      continue;
    }
    touch_block(b, hi - lo, write, prefetch, cost);
  }
  cost.faulted_blocks += faulted;
  cost.evicted_blocks += evicted;
  cost.migrated_bytes += static_cast<double>(faulted) * spec_.va_block;
  cost.written_back_bytes += static_cast<double>(written_back) * spec_.va_block;
}

void ManagedMemory::access(std::uint32_t tensor, std::uint64_t bytes, bool write, AccessCost& cost,
                           std::uint64_t reread) {
  const double remote_before = cost.remote_bytes;
  touch_range(tensor, static_cast<double>(bytes), write, false, cost);
  const double remote = cost.remote_bytes - remote_before;
  // The vector's own bytes stay a remote read of the kernel; its re-reads, one per output row, come on top.
  if (reread > 0 && remote > 0 && spec_.gemv_remote_input_bandwidth > 0 && bytes > 0)
    cost.remote_input_bytes += static_cast<double>(reread) * remote / static_cast<double>(bytes);
}

double ManagedMemory::stall_seconds(const hw::ManagedMemorySpec& spec, const AccessCost& c) {
  double t = 0;
  if (c.faulted_blocks > 0) {
    const double batches = std::ceil(static_cast<double>(c.faulted_blocks) / spec.fault_batch_count);
    t += batches * spec.fault_latency + c.faulted_blocks * spec.fault_block_overhead +
         c.migrated_bytes / spec.fault_migration_bandwidth;
  }
  t += c.launch_migrated_bytes / spec.prefetch_to_gpu;
  if (c.remote_input_bytes > 0) t += c.remote_input_bytes / spec.gemv_remote_input_bandwidth;
  t += c.mapping_faults * spec.mapping_fault_cost;
  t += c.written_back_bytes / spec.evict_to_cpu;
  return t;
}

double ManagedMemory::prefetch_to_gpu(std::uint32_t tensor, AccessCost& cost) {
  touch_range(tensor, bytes_[tensor], false, true, cost);
  return cost.migrated_bytes / spec_.prefetch_to_gpu + cost.written_back_bytes / spec_.evict_to_cpu;
}

void ManagedMemory::record(const AccessCost& c, bool prefetch) {
  stats_.faulted_blocks += c.faulted_blocks;
  if (c.faulted_blocks > 0)
    stats_.fault_batches += static_cast<std::uint64_t>(std::ceil(static_cast<double>(c.faulted_blocks) / spec_.fault_batch_count));
  stats_.mapping_faults += c.mapping_faults;
  stats_.evicted_blocks += c.evicted_blocks;
  stats_.migrated_bytes += c.migrated_bytes + c.launch_migrated_bytes;
  stats_.written_back_bytes += c.written_back_bytes;
  stats_.remote_bytes += c.remote_bytes + c.remote_input_bytes;  // bytes that crossed the link
  if (prefetch) stats_.prefetched_bytes += c.migrated_bytes;
}

}  // namespace tiersim::managed
