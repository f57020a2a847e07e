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
  // A VAE's decode or encode and a text encoder's prompt are prefill-like steps, validated apart.
  if (const auto f = header.meta.find("family"); f != header.meta.end()) {
    if (f->second == "vae" || f->second == "wan-vae") c.workload = "vae";
    if (f->second == "t5" || f->second == "clip_text_model" || f->second == "qwen2_5_vl") c.workload = "text-encoder";
  }
  if (const double paged = p.managed.enabled ? placement::paged_managed_usage(header, p).total() : 0.0; paged > 0) {
    c.strategy = paged > placement::managed_gpu_capacity(header, hw, p) ? "managed-oversubscribed" : "managed";
    return c;
  }
  bool execute_cpu = false, peer = false, copied = false;
  for (const auto& t : header.tensors) {
    // The token embedding (layer -1) is gathered a row at a time; llama.cpp always keeps it in host memory, and its
    // home does not make a run an offloaded one (the validation rows file -ngl 99 as resident).
    if (t.kind != trace::TensorKind::Weight || t.layer < 0 || p.device[t.id] == placement::kComputeGpu) continue;
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
  auto take = [&](const std::string& machine, const std::string& strategy, Band::Basis basis) {
    const BandRow* in = find(machine, run.workload, strategy, "in");
    const BandRow* out = find(machine, run.workload, strategy, "out");
    if (!in && !out) return false;
    if (in) b.in_sample = *in;
    if (out) b.out_of_sample = *out;
    b.basis = basis;
    return true;
  };
  // A band made of measured GPU kinds' rows, for a decode: what another host with the shipped host costs adds.
  auto other_host = [&]() {
    if (run.workload != "decode" || !(run.machine_class == "measured" || b.basis == Band::Basis::MeasuredKinds)) return b;
    const BandRow* other = find("measured-other-host", run.workload, run.strategy, "in");
    if (!other) other = find("measured-other-host", run.workload, "*", "in");
    if (other) b.other_host = *other;
    return b;
  };
  if (take(run.machine_class, run.strategy, Band::Basis::Exact)) return other_host();
  if (run.machine_class != "measured" && take("measured", run.strategy, Band::Basis::MeasuredKinds)) return other_host();
  take(run.machine_class, "*", Band::Basis::AnyStrategy);
  return other_host();
}

const char* basis_name(Band::Basis basis) {
  switch (basis) {
    case Band::Basis::Exact: return "exact";
    case Band::Basis::MeasuredKinds: return "measured-kinds";
    case Band::Basis::AnyStrategy: return "any-strategy";
    case Band::Basis::None: break;
  }
  return "none";
}

std::string Band::short_text() const {
  auto pc = [](double share) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f%%", 100 * share);
    return std::string(buf);
  };
  if (basis == Basis::None) return "not validated";
  const std::string errors = (in_sample ? "±" + pc(in_sample->mean_abs) : std::string("-")) +
                             (out_of_sample ? " / ±" + pc(out_of_sample->mean_abs) + " out" : std::string());
  if (basis == Basis::MeasuredKinds) return "not validated (measured kinds " + errors + ")";
  return basis == Basis::AnyStrategy ? errors + " (any strategy)" : errors;
}

std::string Band::text() const {
  auto part = [](const std::optional<BandRow>& r, const char* name) {
    if (!r) return std::string(name) + ": none";
    return std::string(name) + " ±" + percent(r->mean_abs) + " (" + std::to_string(r->rows) + " rows)";
  };
  const std::string splits = part(in_sample, "in-sample") + ", " + part(out_of_sample, "out-of-sample");
  const std::string what = run.workload + ", " + run.strategy;
  if (basis == Basis::None)
    return "not validated: no validation row of a " + machine_words(run.machine_class) + " (" + run.workload + ")";
  const BandRow& head = in_sample ? *in_sample : *out_of_sample;
  std::string s;
  if (basis == Basis::MeasuredKinds) {
    s = "not validated on a " + machine_words(run.machine_class) + "; on measured GPU kinds " + what + " is ±" +
        percent(head.mean_abs) + " mean abs error (" + splits + ")";
  } else {
    s = "±" + percent(head.mean_abs) + " mean abs error, " + machine_words(run.machine_class) + ", " + what;
    if (basis == Basis::AnyStrategy) s += " (no rows of this strategy: every " + run.workload + " row of the class)";
    s += "; " + splits;
  }
  if (other_host)
    s += std::string("; on another host ") + (basis == Basis::MeasuredKinds ? "of those kinds" : "of this GPU kind") +
         " (host costs not recalibrated) ±" + percent(other_host->mean_abs) + " (" + std::to_string(other_host->rows) +
         " rows" + (other_host->strategy == "*" ? ", every strategy" : "") + ")";
  return basis == Basis::MeasuredKinds ? s + "; expect more on this GPU" : s;
}

}  // namespace tiersim::accuracy
