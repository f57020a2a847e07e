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

// A decoder file's steady GEMV passes of `advice` (plain or read_mostly): seconds per byte less the batches' latency.
std::vector<double> decoder_seconds_per_byte(const RawMeasurements& d, const std::string& advice,
                                             const hw::ManagedMemorySpec& um) {
  const std::string layer = d.fact("oversubscribe_decoder_layer");
  if (layer.empty()) throw InputError(d.file, 0, "oversubscribe_decoder_layer", "no layer line (the weights' shapes)");
  double layer_bytes = 0, layer_batches = 0;
  std::size_t at = 0;
  while (at < layer.size()) {
    std::size_t end = layer.find(' ', at);
    if (end == std::string::npos) end = layer.size();
    const std::string shape = layer.substr(at, end - at);
    const auto x = shape.find('x');
    double out = 0, in = 0;
    if (x == std::string::npos ||
        std::from_chars(shape.data(), shape.data() + x, out).ptr != shape.data() + x ||
        std::from_chars(shape.data() + x + 1, shape.data() + shape.size(), in).ptr != shape.data() + shape.size() ||
        !(out > 0 && in > 0))
      throw InputError(d.file, 0, "oversubscribe_decoder_layer", "'" + shape + "' is not OUTxIN");
    const double bytes = out * in * 2;
    layer_bytes += bytes;
    layer_batches += std::ceil(std::ceil(bytes / um.va_block) / um.fault_batch_count);
    at = end + 1;
  }
  std::vector<double> out;
  for (const RawRow* r : d.find("um_oversub_decoder", advice + "_gemv_r")) {
    const std::string rest = r->variant.substr(advice.size() + 7);  // "1.50_p3"
    const auto p = rest.find("_p");
    double ratio = 0;
    int pass = 0;
    const char* end = rest.data() + rest.size();
    if (p == std::string::npos || std::from_chars(rest.data(), rest.data() + p, ratio).ptr != rest.data() + p ||
        std::from_chars(rest.data() + p + 2, end, pass).ptr != end)
      throw InputError(d.file, 0, "um_oversub_decoder", "variant '" + r->variant + "' is not " + advice + "_gemv_rRATIO_pPASS");
    if (!(ratio > 1.0 && pass >= 2) || !(r->work > 0 && r->median > 0)) continue;
    const double layers = std::round(r->work / layer_bytes);
    if (!(layers >= 1) || std::abs(layers * layer_bytes - r->work) > 0.5)
      throw InputError(d.file, 0, "um_oversub_decoder," + r->variant, "its bytes are not a whole number of layers");
    out.push_back((r->median - layers * layer_batches * um.fault_latency) / r->work);
  }
  return out;
}

OversubscribeFit fit_decoder_passes(const std::vector<RawMeasurements>& files, const hw::ManagedMemorySpec& um) {
  OversubscribeFit f;
  std::vector<double> plain, rm;
  for (const RawMeasurements& d : files) {
    for (double v : decoder_seconds_per_byte(d, "plain", um)) plain.push_back(v);
    for (double v : decoder_seconds_per_byte(d, "read_mostly", um)) rm.push_back(v);
  }
  if (plain.empty() || rm.empty()) {
    f.why_not = "no steady um_oversub_decoder GEMV passes (plain and read_mostly, ratio above 1, second pass on)";
    return f;
  }
  const double plain_t = median(plain), rm_t = median(rm);
  f.plain_rate = 1 / plain_t, f.read_mostly_rate = 1 / rm_t, f.evicting_fault_bandwidth = 1 / rm_t;
  f.passes = static_cast<int>(plain.size() + rm.size());
  if (!(plain_t > rm_t)) {
    f.why_not = "plain decoder passes are not slower than ReadMostly ones: no write-back cost to fit";
    return f;
  }
  f.evict_writeback_bandwidth = 1 / (plain_t - rm_t);
  f.fitted = true;
  return f;
}

}  // namespace

OversubscribeFit fit_oversubscription(const RawMeasurements& raw, const hw::ManagedMemorySpec& um,
                                      const std::vector<RawMeasurements>& decoder_passes) {
  if (!(um.va_block > 0) || um.fault_batch_count < 1) {
    OversubscribeFit f;
    f.why_not = "the profile has no fault costs to take the fault path from";
    return f;
  }
  if (!decoder_passes.empty()) return fit_decoder_passes(decoder_passes, um);
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
