#include "policies/placement_rules/split_string.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <stdexcept>

#include "core/error.hpp"
#include "core/units.hpp"

namespace tiersim::policies {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

[[noreturn]] void bad(const std::string& msg) { throw InputError("", 0, "--split", msg); }

double parse_plain_number(std::string_view s, const std::string& entry) {
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v))
    bad("entry '" + entry + "': '" + std::string(s) + "' is not a number");
  return v;
}

// A size in a bytes split: tiersim's units where they are written as such (GiB, MiB, KiB, TiB binary;
// GB, MB, KB, TB decimal, exactly so capitalised: one meaning per unit everywhere in tiersim), and
// otherwise DisTorch's own lowercase suffixes g, m, k, b (gb, mb, ...), which DisTorch reads as binary.
// DisTorch lowercases what it is given, so in ComfyUI "20GB" is 20 GiB; in tiersim write "20gb" or
// "20GiB" for that, "20GB" for 20e9 bytes.
double split_bytes(std::string_view value) {
  std::size_t i = 0;
  while (i < value.size() && (std::isdigit(static_cast<unsigned char>(value[i])) || value[i] == '.' || value[i] == 'e' ||
                              value[i] == 'E' || value[i] == '+' || value[i] == '-'))
    ++i;
  std::string_view unit = trim(value.substr(i));
  // DisTorch reads a bare number as bytes (distorch_2.py parse_memory_string: "b or no unit"), and a split with no
  // g, m, k or b anywhere not as bytes at all (it is then a fraction split): "cuda:0,4" meant 4 GiB, never 4 bytes.
  if (unit.empty() && i > 0)
    throw std::invalid_argument("'" + std::string(value) + "' has no unit: DisTorch reads a bare number as bytes, and a "
                                "split with no unit at all as fractions; write " + std::string(value) + "gb (GiB), or " +
                                std::string(value) + "b for bytes");
  static const std::set<std::string_view> kTiersimUnits{"KiB", "MiB", "GiB", "TiB", "KB", "MB", "GB", "TB"};
  if (kTiersimUnits.count(unit)) return units::parse_bytes(value);
  return units::parse_distorch_bytes(value);
}

}  // namespace

std::vector<SplitEntry> parse_split(std::string_view text, SplitMode mode) {
  std::vector<SplitEntry> out;
  std::set<placement::DeviceId> seen;
  text = trim(text);
  if (text.empty()) bad("empty allocation string");
  while (!text.empty()) {
    const std::size_t semi = text.find(';');
    const std::string_view raw = trim(text.substr(0, semi));
    text = semi == std::string_view::npos ? std::string_view() : text.substr(semi + 1);
    if (raw.empty()) {
      if (text.empty() && !out.empty()) break;  // tolerate one trailing ';'
      bad("empty entry between ';'");
    }
    const std::string entry(raw);
    const std::size_t comma = raw.find(',');
    if (comma == std::string_view::npos) bad("entry '" + entry + "' needs the form DEVICE,VALUE (e.g. cuda:0,80%)");
    SplitEntry e;
    try {
      e.device = placement::parse_device(trim(raw.substr(0, comma)));
    } catch (const std::invalid_argument& ex) {
      bad("entry '" + entry + "': " + ex.what());
    }
    if (!seen.insert(e.device).second) bad("device " + placement::device_name(e.device) + " appears twice");
    std::string_view value = trim(raw.substr(comma + 1));
    switch (mode) {
      case SplitMode::Bytes:
        if (value == "*") {
          e.wildcard = true;
        } else {
          try {
            e.value = split_bytes(value);
          } catch (const std::invalid_argument& ex) {
            bad("entry '" + entry + "': " + ex.what());
          }
        }
        break;
      case SplitMode::Ratio:
        if (!value.empty() && value.back() == '%') value.remove_suffix(1);
        e.value = parse_plain_number(trim(value), entry);
        break;
      case SplitMode::Fraction:
        e.value = parse_plain_number(value, entry);
        if (e.value > 1.0) bad("entry '" + entry + "': a fraction of device memory must be between 0 and 1");
        break;
    }
    if (e.value < 0) bad("entry '" + entry + "': negative amount");
    out.push_back(e);
  }
  if (mode == SplitMode::Bytes && std::count_if(out.begin(), out.end(), [](const SplitEntry& e) { return e.wildcard; }) > 1)
    bad("only one device can take the rest ('*')");
  if (mode == SplitMode::Ratio) {
    double sum = 0;
    for (const auto& e : out) sum += e.value;
    if (!(sum > 0)) bad("ratios must add up to more than 0");
  }
  return out;
}

