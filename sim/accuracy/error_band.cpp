#include "accuracy/error_band.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace tiersim::accuracy {

// results/accuracy/bands.csv, compiled in (sim/CMakeLists.txt: accuracy_bands_embedded.cpp).
const std::string& embedded_bands_csv();

namespace {

std::vector<std::string> split_csv_line(const std::string& line) {
  // bands.csv's fields hold no quotes or commas (sets are ';'-joined): a plain split is its whole grammar.
  std::vector<std::string> out;
  std::string field;
  for (const char ch : line) {
    if (ch == ',') {
      out.push_back(field);
      field.clear();
    } else if (ch != '\r') {
      field += ch;
    }
  }
  out.push_back(field);
  return out;
}

double number(const std::string& s, int line) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || !std::isfinite(v) || v < 0)
    throw std::logic_error("results/accuracy/bands.csv:" + std::to_string(line) + ": not a non-negative number: '" + s + "'");
  return v;
}

std::string percent(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * share);
  return buf;
}

const BandRow* find(const std::string& machine, const std::string& workload, const std::string& strategy,
                    const std::string& split) {
  for (const auto& b : bands())
    if (b.machine_class == machine && b.workload == workload && b.strategy == strategy && b.split == split) return &b;
  return nullptr;
}

std::string machine_words(const std::string& c) {
  if (c == "measured") return "measured GPU kind";
  if (c == "published") return "GPU from published microbenchmarks";
  if (c == "architecture-prior") return "GPU derived from a measured sibling";
  return "datasheet GPU";
}

}  // namespace

std::vector<BandRow> parse_bands(const std::string& csv_text) {
  std::istringstream in(csv_text);
  std::string line;
  std::vector<BandRow> out;
  int n = 0;
  const std::string header = "machine_class,workload,strategy,split,rows,mean_abs_error,median_abs_error,p90_abs_error,sets";
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (n == 1) {
      if (line != header) throw std::logic_error("results/accuracy/bands.csv:1: header is not '" + header + "'");
      continue;
    }
    if (line.empty()) continue;
    const auto f = split_csv_line(line);
    if (f.size() != 9) throw std::logic_error("results/accuracy/bands.csv:" + std::to_string(n) + ": 9 fields expected");
    BandRow b;
    b.machine_class = f[0], b.workload = f[1], b.strategy = f[2], b.split = f[3];
    if (b.split != "in" && b.split != "out")
      throw std::logic_error("results/accuracy/bands.csv:" + std::to_string(n) + ": split must be in or out");
    b.rows = static_cast<int>(number(f[4], n));
    b.mean_abs = number(f[5], n), b.median_abs = number(f[6], n), b.p90_abs = number(f[7], n);
    b.sets = f[8];
    out.push_back(std::move(b));
  }
  return out;
}

const std::vector<BandRow>& bands() {
  static const std::vector<BandRow> table = parse_bands(embedded_bands_csv());
  return table;
}

RunClass classify(const trace::Header& header, const hw::HardwareProfile& hw, const placement::Placement& p,
                  const result::Summary& summary) {
  RunClass c;
  c.machine_class = hw.gpu.provenance;
  c.workload = summary.decode_steps > 0 ? "decode" : summary.iteration_steps > 0 ? "diffusion" : "prefill";
  if (p.managed.enabled && placement::paged_managed_usage(header, p).total() > 0) {
    c.strategy = placement::paged_managed_usage(header, p).total() > placement::managed_gpu_capacity(header, hw, p)
                     ? "managed-oversubscribed"
                     : "managed";
    return c;
  }
  bool execute_cpu = false, peer = false, copied = false;
  for (const auto& t : header.tensors) {
    if (t.kind != trace::TensorKind::Weight || p.device[t.id] == placement::kComputeGpu) continue;
    if (p.path[t.id] == placement::Path::Execute && p.device[t.id] == placement::kCpu) execute_cpu = true;
    else if (p.device[t.id] > placement::kComputeGpu) peer = true;
    else copied = true;
  }
  c.strategy = execute_cpu ? "cpu-execute" : copied ? "host-copy" : peer ? "peer" : "resident";
  return c;
}

Band band_for(const RunClass& run) {
  Band b;
  b.run = run;
  for (const char* split : {"in", "out"}) {
    const BandRow* row = find(run.machine_class, run.workload, run.strategy, split);
    if (row) (std::string(split) == "in" ? b.in_sample : b.out_of_sample) = *row;
  }
  if (!b.in_sample && !b.out_of_sample) {
    b.strategy_fallback = true;
    if (const BandRow* row = find(run.machine_class, run.workload, "*", "in")) b.in_sample = *row;
    if (const BandRow* row = find(run.machine_class, run.workload, "*", "out")) b.out_of_sample = *row;
  }
  return b;
}

std::string Band::text() const {
  const std::string what = machine_words(run.machine_class) + ", " + run.workload + ", " + run.strategy;
  if (!in_sample && !out_of_sample) {
    std::string s = "not validated: no validation row of a " + machine_words(run.machine_class) + " (" + run.workload + ")";
    if (const BandRow* m = find("measured", run.workload, run.strategy, "in"))
      s += "; on measured GPU kinds this strategy is " + percent(m->mean_abs) + " (" + std::to_string(m->rows) + " rows)";
    return s;
  }
  auto part = [](const std::optional<BandRow>& r, const char* name) {
    if (!r) return std::string(name) + ": none";
    return std::string(name) + " ±" + percent(r->mean_abs) + " (" + std::to_string(r->rows) + " rows)";
  };
  const BandRow& head = in_sample ? *in_sample : *out_of_sample;
  std::string s = "±" + percent(head.mean_abs) + " mean abs error, " + what;
  if (strategy_fallback) s += " (no rows of this strategy: every " + run.workload + " row of the class)";
  s += "; " + part(in_sample, "in-sample") + ", " + part(out_of_sample, "out-of-sample");
  return s;
}

}  // namespace tiersim::accuracy
