#include "config/strict_reader.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <yaml-cpp/depthguard.h>

#include "config/nearest_names.hpp"
#include "core/error.hpp"
#include "core/units.hpp"

namespace tiersim::config {
namespace {

std::string trim_number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

std::size_t line_of(const YAML::Node& n) {
  const auto mark = n.Mark();
  return mark.line >= 0 ? static_cast<std::size_t>(mark.line) + 1 : 0;
}

}  // namespace

YAML::Node parse_document(const std::string& text, const std::string& file) {
  try {
    return YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own message for this is "bad file" (ErrorMsg::BAD_FILE), which says nothing of the cause.
    throw InputError(file, e.mark.line >= 0 ? static_cast<std::size_t>(e.mark.line) + 1 : 0, "",
                     "YAML nesting too deep (" + std::to_string(e.depth()) +
                         " lists or mappings inside one another; the reader stops there)");
  } catch (const YAML::Exception& e) {
    throw InputError(file, e.mark.line >= 0 ? static_cast<std::size_t>(e.mark.line) + 1 : 0, "",
                     "YAML syntax error: " + e.msg);
  }
}

Section::Section(YAML::Node node, std::string path, std::string file)
    : node_(std::move(node)), path_(std::move(path)), file_(std::move(file)) {
  if (!node_.IsMap()) fail_at(node_, path_, "expected a mapping of keys");
  // Keys must be plain words, each given once (yaml-cpp keeps the first of two equal keys silently).
  std::set<std::string> seen;
  for (const auto& kv : node_) {
    if (!kv.first.IsScalar()) fail_at(kv.first, path_, "a key must be a plain word, not a list or mapping");
    const std::string k = kv.first.Scalar();
    if (!seen.insert(k).second) fail_at(kv.first, full(k), "given twice");
  }
}

Section Section::child(const std::string& key) { return Section(require(key), full(key), file_); }

std::vector<std::string> Section::keys() const {
  std::vector<std::string> out;
  for (const auto& kv : node_) out.push_back(kv.first.Scalar());
  return out;
}

void Section::fail(const std::string& key, const std::string& message) const {
  YAML::Node n = node_[key];
  fail_at(n ? n : node_, full(key), message);
}

void Section::fail_at(const YAML::Node& n, const std::string& key, const std::string& message) const {
  throw InputError(file_, line_of(n), key, message);
}

YAML::Node Section::require(const std::string& key) {
  read_.insert(key);
  YAML::Node n = node_[key];
  if (!n) {
    // A missing key is most often a misspelt one: point at the likely typo.
    for (const auto& kv : node_) {
      const std::string other = kv.first.Scalar();
      if (!read_.count(other) && edit_distance(other, key) <= 2)
        fail_at(kv.first, full(key), "missing required key; is '" + other + "' a misspelling of it?");
    }
    fail_at(node_, full(key), "missing required key");
  }
  return n;
}

std::string Section::scalar(const YAML::Node& n, const std::string& key, const char* expected) const {
  if (!n.IsScalar()) fail_at(n, key, std::string("expected ") + expected + ", not a list or mapping");
  return n.Scalar();
}

std::string Section::text(const std::string& key) { return scalar(require(key), full(key), "a string"); }

template <typename Parse>
double Section::quantity(const std::string& key, Parse parse, bool allow_zero) {
  YAML::Node n = require(key);
  const std::string s = scalar(n, full(key), "a quantity with its unit");
  double v = 0;
  try {
    v = parse(s);
  } catch (const std::invalid_argument& e) {
    fail_at(n, full(key), e.what());
  }
  if (!std::isfinite(v)) fail_at(n, full(key), "is not a finite quantity");
  if (v < 0 || (!allow_zero && v == 0)) fail_at(n, full(key), allow_zero ? "must not be negative" : "must be positive");
  return v;
}

double Section::bytes(const std::string& key, bool allow_zero) { return quantity(key, units::parse_bytes, allow_zero); }
double Section::bandwidth(const std::string& key) { return quantity(key, units::parse_bandwidth, false); }
double Section::duration(const std::string& key) { return quantity(key, units::parse_duration, true); }

double Section::number(const std::string& key, double lo, double hi) {
  YAML::Node n = require(key);
  double v = 0;
  try {
    v = n.as<double>();
  } catch (const YAML::Exception&) {
    fail_at(n, full(key), "expected a number");
  }
  if (!(v >= lo && v <= hi)) fail_at(n, full(key), "must be between " + trim_number(lo) + " and " + trim_number(hi));
  return v;
}

int Section::integer(const std::string& key, int lo, int hi) {
  YAML::Node n = require(key);
  long long v = 0;
  try {
    v = n.as<long long>();
  } catch (const YAML::Exception&) {
    fail_at(n, full(key), "expected an integer");
  }
  if (v < lo || v > hi) fail_at(n, full(key), "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return static_cast<int>(v);
}

bool Section::flag(const std::string& key) {
  YAML::Node n = require(key);
  const std::string v = n.IsScalar() ? n.Scalar() : "";
  if (v == "true") return true;
  if (v != "false") fail_at(n, full(key), "expected true or false");
  return false;
}

bool is_ggml_type_name(const std::string& name) {
  static const std::set<std::string> names{
      "f32",    "f16",     "q4_0",  "q4_1",   "q5_0",  "q5_1",  "q8_0",   "q8_1",   "q2_k",  "q3_k",   "q4_k",  "q5_k",
      "q6_k",   "q8_k",    "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq4_nl", "iq3_s", "iq2_s", "iq4_xs", "i8",    "i16",
      "i32",    "i64",     "f64",   "iq1_m",  "bf16",  "tq1_0", "tq2_0",  "mxfp4"};
  return names.count(name) > 0;
}

std::map<std::string, double> Section::weight_type_rates(const std::string& key, bool bandwidth) {
  Section s = child(key);
  std::map<std::string, double> out;
  for (const std::string& type : s.keys()) {
    if (!is_ggml_type_name(type))
      s.fail(type, "not a ggml weight type (lower case: q4_k, q6_k, q8_0, f16, bf16, iq4_xs, mxfp4, ...)");
    out[type] = bandwidth ? s.bandwidth(type) : s.flop_rate(type);
  }
  s.finish();
  return out;
}

double Section::flop_rate(const std::string& key) { return quantity(key, units::parse_flop_rate, false); }

std::map<std::string, double> Section::rates(const std::string& key) {
  Section s = child(key);
  std::map<std::string, double> out;
  static const std::set<std::string> dtypes{"fp32", "tf32", "bf16", "fp16", "fp8", "int8"};
  for (const std::string& dtype : s.keys()) {
    if (!dtypes.count(dtype)) s.fail(dtype, "unknown dtype (fp32, tf32, bf16, fp16, fp8, int8)");
    out[dtype] = s.quantity(dtype, units::parse_flop_rate, false);
  }
  if (out.empty()) fail_at(s.node_, s.path_, "needs at least one dtype rate");
  s.finish();
  return out;
}

std::map<trace::OpKind, double> Section::op_durations(const std::string& key) {
  Section s = child(key);
  std::map<trace::OpKind, double> out;
  for (const std::string& kind : s.keys()) {
    trace::OpKind parsed;
    if (!trace::parse_op_kind(kind, parsed))
      s.fail(kind, "unknown op kind (gemm, gemv, attention, norm, elementwise, embedding, rope, sample, other)");
    out[parsed] = s.duration(kind);
  }
  if (out.empty()) fail_at(s.node_, s.path_, "needs at least one op kind");
  s.finish();
  return out;
}

std::vector<std::pair<double, double>> Section::size_rate_points(const std::string& key) {
  YAML::Node pts = require(key);
  if (!pts.IsSequence()) fail_at(pts, full(key), "expected a list of [size, bandwidth] pairs");
  std::vector<std::pair<double, double>> out;
  for (const auto& p : pts) {
    if (!p.IsSequence() || p.size() != 2 || !p[0].IsScalar() || !p[1].IsScalar())
      fail_at(p, full(key), "each point is [\"4 KiB\", \"3.1 GB/s\"]");
    try {
      const double size = units::parse_bytes(p[0].Scalar());
      const double bw = units::parse_bandwidth(p[1].Scalar());
      if (!(size > 0 && bw > 0) || !std::isfinite(size) || !std::isfinite(bw))
        throw std::invalid_argument("size and bandwidth must be positive and finite");
      if (!out.empty() && size <= out.back().first) throw std::invalid_argument("sizes must ascend");
      out.emplace_back(size, bw);
    } catch (const std::invalid_argument& e) {
      fail_at(p, full(key), e.what());
    }
  }
  return out;
}

std::vector<std::pair<double, double>> Section::size_duration_points(const std::string& key) {
  YAML::Node pts = require(key);
  if (!pts.IsSequence() || pts.size() == 0) fail_at(pts, full(key), "expected a list of [size, duration] pairs");
  std::vector<std::pair<double, double>> out;
  for (const auto& p : pts) {
    if (!p.IsSequence() || p.size() != 2 || !p[0].IsScalar() || !p[1].IsScalar())
      fail_at(p, full(key), "each point is [\"16 KiB\", \"31.8 us\"]");
    try {
      const double size = units::parse_bytes(p[0].Scalar());
      const double seconds = units::parse_duration(p[1].Scalar());
      if (!(size > 0) || !std::isfinite(size) || !(seconds >= 0) || !std::isfinite(seconds))
        throw std::invalid_argument("the size must be positive and the duration at least 0, both finite");
      if (!out.empty() && size <= out.back().first) throw std::invalid_argument("sizes must ascend");
      out.emplace_back(size, seconds);
    } catch (const std::invalid_argument& e) {
      fail_at(p, full(key), e.what());
    }
  }
  return out;
}

std::vector<std::array<double, 4>> Section::size_size_duration_rows(const std::string& key) {
  YAML::Node rows = require(key);
  if (!rows.IsSequence() || rows.size() == 0) fail_at(rows, full(key), "expected a list of [size, size, duration, duration] rows");
  std::vector<std::array<double, 4>> out;
  for (const auto& r : rows) {
    if (!r.IsSequence() || r.size() != 4 || !r[0].IsScalar() || !r[1].IsScalar() || !r[2].IsScalar() || !r[3].IsScalar())
      fail_at(r, full(key), "each row is [\"8 KiB\", \"32 MiB\", \"2.42 ms\", \"2.8 ms\"]: two sizes, two durations");
    try {
      const std::array<double, 4> v = {units::parse_bytes(r[0].Scalar()), units::parse_bytes(r[1].Scalar()),
                                       units::parse_duration(r[2].Scalar()), units::parse_duration(r[3].Scalar())};
      for (double x : v)
        if (!(x > 0) || !std::isfinite(x)) throw std::invalid_argument("sizes and durations must be positive and finite");
      if (!out.empty() && !(v[0] > out.back()[0] || (v[0] == out.back()[0] && v[1] > out.back()[1])))
        throw std::invalid_argument("rows must ascend by the first size, then the second");
      out.push_back(v);
    } catch (const std::invalid_argument& e) {
      fail_at(r, full(key), e.what());
    }
  }
  return out;
}

std::vector<std::pair<double, double>> Section::thread_rate_points(const std::string& key) {
  YAML::Node pts = require(key);
  if (!pts.IsSequence() || pts.size() == 0) fail_at(pts, full(key), "expected a list of [threads, bandwidth] pairs");
  std::vector<std::pair<double, double>> out;
  for (const auto& p : pts) {
    if (!p.IsSequence() || p.size() != 2 || !p[0].IsScalar() || !p[1].IsScalar())
      fail_at(p, full(key), "each point is [8, \"31 GB/s\"]: a thread count and a bandwidth");
    try {
      std::size_t used = 0;
      const std::string& n = p[0].Scalar();
      const int threads = std::stoi(n, &used);
      if (used != n.size() || threads < 1 || threads > 4096) throw std::invalid_argument("the thread count must be a whole number from 1 to 4096");
      const double bw = units::parse_bandwidth(p[1].Scalar());
      if (!(bw > 0) || !std::isfinite(bw)) throw std::invalid_argument("the bandwidth must be positive and finite");
      if (!out.empty() && threads <= out.back().first) throw std::invalid_argument("thread counts must ascend");
      out.emplace_back(threads, bw);
    } catch (const std::out_of_range&) {
      fail_at(p, full(key), "the thread count must be a whole number from 1 to 4096");
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      fail_at(p, full(key), what == "stoi" ? "the thread count must be a whole number from 1 to 4096" : what);
    }
  }
  return out;
}

std::vector<std::pair<double, double>> Section::row_count_points(const std::string& key) {
  YAML::Node pts = require(key);
  if (!pts.IsSequence() || pts.size() == 0) fail_at(pts, full(key), "expected a list of [rows, times] pairs");
  std::vector<std::pair<double, double>> out;
  for (const auto& p : pts) {
    if (!p.IsSequence() || p.size() != 2 || !p[0].IsScalar() || !p[1].IsScalar())
      fail_at(p, full(key), "each point is [256, 2.0]: a row count and how many times the weight is read");
    try {
      std::size_t used = 0, used_times = 0;
      const std::string& n = p[0].Scalar();
      const long rows = std::stol(n, &used);
      if (used != n.size() || rows < 1 || rows > (1L << 24)) throw std::invalid_argument("the row count must be a whole number from 1 to 16777216");
      const double times = std::stod(p[1].Scalar(), &used_times);
      if (used_times != p[1].Scalar().size() || !(times >= 1 && times <= 1e6))
        throw std::invalid_argument("the times must be a number from 1 to 1000000");
      if (!out.empty() && rows <= out.back().first) throw std::invalid_argument("row counts must ascend");
      out.emplace_back(static_cast<double>(rows), times);
    } catch (const std::out_of_range&) {
      fail_at(p, full(key), "a number out of range");
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      fail_at(p, full(key), what == "stol" || what == "stod" ? "expected [rows, times]: two numbers" : what);
    }
  }
  return out;
}

std::vector<std::pair<double, double>> Section::flop_efficiency_points(const std::string& key) {
  return efficiency_points(key, "an op's FLOPs");
}

std::vector<std::pair<double, double>> Section::efficiency_points(const std::string& key, const std::string& size) {
  YAML::Node pts = require(key);
  if (!pts.IsSequence() || pts.size() == 0) fail_at(pts, full(key), "expected a list of [size, efficiency] pairs (" + size + ")");
  std::vector<std::pair<double, double>> out;
  for (const auto& p : pts) {
    if (!p.IsSequence() || p.size() != 2 || !p[0].IsScalar() || !p[1].IsScalar())
      fail_at(p, full(key), "each point is [2.9e10, 0.46]: " + size + " and the share of the dtype's rate it reaches");
    try {
      std::size_t used = 0, used_eff = 0;
      const double at = std::stod(p[0].Scalar(), &used);
      if (used != p[0].Scalar().size() || !(at >= 1 && at <= 1e18))
        throw std::invalid_argument("the size (" + size + ") must be a number from 1 to 1e18");
      const double eff = std::stod(p[1].Scalar(), &used_eff);
      if (used_eff != p[1].Scalar().size() || !(eff >= 0.01 && eff <= 1))
        throw std::invalid_argument("the efficiency must be a number from 0.01 to 1");
      if (!out.empty() && at <= out.back().first) throw std::invalid_argument("the sizes (" + size + ") must ascend");
      out.emplace_back(at, eff);
    } catch (const std::out_of_range&) {
      fail_at(p, full(key), "a number out of range");
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      fail_at(p, full(key), what == "stod" ? "expected [size, efficiency]: two numbers" : what);
    }
  }
  return out;
}

void Section::finish() const {
  for (const auto& kv : node_) {
    const std::string k = kv.first.Scalar();
    if (!read_.count(k)) fail_at(kv.first, full(k), "unknown key");
  }
}

}  // namespace tiersim::config
