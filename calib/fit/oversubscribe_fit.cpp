#include "fit/oversubscribe_fit.hpp"

#include <algorithm>
#include <cmath>
#include <charconv>
#include <vector>

#include "core/error.hpp"

#include "fit/stats.hpp"

namespace tiersim::calib {

namespace {

// Seconds per byte of every steady pass (the second on) of `variant` at a ratio above 1. Variants are
// VARIANT_rX.XX_pN (bench_oversubscribe.cu).
std::vector<double> steady_seconds_per_byte(const RawMeasurements& raw, const std::string& variant) {
  std::vector<double> out;
  for (const RawRow* r : raw.find("um_oversub_pass", variant + "_r")) {
    const std::string rest = r->variant.substr(variant.size() + 2);  // "1.25_p3"
    const auto p = rest.find("_p");
    double ratio = 0;
    int pass = 0;
    const char* end = rest.data() + rest.size();
    const bool parsed = p != std::string::npos &&
                        std::from_chars(rest.data(), rest.data() + p, ratio).ptr == rest.data() + p &&
                        std::from_chars(rest.data() + p + 2, end, pass).ptr == end;
    if (!parsed)
      throw InputError(raw.file, 0, "um_oversub_pass", "variant '" + r->variant + "' is not " + variant + "_rRATIO_pPASS");
    if (r->work <= 0 || r->median <= 0) continue;
    if (ratio > 1.0 && pass >= 2) out.push_back(r->median / r->work);
  }
  return out;
}

}  // namespace

OversubscribeFit fit_oversubscription(const RawMeasurements& raw, const hw::ManagedMemorySpec& um) {
  OversubscribeFit f;
  const auto plain = steady_seconds_per_byte(raw, "plain");
  const auto rm = steady_seconds_per_byte(raw, "read_mostly");
  if (plain.empty() || rm.empty()) {
    f.why_not = "no steady um_oversub_pass rows (plain and read_mostly, ratio above 1, second pass on)";
    return f;
  }
  if (!(um.fault_migration_bandwidth > 0) || !(um.va_block > 0) || um.fault_batch_count < 1) {
    f.why_not = "the profile has no fault costs to take the fault path from";
    return f;
  }
  const double plain_t = median(plain), rm_t = median(rm);
  const double blocks = kOversubscribeChunk / um.va_block;
  const double chunk_s = std::ceil(blocks / um.fault_batch_count) * um.fault_latency + blocks * um.fault_block_overhead +
                         kOversubscribeChunk / um.fault_migration_bandwidth;
  const double base_t = chunk_s / kOversubscribeChunk;
  f.plain_rate = 1 / plain_t, f.read_mostly_rate = 1 / rm_t, f.fault_path_rate = 1 / base_t;
  f.passes = static_cast<int>(plain.size() + rm.size());
  if (!(plain_t > rm_t)) {
    f.why_not = "plain passes are not slower than ReadMostly ones: no write-back cost to fit";
    return f;
  }
  f.evict_writeback_bandwidth = 1 / (plain_t - rm_t);
  f.evict_block_overhead = std::max(0.0, (rm_t - base_t) * um.va_block);
  f.fitted = true;
  return f;
}

}  // namespace tiersim::calib
