#include "hardware/profile_loader.hpp"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "core/units.hpp"
#include "hardware/presets.hpp"
#include "trace/trace.hpp"

namespace tiersim::hw {
namespace {

// One mapping of the YAML tree. Every key read is remembered; finish() rejects the others.
class Section {
 public:
  Section(YAML::Node node, std::string path, const std::string& file) : node_(std::move(node)), path_(std::move(path)), file_(file) {
    if (!node_.IsMap()) fail_at(node_, path_, "expected a mapping of keys");
  }

  bool has(const std::string& key) const { return static_cast<bool>(node_[key]); }

  Section child(const std::string& key) {
    return Section(require(key), full(key), file_);
  }

  std::string text(const std::string& key) {
    YAML::Node n = require(key);
    if (!n.IsScalar()) fail_at(n, full(key), "expected a string");
    return n.as<std::string>();
  }

  template <typename Parse>
  double quantity(const std::string& key, Parse parse, bool allow_zero = false) {
    YAML::Node n = require(key);
    double v = 0;
    try {
      if (!n.IsScalar()) throw std::invalid_argument("expected a quantity with its unit");
      v = parse(n.as<std::string>());
    } catch (const std::invalid_argument& e) {
      fail_at(n, full(key), e.what());
    }
    if (v < 0 || (!allow_zero && v == 0)) fail_at(n, full(key), allow_zero ? "must not be negative" : "must be positive");
    return v;
  }
  double bytes(const std::string& key, bool allow_zero = false) { return quantity(key, units::parse_bytes, allow_zero); }
  double bandwidth(const std::string& key) { return quantity(key, units::parse_bandwidth); }
  double duration(const std::string& key) { return quantity(key, units::parse_duration, true); }

  double number(const std::string& key, double lo, double hi) {
    YAML::Node n = require(key);
    double v = 0;
    try {
      v = n.as<double>();
    } catch (const YAML::Exception&) {
      fail_at(n, full(key), "expected a number");
    }
    if (!(v >= lo && v <= hi))
      fail_at(n, full(key), "must be between " + trim_number(lo) + " and " + trim_number(hi));
    return v;
  }

  bool flag(const std::string& key) {
    YAML::Node n = require(key);
    const std::string v = n.IsScalar() ? n.as<std::string>() : "";
    if (v == "true") return true;
    if (v != "false") fail_at(n, full(key), "expected true or false");
    return false;
  }

