#include "cli/allocator_replay.hpp"

#include <algorithm>
#include <unordered_map>

#include "core/error.hpp"
#include "memory/caching_allocator.hpp"

namespace tiersim::app {

PhasePeak AllocatorReplay::peak(const std::string& phase, std::uint32_t from_step) const {
  PhasePeak out;
  out.phase = phase;
  for (const PhasePeak& p : phases)
    if (p.step >= from_step && (phase.empty() || p.phase == phase)) {
      out.allocated = std::max(out.allocated, p.allocated);
      out.reserved = std::max(out.reserved, p.reserved);
      out.step = std::max(out.step, p.step);
    }
  return out;
}

void check_alloc_conf(const std::string& alloc_conf, const std::string& flag) {
  try {
    (void)memory::parse_alloc_conf(alloc_conf);
  } catch (const std::invalid_argument& e) {
    throw InputError("", 0, flag, e.what());
  }
}

AllocatorReplay replay_allocations(const std::vector<model::AllocationEvent>& events, double capacity_bytes,
                                   double total_memory_bytes, const std::string& alloc_conf, const std::string& flag) {
  memory::CachingAllocator::Config config;
  try {
    config = memory::parse_alloc_conf(alloc_conf);
  } catch (const std::invalid_argument& e) {
    throw InputError("", 0, flag, e.what());
  }
  // At 2^64 bytes or more (infinity: no limit) the device never refuses a segment.
  config.capacity = capacity_bytes >= 18446744073709551615.0 ? memory::kUnlimited
                                                              : static_cast<std::uint64_t>(std::max(0.0, capacity_bytes));
  config.total_memory = static_cast<std::uint64_t>(std::max(0.0, total_memory_bytes));
  memory::CachingAllocator allocator(config);
  // The side stream a FreeAfterUse's tensor was last used on (torchao's CPUOffloadOptimizer has one; the model
  // keeps every allocation on the default stream, 0).
  constexpr memory::StreamId kSideStream = 1;
  std::unordered_map<std::uint64_t, memory::AllocationId> live, held;
  AllocatorReplay r;
  auto close = [&] {
    if (r.phases.empty()) return;
    r.phases.back().allocated = static_cast<double>(allocator.peak_allocated());
    r.phases.back().reserved = static_cast<double>(allocator.peak_reserved());
  };
  for (const model::AllocationEvent& e : events) {
    if (r.phases.empty() || r.phases.back().step != e.step || r.phases.back().phase != e.phase) {
      close();
      allocator.reset_peaks();
      r.phases.push_back({e.step, e.phase, 0, 0});
    }
    switch (e.kind) {
      case model::AllocationEvent::Kind::Allocate:
        break;
      case model::AllocationEvent::Kind::Free:
        allocator.free(live.at(e.tensor));
        live.erase(e.tensor);
        continue;
      case model::AllocationEvent::Kind::FreeAfterUse:
        allocator.free_after_use(live.at(e.tensor), kSideStream);
        held.emplace(e.tensor, live.at(e.tensor));
        live.erase(e.tensor);
        continue;
      case model::AllocationEvent::Kind::UseEnd:
        allocator.end_use(held.at(e.tensor));
        held.erase(e.tensor);
        continue;
    }
    const memory::AllocResult a = allocator.allocate(e.bytes);
    if (!a.ok()) {
      close();
      r.oom = report::AllocationFailure{e.step, e.phase, e.what, static_cast<double>(a.oom->requested),
                                        static_cast<double>(a.oom->reserved), static_cast<double>(a.oom->allocated)};
      return r;
    }
    live[e.tensor] = *a.id;
  }
  close();
  return r;
}

}  // namespace tiersim::app