namespace {

double device_total(placement::DeviceId d, const hw::HardwareProfile& hw) {
  // ComfyUI's get_total_memory: the GPU's total (mem_get_info()[1]), the host's RAM.
  return d == placement::kCpu ? hw.host.memory : hw.gpu.memory;
}

// DisTorch writes each share as a fraction of the device's total with f"{x:.4f}" and reads it back.
double four_decimals(double fraction) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4f", fraction);
  return std::strtod(buf, nullptr);
}

}  // namespace

std::map<placement::DeviceId, double> split_quotas(const std::vector<SplitEntry>& entries, SplitMode mode,
                                                   double model_bytes, const hw::HardwareProfile& hw) {
  std::map<placement::DeviceId, double> bytes;
  switch (mode) {
    case SplitMode::Bytes: {
      // calculate_fraction_from_byte_expert_string: in the order written, each device takes what it asks
      // for of what is left; the rest goes to the wildcard device (the cpu unless "*" names another).
      double remaining = model_bytes;
      placement::DeviceId wildcard = placement::kCpu;
      for (const auto& e : entries) {
        if (e.wildcard) {
          wildcard = e.device;
          continue;
        }
        const double take = std::min(e.value, std::max(0.0, remaining));
        bytes[e.device] += take;
        remaining -= take;
      }
      if (remaining > 0) bytes[wildcard] += remaining;
      break;
    }
    case SplitMode::Ratio: {
      double sum = 0;
      for (const auto& e : entries) sum += e.value;
      for (const auto& e : entries) bytes[e.device] = e.value / sum * model_bytes;
      break;
    }
    case SplitMode::Fraction: {
      // Used as written: a fraction of each device's total memory.
      std::map<placement::DeviceId, double> quotas;
      for (const auto& e : entries) quotas[e.device] = e.value * device_total(e.device, hw);
      return quotas;
    }
  }
  std::map<placement::DeviceId, double> quotas;
  for (const auto& [d, b] : bytes) quotas[d] = four_decimals(b / device_total(d, hw)) * device_total(d, hw);
  return quotas;
}

std::map<placement::DeviceId, double> virtual_vram_quotas(double model_bytes, double vram_bytes,
                                                          placement::DeviceId compute,
                                                          const std::vector<placement::DeviceId>& donors,
                                                          const hw::HardwareProfile& hw) {
  // calculate_safetensor_vvram_allocation: in GiB, the compute device keeps the model less the virtual
  // VRAM (as a fraction of its total, not capped by it); each donor in turn gives what it can of it.
  constexpr double kGiB = 1073741824.0;
  const double model_gb = model_bytes / kGiB, vv = vram_bytes / kGiB;
  std::map<placement::DeviceId, double> quotas;
  const double rg = device_total(compute, hw) / kGiB;
  quotas[compute] = four_decimals(std::max(0.0, model_gb - vv) / rg) * device_total(compute, hw);
  double rem = vv;
  for (placement::DeviceId d : donors) {
    const double total_gb = device_total(d, hw) / kGiB;
    const double don = std::min(rem, total_gb);
    rem -= don;
    quotas[d] += four_decimals(don / total_gb) * device_total(d, hw);
  }
  return quotas;
}

}  // namespace tiersim::policies