  int integer(const std::string& key, int lo, int hi) {
    YAML::Node n = require(key);
    int v = 0;
    try {
      v = n.as<int>();
    } catch (const YAML::Exception&) {
      fail_at(n, full(key), "expected an integer");
    }
    if (v < lo || v > hi) fail_at(n, full(key), "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    return v;
  }

  std::map<std::string, double> rates(const std::string& key) {
    Section s = child(key);
    std::map<std::string, double> out;
    for (const auto& kv : s.node_) {
      const std::string dtype = kv.first.as<std::string>();
      static const std::set<std::string> dtypes{"fp32", "tf32", "bf16", "fp16", "fp8", "int8"};
      if (!dtypes.count(dtype)) fail_at(kv.first, s.full(dtype), "unknown dtype (fp32, tf32, bf16, fp16, fp8, int8)");
      out[dtype] = s.quantity(dtype, units::parse_flop_rate);
    }
    if (out.empty()) fail_at(s.node_, s.path_, "needs at least one dtype rate");
    s.finish();
    return out;
  }

  // A mapping of trace op kinds (traces/FORMAT.md) to durations.
  std::map<trace::OpKind, double> op_durations(const std::string& key) {
    Section s = child(key);
    std::map<trace::OpKind, double> out;
    for (const auto& kv : s.node_) {
      const std::string kind = kv.first.as<std::string>();
      trace::OpKind parsed;
      if (!trace::parse_op_kind(kind, parsed))
        fail_at(kv.first, s.full(kind), "unknown op kind (gemm, gemv, attention, norm, elementwise, embedding, rope, sample, other)");
      out[parsed] = s.duration(kind);
    }
    if (out.empty()) fail_at(s.node_, s.path_, "needs at least one op kind");
    s.finish();
    return out;
  }

  TransferCurve curve(const std::string& key) {
    Section s = child(key);
    TransferCurve c;
    c.bandwidth = s.bandwidth("bandwidth");
    c.latency = s.duration("latency");
    if (s.has("points")) {
      YAML::Node pts = s.require("points");
      if (!pts.IsSequence()) fail_at(pts, s.full("points"), "expected a list of [size, bandwidth] pairs");
      for (const auto& p : pts) {
        if (!p.IsSequence() || p.size() != 2) fail_at(p, s.full("points"), "each point is [\"4 KiB\", \"3.1 GB/s\"]");
        try {
          const double size = units::parse_bytes(p[0].as<std::string>());
          const double bw = units::parse_bandwidth(p[1].as<std::string>());
          if (size <= 0 || bw <= 0) throw std::invalid_argument("size and bandwidth must be positive");
          if (!c.points.empty() && size <= c.points.back().first) throw std::invalid_argument("sizes must ascend");
          c.points.emplace_back(size, bw);
        } catch (const std::invalid_argument& e) {
          fail_at(p, s.full("points"), e.what());
        }
      }
    }
    s.finish();
    return c;
  }

  // Rejects every key that was not read.
  void finish() const {
    for (const auto& kv : node_) {
      const std::string k = kv.first.as<std::string>();
      if (!read_.count(k)) fail_at(kv.first, full(k), "unknown key");
    }
  }

  void mark_read(const std::string& key) { read_.insert(key); }
  const YAML::Node& node() const { return node_; }
  std::string full(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

 private:
  YAML::Node require(const std::string& key) {
    read_.insert(key);
    YAML::Node n = node_[key];
    if (!n) {
      // A missing key is most often a misspelt one: point at the likely typo.
      for (const auto& kv : node_) {
        const std::string other = kv.first.as<std::string>();
        if (!read_.count(other) && edit_distance(other, key) <= 2)
          fail_at(kv.first, full(key), "missing required key; is '" + other + "' a misspelling of it?");
      }
      fail_at(node_, full(key), "missing required key");
    }
    return n;
  }
  static std::size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
      std::size_t diag = row[0];
      row[0] = i;
      for (std::size_t j = 1; j <= b.size(); ++j) {
        const std::size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
        diag = up;
      }
    }
    return row[b.size()];
  }
  [[noreturn]] void fail_at(const YAML::Node& n, const std::string& key, const std::string& msg) const {
    const auto mark = n.Mark();
    throw InputError(file_, mark.line >= 0 ? static_cast<std::size_t>(mark.line) + 1 : 0, key, msg);
  }
  static std::string trim_number(double v) {
    std::ostringstream os;
    os << v;
    return os.str();
  }

  YAML::Node node_;
  std::string path_;
  const std::string& file_;
  std::set<std::string> read_;
};

}  // namespace

HardwareProfile parse_profile(const std::string& text, const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw InputError(file, static_cast<std::size_t>(e.mark.line) + 1, "", "YAML syntax error: " + e.msg);
  }
  if (!root || !root.IsMap()) throw InputError(file, 0, "", "expected a YAML mapping (a hardware profile)");
  Section top(root, "", file);
  HardwareProfile p;
  p.origin = file;
  if (top.integer("tiersim_profile", 1, 1000) != 1)
    throw InputError(file, 0, "tiersim_profile", "unsupported profile schema version (this build reads 1)");
  p.name = top.text("name");
  p.description = top.text("description");
  if (top.has("facts")) {
    Section facts = top.child("facts");
    for (const auto& kv : facts.node()) {
      const std::string k = kv.first.as<std::string>();
      p.extra[k] = facts.text(k);
    }
    facts.finish();
  }

