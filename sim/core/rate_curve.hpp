#pragma once
// A rate measured at a few sizes, read at any size: what a copy's transfer curve (hardware/profile.hpp TransferCurve)
// and a kernel's rate by row length (runtime/runtime_profile.hpp GemvRowKernel) share.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace tiersim {

// The rate at `size` of (size, rate) points with ascending sizes, not empty: log-log interpolated between the points,
// the first point's rate below them and the last point's beyond them.
inline double log_interpolated_rate(const std::vector<std::pair<double, double>>& points, double size) {
  if (size <= points.front().first) return points.front().second;
  if (size >= points.back().first) return points.back().second;
  auto hi = std::lower_bound(points.begin(), points.end(), size,
                             [](const std::pair<double, double>& p, double s) { return p.first < s; });
  auto lo = hi - 1;
  const double t = (std::log(size) - std::log(lo->first)) / (std::log(hi->first) - std::log(lo->first));
  return std::exp(std::log(lo->second) + t * (std::log(hi->second) - std::log(lo->second)));
}

}  // namespace tiersim
