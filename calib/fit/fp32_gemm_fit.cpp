#include "fit/fp32_gemm_fit.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "fit/stats.hpp"
#include "hardware/profile.hpp"

namespace tiersim::calib {

namespace {

// The curve of one tile: the rows at its multiples, by octave of output elements.
std::vector<std::pair<double, double>> curve_for(const std::vector<Fp32GemmRow>& rows, double tile) {
  std::map<int, std::pair<std::vector<double>, std::vector<double>>> octaves;  // log2 -> (log outputs, shares)
  for (const Fp32GemmRow& r : rows) {
    if (std::fmod(r.rows, tile) != 0) continue;
    const double outputs = r.rows * r.features;
    auto& o = octaves[static_cast<int>(std::floor(std::log2(outputs)))];
    o.first.push_back(std::log(outputs));
    o.second.push_back(r.share);
  }
  std::vector<std::pair<double, double>> curve;
  for (const auto& [octave, o] : octaves) {
    double mean = 0;
    for (double l : o.first) mean += l / static_cast<double>(o.first.size());
    curve.emplace_back(std::round(std::exp(mean)), std::clamp(median(o.second), 0.01, 1.0));
  }
  return curve;
}

}  // namespace

Fp32GemmFit fit_fp32_gemm(const std::vector<Fp32GemmRow>& rows) {
  Fp32GemmFit best;
  if (std::none_of(rows.begin(), rows.end(), [](const Fp32GemmRow& r) { return r.rows < 512; })) return best;
  for (double tile : {16.0, 32.0, 64.0, 128.0}) {
    hw::GpuSpec gpu;
    gpu.fp32_gemm_efficiency = curve_for(rows, tile);
    gpu.fp32_gemm_row_tile = tile;
    if (gpu.fp32_gemm_efficiency.empty()) continue;
    double sum = 0, worst = 0;
    for (const Fp32GemmRow& r : rows) {
      const double e = gpu.fp32_gemm_share(r.rows, r.features) / r.share - 1;
      sum += std::abs(e);
      if (std::abs(e) > std::abs(worst)) worst = e;
    }
    const double mean = sum / static_cast<double>(rows.size());
    if (best.tile == 0 || mean < best.mean_error) best = {tile, gpu.fp32_gemm_efficiency, mean, worst};
  }
  return best;
}

}  // namespace tiersim::calib
