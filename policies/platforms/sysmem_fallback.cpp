#include "policies/platforms/sysmem_fallback.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/units.hpp"

namespace tiersim::strategy {

void spill_to_system_memory(const trace::Header& header, const hw::HardwareProfile& hw, placement::Placement& p,
                            Resolved& resolved) {
  placement::place_kv_and_activations(header, p);
  const double free_vram = hw.gpu.memory - hw.gpu.reserved - placement::staging_bound(header, p);
  // Whole 2 MiB blocks (the unit the driver model tracks) of the activation workspace's start stay in
  // VRAM, so that both engines agree on it.
  const double block = hw.managed_memory ? hw.managed_memory->va_block : 2.0 * 1048576;
  double used = 0;
  placement::DeviceUsage spilled;
  std::size_t count = 0;
  for (const trace::TensorKind kind :
       {trace::TensorKind::Weight, trace::TensorKind::KvCache, trace::TensorKind::Activation}) {
    for (const auto& t : header.tensors) {
      if (t.kind != kind || p.device[t.id] != placement::kComputeGpu || p.path[t.id] != placement::Path::Local) continue;
      const double bytes = static_cast<double>(t.bytes);
      if (used + bytes <= free_vram) {
        used += bytes;
        continue;
      }
      // The activation workspace is many allocations in a run: those made while VRAM had room stay
      // there (its start, where a step's first and, in decode, only activations are), the rest fall back.
      const double prefix =
          kind == trace::TensorKind::Activation ? std::floor(std::max(0.0, free_vram - used) / block) * block : 0.0;
      if (!p.managed.enabled) {
        p.managed.enabled = true;
        p.managed.managed.assign(header.tensors.size(), false);
        p.managed.advice.assign(header.tensors.size(), placement::kAdviseNone);
      }
      p.managed.managed[t.id] = true;
      p.managed.advice[t.id] = placement::kPreferCpu | placement::kAccessedByGpu | placement::kSysmemFallback;
      p.path[t.id] = placement::Path::Managed;
      p.device[t.id] = placement::kCpu;
      if (prefix > 0) {
        if (p.managed.vram_prefix.empty()) p.managed.vram_prefix.assign(header.tensors.size(), 0.0);
        p.managed.vram_prefix[t.id] = prefix;
        used += prefix;
      }
      (kind == trace::TensorKind::Weight ? spilled.weights : kind == trace::TensorKind::KvCache ? spilled.kv : spilled.activations) += bytes - prefix;
      ++count;
    }
  }
  if (count == 0) return;
  resolved.emplace_back("sysmem fallback",
                        std::to_string(count) + " allocation(s), " + units::format_bytes(spilled.total()) +
                            " in shared system memory (weights " + units::format_bytes(spilled.weights) + ", KV cache " +
                            units::format_bytes(spilled.kv) + ", activations " + units::format_bytes(spilled.activations) +
                            "), read over the link by every kernel that uses them");
}

}  // namespace tiersim::strategy
