#include "hardware/profile.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/rate_curve.hpp"

namespace tiersim::hw {

std::pair<double, double> TransferCurve::latency_and_rate(double bytes) const {
  if (points.empty()) return {latency, bandwidth};
  // Measured effective bandwidth already includes the fixed costs at that size. Past the largest measured size:
  // the last measured effective bandwidth. (An affine fit can be far off there: pageable host-to-device copies
  // slow down for large sizes.)
  return {0.0, log_interpolated_rate(points, bytes)};
}

double TransferCurve::seconds(double bytes) const {
  const auto [lat, rate] = latency_and_rate(bytes);
  return lat + bytes / rate;
}

double CpuKernelSpec::at(const std::vector<std::pair<double, double>>& curve, int threads) {
  if (curve.empty()) throw std::logic_error("an empty CPU rate curve");
  const double t = std::max(1, threads);
  if (t <= curve.front().first) return curve.front().second * t / curve.front().first;
  if (t >= curve.back().first) return curve.back().second;
  auto hi = std::lower_bound(curve.begin(), curve.end(), t,
                             [](const std::pair<double, double>& p, double x) { return p.first < x; });
  auto lo = hi - 1;
  const double f = (t - lo->first) / (hi->first - lo->first);
  return lo->second + f * (hi->second - lo->second);
}

double ManagedMemorySpec::gemm_weight_reads(double rows) const {
  if (remote_gemm_reads.empty() || rows < remote_gemm_reads.front().first) return 1.0;
  const auto& [last_rows, last_reads] = remote_gemm_reads.back();
  if (rows > last_rows) return last_reads * rows / last_rows;  // one more read per tile of rows
  return log_interpolated_rate(remote_gemm_reads, rows);
}

double ManagedMemorySpec::remote_gemv_seconds(double input_bytes, double weight_bytes, bool weight_remote) const {
  if (remote_gemv.empty() || !(input_bytes > 0) || !(weight_bytes > 0)) return 0.0;
  // The measured input size nearest in ratio (the first of two equally near).
  double nearest = remote_gemv.front().input_bytes;
  for (const RemoteGemv& r : remote_gemv)
    if (std::abs(std::log(r.input_bytes / input_bytes)) < std::abs(std::log(nearest / input_bytes))) nearest = r.input_bytes;
  std::vector<std::pair<double, double>> by_weight;  // ascending weight bytes (the rows' order)
  for (const RemoteGemv& r : remote_gemv)
    if (r.input_bytes == nearest) by_weight.emplace_back(r.weight_bytes, weight_remote ? r.both_seconds : r.input_seconds);
  double seconds = 0;
  if (weight_bytes <= by_weight.front().first) seconds = by_weight.front().second * weight_bytes / by_weight.front().first;
  else if (weight_bytes >= by_weight.back().first) seconds = by_weight.back().second * weight_bytes / by_weight.back().first;
  else seconds = log_interpolated_rate(by_weight, weight_bytes);
  return seconds * input_bytes / nearest;
}

bool ManagedMemorySpec::remote_gemv_measured(double input_bytes, double weight_bytes) const {
  for (const RemoteGemv& r : remote_gemv)
    if (r.input_bytes == input_bytes && r.weight_bytes == weight_bytes) return true;
  return false;
}

double ManagedMemorySpec::fresh_touch_seconds(double bytes) const {
  if (fresh_touch.empty() || bytes <= 0) return 0.0;
  return bytes / log_interpolated_rate(fresh_touch, bytes);
}

double ManagedMemorySpec::advised_cycle_seconds(bool accessed_by, bool read_mostly, double bytes) const {
  const auto& pts = read_mostly ? advised_cycle.prefer_cpu_read_mostly
                    : accessed_by ? advised_cycle.prefer_cpu_accessed_by
                                  : advised_cycle.prefer_cpu;
  if (pts.empty() || bytes <= 0) return 0.0;
  if (bytes <= pts.front().first) return pts.front().second;
  if (bytes >= pts.back().first) return pts.back().second;
  std::size_t i = 1;
  while (pts[i].first < bytes) ++i;
  const auto& [s0, t0] = pts[i - 1];
  const auto& [s1, t1] = pts[i];
  const double f = std::log(bytes / s0) / std::log(s1 / s0);
  return t0 + f * (t1 - t0);
}

double GpuSpec::convolution_share(const trace::ConvShape& shape, double positions) const {
  const ConvolutionRate* best = nullptr;
  double best_distance = 0;
  for (const ConvolutionRate& c : convolution_efficiency) {
    if (c.shape.two_d() != shape.two_d() || c.shape.kernel[0] != shape.kernel[0] || c.shape.kernel[1] != shape.kernel[1] ||
        c.shape.kernel[2] != shape.kernel[2])
      continue;
    const double d = std::abs(std::log(static_cast<double>(c.shape.in) / shape.in)) +
                     std::abs(std::log(static_cast<double>(c.shape.out) / shape.out));
    if (!best || d < best_distance) best = &c, best_distance = d;  // the first of equals: the profile's order
  }
  return best ? log_interpolated_rate(best->points, positions) : -1.0;
}

double GpuSpec::fp32_gemm_share(double m, double n) const {
  if (fp32_gemm_efficiency.empty()) return -1.0;
  if (fp32_gemm_row_tile <= 0) return log_interpolated_rate(fp32_gemm_efficiency, m * n);
  const double padded = std::ceil(m / fp32_gemm_row_tile) * fp32_gemm_row_tile;
  return log_interpolated_rate(fp32_gemm_efficiency, padded * n) * m / padded;
}

namespace {
double pick_rate(const std::map<std::string, double>& rates, const std::string& dtype) {
  auto it = rates.find(dtype);
  if (it != rates.end()) return it->second;
  it = rates.find("bf16");
  if (it != rates.end()) return it->second;
  if (rates.empty()) throw std::logic_error("no compute rates in profile");
  return rates.begin()->second;
}
}  // namespace

double HardwareProfile::gpu_rate(const std::string& dtype) const { return pick_rate(gpu.compute, dtype); }
double HardwareProfile::host_rate(const std::string& dtype) const { return pick_rate(host.compute, dtype); }

}  // namespace tiersim::hw
