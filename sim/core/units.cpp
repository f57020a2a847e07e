#include "core/units.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <utility>

namespace tiersim::units {

std::string example(std::string_view what);

namespace {

struct Suffix {
  std::string_view name;
  double scale;
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Splits "12.5 GB/s" into 12.5 and "GB/s". The number must be finite; the unit may be empty.
std::pair<double, std::string_view> split_number(std::string_view text, std::string_view what) {
  text = trim(text);
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  double value = 0.0;
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr == begin || !std::isfinite(value)) {
    throw std::invalid_argument("expected a " + std::string(what) + " such as " + example(what) +
                                ", got \"" + std::string(text) + "\"");
  }
  return {value, trim(std::string_view(ptr, static_cast<std::size_t>(end - ptr)))};
}

// The quantities a configuration may state: zero, or a value between `min` and `max` (SI units).
// Anything else is a typo or an attack (1e308 TiB, 1e-300 GB/s) that would turn into inf, a
// denormal rate, or an out-of-range conversion further on.
struct Range {
  double min, max;
  const char* text;  // the range in human terms, for the message
};

constexpr Range kBytesRange{1.0, 1125899906842624.0, "0, or 1 B to 1 PiB"};
constexpr Range kBandwidthRange{1e3, 1e15, "0, or 1 KB/s to 1 PB/s"};
constexpr Range kDurationRange{1e-12, 3600.0, "0, or 1 ps to 1 hour"};
constexpr Range kFlopRateRange{1e6, 1e18, "0, or 1 MFLOP/s to 1000 PFLOP/s"};

double check_range(double value, const Range& range, std::string_view what, std::string_view text) {
  if (value == 0.0 || (value >= range.min && value <= range.max)) return value;
  throw std::invalid_argument(std::string(what) + " \"" + std::string(trim(text)) + "\" is out of range (accepted: " +
                              range.text + ")");
}

double apply_suffix(std::string_view text, std::string_view what, const Suffix* table, std::size_t n,
                    const Range& range) {
  auto [value, unit] = split_number(text, what);
  for (std::size_t i = 0; i < n; ++i) {
    if (unit == table[i].name) return check_range(value * table[i].scale, range, what, text);
  }
  throw std::invalid_argument("unknown unit \"" + std::string(unit) + "\" in " + std::string(what) +
                              " \"" + std::string(trim(text)) + "\"; expected e.g. " + example(what));
}

}  // namespace

double parse_bytes(std::string_view text) {
  static constexpr std::array<Suffix, 11> table{{{"B", 1.0},
                                                 {"KB", 1e3},
                                                 {"MB", 1e6},
                                                 {"GB", 1e9},
                                                 {"TB", 1e12},
                                                 {"KiB", 1024.0},
                                                 {"MiB", 1048576.0},
                                                 {"GiB", 1073741824.0},
                                                 {"TiB", 1099511627776.0},
                                                 {"bytes", 1.0},
                                                 {"kB", 1e3}}};
  return apply_suffix(text, "size", table.data(), table.size(), kBytesRange);
}

double parse_bandwidth(std::string_view text) {
  static constexpr std::array<Suffix, 8> table{{{"B/s", 1.0},
                                                {"KB/s", 1e3},
                                                {"MB/s", 1e6},
                                                {"GB/s", 1e9},
                                                {"TB/s", 1e12},
                                                {"KiB/s", 1024.0},
                                                {"MiB/s", 1048576.0},
                                                {"GiB/s", 1073741824.0}}};
  return apply_suffix(text, "bandwidth", table.data(), table.size(), kBandwidthRange);
}

double parse_duration(std::string_view text) {
  static constexpr std::array<Suffix, 6> table{
      {{"s", 1.0}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}, {"ps", 1e-12}, {"min", 60.0}}};
  return apply_suffix(text, "duration", table.data(), table.size(), kDurationRange);
}

double parse_flop_rate(std::string_view text) {
  static constexpr std::array<Suffix, 5> table{{{"FLOP/s", 1.0},
                                                {"MFLOP/s", 1e6},
                                                {"GFLOP/s", 1e9},
                                                {"TFLOP/s", 1e12},
                                                {"PFLOP/s", 1e15}}};
  return apply_suffix(text, "compute rate", table.data(), table.size(), kFlopRateRange);
}

double parse_distorch_bytes(std::string_view text) {
  // DisTorch accepts g/m/k/b with an optional trailing "b" ("2.5gb", "512mb", "4g"), binary units.
  auto [value, unit] = split_number(text, "DisTorch size");
  std::string u;
  for (char c : unit) u.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  double scale = 0.0;
  if (u.empty() || u == "b") scale = 1.0;
  else if (u == "k" || u == "kb") scale = 1024.0;
  else if (u == "m" || u == "mb") scale = 1048576.0;
  else if (u == "g" || u == "gb") scale = 1073741824.0;
  else if (u == "t" || u == "tb") scale = 1099511627776.0;
  else
    throw std::invalid_argument("unknown size unit \"" + std::string(unit) + "\" in \"" +
                                std::string(trim(text)) + "\"; expected g, m, k or b (e.g. 2.5gb)");
  return check_range(value * scale, kBytesRange, "DisTorch size", text);
}

std::string example(std::string_view what) {
  if (what == "size") return "\"24 GiB\"";
  if (what == "bandwidth") return "\"55 GB/s\"";
  if (what == "duration") return "\"3.6 us\"";
  if (what == "compute rate") return "\"165 TFLOP/s\"";
  return "\"2.5gb\"";
}

std::string format_bytes(double bytes) {
  char buf[64];
  const double a = std::fabs(bytes);
  if (a >= 1073741824.0) std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / 1073741824.0);
  else if (a >= 1048576.0) std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / 1048576.0);
  else if (a >= 1024.0) std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024.0);
  else std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  return buf;
}

std::pair<std::string, std::string> format_bytes_apart(double a, double b) {
  std::pair<std::string, std::string> out{format_bytes(a), format_bytes(b)};
  if (out.first != out.second || a == b) return out;
  const double m = std::max(std::fabs(a), std::fabs(b));
  const double unit = m >= 1073741824.0 ? 1073741824.0 : m >= 1048576.0 ? 1048576.0 : m >= 1024.0 ? 1024.0 : 1.0;
  const char* name = unit == 1073741824.0 ? "GiB" : unit == 1048576.0 ? "MiB" : unit == 1024.0 ? "KiB" : "B";
  char x[64], y[64];
  for (int digits = 3; digits <= 6; ++digits) {
    std::snprintf(x, sizeof x, "%.*f %s", digits, a / unit, name);
    std::snprintf(y, sizeof y, "%.*f %s", digits, b / unit, name);
    if (std::string(x) != y) return {x, y};
  }
  std::snprintf(x, sizeof x, "%.0f B", a);
  std::snprintf(y, sizeof y, "%.0f B", b);
  return {x, y};
}

std::string format_duration(double seconds) {
  char buf[64];
  const double a = std::fabs(seconds);
  if (a >= 1.0) std::snprintf(buf, sizeof buf, "%.3f s", seconds);
  else if (a >= 1e-3) std::snprintf(buf, sizeof buf, "%.2f ms", seconds * 1e3);
  else std::snprintf(buf, sizeof buf, "%.1f us", seconds * 1e6);
  return buf;
}

}  // namespace tiersim::units
