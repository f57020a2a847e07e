#include "policies/placement_rules/tail_first_assignment.hpp"

#include <algorithm>
#include <cctype>
#include <map>

namespace tiersim::policies {

using placement::DeviceId;

bool pinned_to_compute_gpu(const trace::Tensor& t, double model_bytes) {
  std::string lower;
  for (char c : t.name) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  const bool embedding = lower.find("embed") != std::string::npos || lower.find("wte") != std::string::npos ||
                         lower.find("wpe") != std::string::npos;
  return embedding || static_cast<double>(t.bytes) < 1e-4 * model_bytes;
}

std::vector<DeviceId> assign_from_tail(const trace::Header& header, const std::map<DeviceId, double>& quotas) {
  std::vector<DeviceId> homes(header.tensors.size(), placement::kComputeGpu);
  const double model = placement::weight_bytes(header);
  // Device order: GPUs by index (the compute GPU first), then the cpu.
  std::vector<std::pair<DeviceId, double>> remaining;
  for (const auto& [dev, q] : quotas)
    if (dev != placement::kCpu) remaining.emplace_back(dev, q);
  if (quotas.count(placement::kCpu)) remaining.emplace_back(placement::kCpu, quotas.at(placement::kCpu));
  for (auto it = header.tensors.rbegin(); it != header.tensors.rend(); ++it) {
    const trace::Tensor& t = *it;
    if (t.kind != trace::TensorKind::Weight || pinned_to_compute_gpu(t, model)) continue;
    for (auto& [dev, left] : remaining) {
      if (left >= static_cast<double>(t.bytes)) {
        homes[t.id] = dev;
        left -= static_cast<double>(t.bytes);
        break;
      }
    }
  }
  return homes;
}

double default_gpu_weight_budget(const trace::Header& header, const hw::HardwareProfile& hw, int staged_layers) {
  double other = hw.gpu.reserved;
  double largest_layer = 0;
  std::map<std::int32_t, double> per_layer;
  for (const auto& t : header.tensors) {
    if (t.kind == trace::TensorKind::Weight) per_layer[t.layer] += static_cast<double>(t.bytes);
    else other += static_cast<double>(t.bytes);
  }
  for (const auto& [layer, bytes] : per_layer) largest_layer = std::max(largest_layer, bytes);
  const double free_for_weights = hw.gpu.memory - other;
  if (placement::weight_bytes(header) <= free_for_weights) return free_for_weights;
  const double staging = largest_layer * staged_layers;
  return std::max(0.0, free_for_weights - staging);
}

}  // namespace tiersim::policies
