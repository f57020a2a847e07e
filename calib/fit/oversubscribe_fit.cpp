#include "fit/oversubscribe_fit.hpp"

#include <algorithm>
#include <cmath>
#include <charconv>
#include <vector>

#include "core/error.hpp"

#include "fit/stats.hpp"

namespace tiersim::calib {

namespace {

// Whether the pass row PREFIX + "RATIO_pPASS" (bench_oversubscribe.cu) is a steady one: past the GPU's memory (a
// ratio above 1), the second pass on. A variant that does not parse is an InputError naming the file.
bool steady_pass(const RawMeasurements& raw, const RawRow& r, const std::string& prefix) {
  const std::string rest = r.variant.substr(prefix.size());  // "1.25_p3"
  const auto p = rest.find("_p");
  double ratio = 0;
  int pass = 0;
  const char* end = rest.data() + rest.size();
  const bool parsed = p != std::string::npos && std::from_chars(rest.data(), rest.data() + p, ratio).ptr == rest.data() + p &&
                      std::from_chars(rest.data() + p + 2, end, pass).ptr == end;
  if (!parsed)
    throw InputError(raw.file, 0, r.benchmark, "variant '" + r.variant + "' is not " + prefix + "RATIO_pPASS");
  return ratio > 1.0 && pass >= 2;
}

// Seconds per byte of every steady pass of `variant` (VARIANT_rX.XX_pN).
std::vector<double> steady_seconds_per_byte(const RawMeasurements& raw, const std::string& variant) {
  std::vector<double> out;
  for (const RawRow* r : raw.find("um_oversub_pass", variant + "_r"))
    if (steady_pass(raw, *r, variant + "_r") && r->work > 0 && r->median > 0) out.push_back(r->median / r->work);
  return out;
}

// A decoder file's layer (its `oversubscribe_decoder_layer` line): its bytes, and its fault batches, one kernel per
// weight.
struct DecoderLayer {
  double bytes = 0, batches = 0;
};

DecoderLayer decoder_layer(const RawMeasurements& d, const hw::ManagedMemorySpec& um) {
  const std::string layer = d.fact("oversubscribe_decoder_layer");
  if (layer.empty()) throw InputError(d.file, 0, "oversubscribe_decoder_layer", "no layer line (the weights' shapes)");
  DecoderLayer l;
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
    l.bytes += bytes;
    l.batches += std::ceil(std::ceil(bytes / um.va_block) / um.fault_batch_count);
    at = end + 1;
  }
  return l;
}

// A decoder file's steady GEMV passes of `advice` (plain or read_mostly): seconds per byte less the batches' latency.
std::vector<double> decoder_seconds_per_byte(const RawMeasurements& d, const DecoderLayer& layer,
                                             const std::string& advice, const hw::ManagedMemorySpec& um) {
  std::vector<double> out;
  for (const RawRow* r : d.find("um_oversub_decoder", advice + "_gemv_r")) {
    if (!steady_pass(d, *r, advice + "_gemv_r") || !(r->work > 0 && r->median > 0)) continue;
    const double layers = std::round(r->work / layer.bytes);
    if (!(layers >= 1) || std::abs(layers * layer.bytes - r->work) > 0.5)
      throw InputError(d.file, 0, "um_oversub_decoder," + r->variant, "its bytes are not a whole number of layers");
    out.push_back((r->median - layers * layer.batches * um.fault_latency) / r->work);
  }
  return out;
}

OversubscribeFit fit_decoder_passes(const std::vector<RawMeasurements>& files, const hw::ManagedMemorySpec& um) {
  OversubscribeFit f;
  std::vector<double> plain, rm;
  for (const RawMeasurements& d : files) {
    const DecoderLayer layer = decoder_layer(d, um);
    for (double v : decoder_seconds_per_byte(d, layer, "plain", um)) plain.push_back(v);
    for (double v : decoder_seconds_per_byte(d, layer, "read_mostly", um)) rm.push_back(v);
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
