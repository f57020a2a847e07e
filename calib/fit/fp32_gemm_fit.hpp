#pragma once
// cuBLAS fp32 GEMMs without TF32 (tiersim_calib --only fp32_gemm) as the profile's gpu.fp32_gemm_efficiency and
// fp32_gemm_row_tile: a product's rows are computed in whole tiles, so between the tile's multiples its rate falls by
// the padding (M = 80 runs at 80/128 of M = 128's). The fit tries tiles of 16 to 128 rows: for each, the curve is the
// share of the best rate by output elements (M x N) of the rows at whole tiles, the median of each octave of output
// elements (at the octave's mean), and the tile kept is the one whose model (hw::GpuSpec::fp32_gemm_share) is
// nearest every measured row.
#include <utility>
#include <vector>

namespace tiersim::calib {

struct Fp32GemmRow {
  double rows = 0, features = 0;  // M, N
  double share = 0;               // the rate over the best fp32 GEMM
};

struct Fp32GemmFit {
  double tile = 0;                                // 0: no fit (no rows below 512)
  std::vector<std::pair<double, double>> curve;  // (output elements, share), ascending
  double mean_error = 0;                          // the model's mean |relative error| over every row
  double worst_error = 0;                         // and its largest (signed)
};

// Empty (tile 0) unless some row has fewer than 512 rows: runs of M 512 and 2048 alone measure no padding.
Fp32GemmFit fit_fp32_gemm(const std::vector<Fp32GemmRow>& rows);

}  // namespace tiersim::calib
