#pragma once
// Turns raw calibration measurements into a hardware profile in the simulator's schema. What calib
// measures replaces the base preset's figure; what it does not measure (host DRAM bandwidth, CPU
// rates, framework host costs) is taken from the base preset and its source says so.
#include <string>
#include <utility>
#include <vector>

#include "fit/raw_csv.hpp"
#include "hardware/profile.hpp"

namespace tiersim::calib {

// time = latency + bytes / bandwidth, least squares weighted by 1/time (relative error), over
// (bytes, seconds) points. Residuals are relative: (fit - measured) / measured.
struct AffineFit {
  double latency = 0;
  double bandwidth = 0;
  double rms_relative = 0;
  double max_relative = 0;
  std::size_t points = 0;
};
AffineFit fit_transfer(const std::vector<std::pair<double, double>>& bytes_seconds);

struct FitOutput {
  std::string yaml;    // the profile
  std::string report;  // markdown: measured vs datasheet, fit residuals
};
// `decoder_passes`: tiersim_calib --only oversubscribe_decoder files (fit/oversubscribe_fit.hpp), optional.
// `advised_cycle`: a tiersim_calib --only advised_cycle file (fit/advised_cycle_fit.hpp), optional.
FitOutput fit_profile(const RawMeasurements& raw, const hw::HardwareProfile& base, const std::string& name,
                      const std::vector<RawMeasurements>& decoder_passes = {},
                      const RawMeasurements* advised_cycle = nullptr);

}  // namespace tiersim::calib