  {
    Section g = top.child("gpu");
    p.sources["gpu"] = g.text("source");
    p.gpu.name = g.text("name");
    p.gpu.count = g.integer("count", 1, 64);
    p.gpu.memory = g.bytes("memory");
    p.gpu.reserved = g.bytes("reserved", true);
    if (p.gpu.reserved >= p.gpu.memory) throw InputError(file, 0, "gpu.reserved", "must be less than gpu.memory");
    p.gpu.memory_bandwidth = g.bandwidth("memory_bandwidth");
    p.gpu.memory_efficiency = g.number("memory_efficiency", 0.01, 1.0);
    p.gpu.compute = g.rates("compute");
    p.gpu.compute_efficiency = g.number("compute_efficiency", 0.01, 1.0);
    p.gpu.kernel_min_time = g.duration("kernel_min_time");
    g.finish();
  }
  {
    Section h = top.child("host");
    p.sources["host"] = h.text("source");
    p.host.name = h.text("name");
    p.host.memory = h.bytes("memory");
    p.host.memory_bandwidth = h.bandwidth("memory_bandwidth");
    p.host.memory_efficiency = h.number("memory_efficiency", 0.01, 1.0);
    p.host.compute = h.rates("compute");
    p.host.compute_efficiency = h.number("compute_efficiency", 0.01, 1.0);
    p.host.op_overhead = h.duration("op_overhead");
    h.finish();
  }
  {
    Section l = top.child("host_link");
    p.sources["host_link"] = l.text("source");
    p.host_link.type = l.text("type");
    if (p.host_link.type != "pcie") throw InputError(file, 0, "host_link.type", "only 'pcie' host links are modelled");
    p.host_link.generation = l.integer("generation", 1, 7);
    p.host_link.width = l.integer("width", 1, 32);
    p.host_link.h2d_pinned = l.curve("h2d_pinned");
    p.host_link.d2h_pinned = l.curve("d2h_pinned");
    p.host_link.h2d_pageable = l.curve("h2d_pageable");
    p.host_link.d2h_pageable = l.curve("d2h_pageable");
    p.host_link.bidirectional = l.bandwidth("bidirectional");
    l.finish();
  }
  if (top.has("peer_link")) {
    Section l = top.child("peer_link");
    PeerLinkSpec peer;
    p.sources["peer_link"] = l.text("source");
    peer.type = l.text("type");
    if (peer.type != "nvlink" && peer.type != "pcie")
      throw InputError(file, 0, "peer_link.type", "must be 'nvlink' or 'pcie'");
    peer.transfer = l.curve("transfer");
    peer.bidirectional = l.bandwidth("bidirectional");
    l.finish();
    p.peer_link = peer;
  } else if (p.gpu.count > 1) {
    throw InputError(file, 0, "peer_link", "missing: a profile with gpu.count > 1 must describe the link between GPUs");
  }
  if (top.has("managed_memory")) {
    Section m = top.child("managed_memory");
    ManagedMemorySpec um;
    p.sources["managed_memory"] = m.text("source");
    um.va_block = m.bytes("va_block");
    um.big_page = m.bytes("big_page");
    if (um.big_page > um.va_block) throw InputError(file, 0, "managed_memory.big_page", "must not exceed va_block");
    um.prefetch_threshold = m.number("prefetch_threshold", 0.01, 1.0);
    um.fault_batch_count = m.integer("fault_batch_count", 1, 1 << 20);
    um.fault_latency = m.duration("fault_latency");
    um.fault_block_overhead = m.duration("fault_block_overhead");
    um.fault_migration_bandwidth = m.bandwidth("fault_migration_bandwidth");
    um.prefetch_to_gpu = m.bandwidth("prefetch_to_gpu");
    um.evict_to_cpu = m.bandwidth("evict_to_cpu");
    um.remote_read_bandwidth = m.bandwidth("remote_read_bandwidth");
    um.mapping_fault_cost = m.duration("mapping_fault_cost");
    um.alloc_call = m.duration("alloc_call");
    um.free_call = m.duration("free_call");
    m.finish();
    p.managed_memory = um;
  }
  {
    Section f = top.child("framework");
    p.sources["framework"] = f.text("source");
    p.framework.per_launch = f.duration("per_launch");
    p.framework.per_copy = f.duration("per_copy");
    p.framework.per_prefetch = f.duration("per_prefetch");
    p.framework.per_step = f.duration("per_step");
    p.framework.new_length_attention = f.duration("new_length_attention");
    p.framework.peer_copy_sync = f.duration("peer_copy_sync");
    p.framework.peer_copy_overlaps_compute = f.flag("peer_copy_overlaps_compute");
    if (f.has("per_op")) p.framework.per_op = f.op_durations("per_op");
    f.finish();
  }
  top.finish();
  return p;
}

HardwareProfile load_profile_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path, 0, "", "cannot open hardware profile");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_profile(ss.str(), path);
}

HardwareProfile resolve_profile(const std::string& spec) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(spec, ec)) return load_profile_file(spec);
  for (const auto& preset : embedded_presets()) {
    if (spec == preset.name) {
      HardwareProfile p = parse_profile(preset.yaml, "preset:" + preset.name);
      return p;
    }
  }
  std::string names;
  for (const auto& preset : embedded_presets()) names += (names.empty() ? "" : ", ") + preset.name;
  throw InputError(spec, 0, "--hw", "no such file, and not a preset name (presets: " + names + ")");
}

std::vector<PresetInfo> list_presets() {
  std::vector<PresetInfo> out;
  for (const auto& preset : embedded_presets()) {
    HardwareProfile p = parse_profile(preset.yaml, "preset:" + preset.name);
    out.push_back({preset.name, p.description});
  }
  return out;
}

}  // namespace tiersim::hw
