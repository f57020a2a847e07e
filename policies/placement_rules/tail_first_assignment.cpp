#include "policies/placement_rules/tail_first_assignment.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <string>

namespace tiersim::policies {

using placement::DeviceId;

bool is_embedding(const trace::Tensor& t) {
  std::string lower;
  for (char c : t.name) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  for (const char* key : {"embed", "wte", "wpe", "token_embedding", "position_embedding"})
    if (lower.find(key) != std::string::npos) return true;
  return false;
}

double text_encoder_head_bytes(const trace::Header& header, DisTorchBlocks blocks) {
  if (!blocks.text_encoder) return 0;
  double bytes = 0;
  for (const auto& t : header.tensors)
    if (t.kind == trace::TensorKind::Weight && is_embedding(t)) bytes += static_cast<double>(t.bytes);
  return bytes;
}

std::vector<DeviceId> assign_from_tail(const trace::Header& header, const std::map<DeviceId, double>& quotas,
                                       DisTorchBlocks blocks) {
  std::vector<DeviceId> homes(header.tensors.size(), placement::kComputeGpu);
  const double model = placement::weight_bytes(header);
  // DisTorch's device order: sorted by (is cpu, name), so "cuda:10" comes before "cuda:2".
  std::vector<std::pair<DeviceId, double>> remaining(quotas.begin(), quotas.end());
  std::sort(remaining.begin(), remaining.end(), [](const auto& a, const auto& b) {
    return std::make_pair(a.first == placement::kCpu, placement::device_name(a.first)) <
           std::make_pair(b.first == placement::kCpu, placement::device_name(b.first));
  });
  for (auto it = header.tensors.rbegin(); it != header.tensors.rend(); ++it) {
    const trace::Tensor& t = *it;
    if (t.kind != trace::TensorKind::Weight) continue;
    const bool tiny = static_cast<double>(t.bytes) < 1e-4 * model;
    if (tiny || (blocks.text_encoder && is_embedding(t))) continue;  // the compute device
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

}  // namespace tiersim::policies
