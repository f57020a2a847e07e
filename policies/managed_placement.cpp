#include "policies/managed_placement.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/units.hpp"

namespace tiersim::policies {

placement::Placement managed_placement(const trace::Header& header, const hw::HardwareProfile& hw,
                                       const PolicyOptions& options, std::uint8_t weight_advice, bool prefetch,
                                       const std::string& policy) {
  reject_unread_options(options, policy, {.split = false, .layers = false, .offload = false, .donor = false, .managed = true});
  if (!hw.managed_memory)
    throw InputError(hw.origin, 0, "managed_memory",
                     "policy '" + policy + "' needs the profile's managed_memory section (see calib/profiles/SCHEMA.md)");
  if (options.exec.exec != placement::OffloadExec::Copy)
    throw InputError("", 0, "--offload-exec", "policy '" + policy + "' keeps weights in managed memory; CPU execution is not modelled with it");
  if (!prefetch && options.exec.prefetch > 0)
    throw InputError("", 0, "--prefetch", "policy '" + policy + "' does not prefetch; use um-prefetch");
  const std::string allocator = options.allocator.value_or("caching");
  if (allocator != "caching" && allocator != "per-tensor")
    throw InputError("", 0, "--allocator", "must be 'caching' or 'per-tensor', not '" + allocator + "'");
  const std::string scope = options.um_scope.value_or("all");
  if (scope != "all" && scope != "weights")
    throw InputError("", 0, "--um-scope", "must be 'all' or 'weights', not '" + scope + "'");

  placement::Placement p;
  p.device.assign(header.tensors.size(), placement::kComputeGpu);
  p.managed.enabled = true;
  p.managed.managed.assign(header.tensors.size(), false);
  p.managed.advice.assign(header.tensors.size(), placement::kAdviseNone);
  p.managed.caching_allocator = allocator == "caching";
  // um-prefetch without --prefetch prefetches one layer ahead (reported in the resolved settings).
  p.managed.prefetch = prefetch ? std::max(1, options.exec.prefetch) : 0;
  for (const auto& t : header.tensors) {
    const bool weight = t.kind == trace::TensorKind::Weight;
    if (!weight && scope == "weights") continue;
    p.managed.managed[t.id] = true;
    p.device[t.id] = placement::kCpu;  // home: host pages, until the driver migrates them
    if (weight) p.managed.advice[t.id] = weight_advice;
  }
  p.resolved.emplace_back("managed", std::string(scope == "all" ? "weights, KV cache, activations" : "weights") +
                                         ", " + (allocator == "caching" ? "caching allocator" : "cudaMallocManaged per tensor"));
  if (prefetch) p.resolved.emplace_back("managed prefetch", std::to_string(p.managed.prefetch) + " layer(s) ahead");
  finalize(header, hw, p, policy);
  const double capacity = placement::managed_gpu_capacity(header, hw, p);
  if (capacity < hw.managed_memory->va_block)
    throw CapacityError("policy '" + policy + "' leaves no GPU memory for managed blocks on '" + hw.name + "'");
  const double footprint = placement::managed_usage(header, p).total();
  p.resolved.emplace_back("managed footprint", units::format_bytes(footprint) + " for " + units::format_bytes(capacity) +
                                                   " of GPU memory" + (footprint > capacity ? " (oversubscribed)" : ""));
  return p;
}

}  // namespace tiersim::policies
