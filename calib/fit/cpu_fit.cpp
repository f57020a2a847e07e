#include "fit/cpu_fit.hpp"

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "config/strict_reader.hpp"
#include "core/error.hpp"

namespace tiersim::calib {
namespace {

constexpr const char* kHeader = "kind,type,rows,cols,batch,threads,seconds,bytes,gbps,gflops";

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = line.find(',', start);
    out.push_back(line.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

double number(const std::string& text, const std::string& file, int line, const char* column) {
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    if (used != text.size() || !std::isfinite(v) || v < 0) throw std::invalid_argument("");
    return v;
  } catch (const std::exception&) {
    throw InputError(file, line, column, "expected a non-negative number, got '" + text + "'");
  }
}

// One measurement row of cpu_matmul_bench's CSV, checked.
struct BenchRow {
  std::string kind, type;
  double rows = 0, cols = 0, batch = 0;
  int threads = 0;
  double seconds = 0, bytes = 0;
};

// The rows, and the number of lines read (what an error about the whole file names).
struct BenchRows {
  std::vector<BenchRow> rows;
  int lines = 0;
};

BenchRows read_bench_rows(const std::string& csv_text, const std::string& file) {
  std::istringstream in(csv_text);
  std::string line;
  int n = 0;
  if (!std::getline(in, line)) throw InputError(file, 1, "header", "empty file");
  ++n;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line != kHeader) throw InputError(file, 1, "header", std::string("expected '") + kHeader + "', got '" + line + "'");
  BenchRows out;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const auto f = split(line);
    if (f.size() != 10) throw InputError(file, n, "row", "expected 10 columns, got " + std::to_string(f.size()));
    BenchRow r;
    r.kind = f[0];
    r.type = f[1];
    r.rows = number(f[2], file, n, "rows");
    r.cols = number(f[3], file, n, "cols");
    r.batch = number(f[4], file, n, "batch");
    const double threads = number(f[5], file, n, "threads");
    r.seconds = number(f[6], file, n, "seconds");
    r.bytes = number(f[7], file, n, "bytes");
    if (threads < 1 || threads > 4096 || threads != std::floor(threads))
      throw InputError(file, n, "threads", "must be a whole number from 1 to 4096");
    r.threads = static_cast<int>(threads);
    if (!(r.seconds > 0) || !(r.bytes > 0)) throw InputError(file, n, "seconds", "a measurement needs seconds > 0 and bytes > 0");
    if ((r.kind == "gemv" || r.kind == "gemv_id") && !config::is_ggml_type_name(r.type))
      throw InputError(file, n, "type", "a ggml weight type in lower case (q4_k), got '" + r.type + "'");
    out.rows.push_back(r);
  }
  out.lines = n;
  return out;
}

// Bytes and seconds summed over measurements: a rate is their quotient.
void add_to(std::pair<double, double>& sum, double bytes, double seconds) {
  sum.first += bytes;
  sum.second += seconds;
}

std::vector<std::pair<double, double>> curve_of(const std::map<int, std::pair<double, double>>& m) {
  std::vector<std::pair<double, double>> c;
  for (const auto& [threads, bs] : m) c.emplace_back(threads, bs.first / bs.second);
  return c;
}

}  // namespace

CpuFit fit_cpu_kernels(const std::string& csv_text, const std::string& file, int cores) {
  if (cores < 1 || cores > 4096) throw InputError(file, 0, "cores", "must be from 1 to 4096");
  // (threads) -> bytes and seconds summed, for reads and for each type's batch-1 products.
  std::map<int, std::pair<double, double>> reads;
  std::map<std::string, std::map<int, std::pair<double, double>>> gemv;
  const BenchRows csv = read_bench_rows(csv_text, file);
  for (const BenchRow& r : csv.rows) {
    if (r.kind == "read") add_to(reads[r.threads], r.bytes, r.seconds);
    else if (r.kind == "gemv" && r.batch == 1) add_to(gemv[r.type][r.threads], r.bytes, r.seconds);
  }
  if (reads.empty()) throw InputError(file, csv.lines, "kind", "no 'read' rows: the read bandwidth was not measured");
  CpuFit out;
  out.kernels.cores = cores;
  out.kernels.read_bandwidth = curve_of(reads);
  for (const auto& [type, m] : gemv) out.kernels.gemv[type] = curve_of(m);
  std::ostringstream r;
  r << "| threads | read GB/s";
  for (const auto& [type, m] : gemv) r << " | " << type << " GEMV GB/s";
  r << " |\n|---|---";
  for (std::size_t i = 0; i < gemv.size(); ++i) r << "|---";
  r << "|\n";
  for (const auto& [threads, bs] : reads) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "| %d | %.1f", threads, bs.first / bs.second / 1e9);
    r << buf;
    for (const auto& [type, m] : gemv) {
      const auto it = m.find(threads);
      if (it == m.end()) r << " | -";
      else {
        std::snprintf(buf, sizeof buf, " | %.1f", it->second.first / it->second.second / 1e9);
        r << buf;
      }
    }
    r << " |\n";
  }
  out.report = r.str();
  return out;
}

void add_cpu_expert_kernels(CpuFit& fit, const std::string& main_csv_text, const std::string& main_file,
                            const std::vector<std::pair<std::string, std::string>>& runs) {
  using Key = std::pair<std::string, int>;  // (type, threads)
  using Shape = std::pair<double, double>;  // (rows, cols)
  auto dense_by_shape = [](const std::vector<BenchRow>& rows) {
    std::map<Key, std::map<Shape, std::pair<double, double>>> out;
    for (const BenchRow& r : rows)
      if (r.kind == "gemv" && r.batch == 1) add_to(out[{r.type, r.threads}][{r.rows, r.cols}], r.bytes, r.seconds);
    return out;
  };
  const auto main_dense = dense_by_shape(read_bench_rows(main_csv_text, main_file).rows);
  std::map<Key, std::pair<double, double>> experts;
  std::map<Key, std::map<Shape, std::pair<double, double>>> other_dense;
  std::string files;
  for (const auto& [text, file] : runs) {
    const auto rows = read_bench_rows(text, file).rows;
    for (const BenchRow& r : rows)
      if (r.kind == "gemv_id" && r.batch == 1) add_to(experts[{r.type, r.threads}], r.bytes, r.seconds);
    for (const auto& [key, shapes] : dense_by_shape(rows))
      for (const auto& [shape, bs] : shapes) add_to(other_dense[key][shape], bs.first, bs.second);
    files += (files.empty() ? "" : ", ") + file;
  }
  if (experts.empty()) throw InputError(runs.empty() ? main_file : runs.front().second, 0, "kind", "no batch-1 'gemv_id' rows");
  std::ostringstream r;
  r << "\n## ggml's MUL_MAT_ID on the CPU (" << files << ")\n\nThe experts' rate of the used weights, and as carried "
       "to this profile: times the dense rate here over the shapes both runs measured, divided by the other run's.\n\n"
       "| type | threads | experts GB/s (that run) | dense, here / there | experts GB/s (here) |\n|---|---|---|---|---|\n";
  std::map<std::string, std::map<int, std::pair<double, double>>> curves;
  for (const auto& [key, bs] : experts) {
    const auto here = main_dense.find(key);
    const auto there = other_dense.find(key);
    double hb = 0, hs = 0, tb = 0, ts = 0;
    if (here != main_dense.end() && there != other_dense.end())
      for (const auto& [shape, a] : there->second) {
        const auto m = here->second.find(shape);
        if (m == here->second.end()) continue;
        hb += m->second.first, hs += m->second.second, tb += a.first, ts += a.second;
      }
    if (!(hs > 0) || !(ts > 0))
      throw InputError(runs.front().second, 0, "gemv",
                       "no dense product of a shape " + main_file + " also has, for " + key.first + " at " +
                           std::to_string(key.second) + " threads: nothing relates the experts to this profile's host");
    const double scale = (hb / hs) / (tb / ts);
    curves[key.first][key.second] = {bs.first * scale, bs.second};
    char buf[160];
    std::snprintf(buf, sizeof buf, "| %s | %d | %.1f | %.3f | %.1f |\n", key.first.c_str(), key.second,
                  bs.first / bs.second / 1e9, scale, bs.first * scale / bs.second / 1e9);
    r << buf;
  }
  for (const auto& [type, m] : curves) fit.kernels.gemv_id[type] = curve_of(m);
  fit.report += r.str();
}

std::string default_cpu_source(const std::string& csv_path, const std::vector<std::string>& expert_paths) {
  std::string s = "measured: " + csv_path + " (experiments/llamacpp/cpu_matmul_bench: ggml's CPU kernels, batch 1, by threads), "
                  "fitted by tiersim_fit --cpu";
  if (expert_paths.empty()) return s;
  s += "; gemv_id: ggml's MUL_MAT_ID (cpu_matmul_bench --experts) from ";
  for (std::size_t i = 0; i < expert_paths.size(); ++i) s += (i ? " + " : "") + expert_paths[i];
  return s + ", scaled by the dense rate here over the shapes both runs measured against that run's (--cpu-experts)";
}

std::string with_cpu_kernels(const std::string& text, const std::string& file, const hw::CpuKernelSpec& k,
                             const std::string& source) {
  auto rate = [](double bps) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "\"%.4g GB/s\"", bps / 1e9);
    return std::string(buf);
  };
  auto curve = [&](const std::vector<std::pair<double, double>>& c) {
    std::string out = "[";
    for (std::size_t i = 0; i < c.size(); ++i)
      out += (i ? ", [" : "[") + std::to_string(static_cast<int>(c[i].first)) + ", " + rate(c[i].second) + "]";
    return out + "]";
  };
  std::string quoted;
  for (char c : source) quoted += c == '"' ? std::string("\\\"") : std::string(1, c);
  std::string block = "  cpu_kernels:\n    source: \"" + quoted + "\"\n    cores: " + std::to_string(k.cores) +
                      "\n    read_bandwidth: " + curve(k.read_bandwidth) + "\n    gemv:\n";
  for (const auto& [type, c] : k.gemv) block += "      " + type + ": " + curve(c) + "\n";
  if (k.gemv.empty()) block.replace(block.size() - 1, 1, " {}\n");
  if (!k.gemv_id.empty()) {
    block += "    gemv_id:\n";
    for (const auto& [type, c] : k.gemv_id) block += "      " + type + ": " + curve(c) + "\n";
  }
  // The host section and its op_overhead line; an existing cpu_kernels block (indented deeper) goes.
  const auto host = text.find("\nhost:\n");
  if (host == std::string::npos) throw InputError(file, 0, "host", "no top-level 'host:' section to add cpu_kernels to");
  std::string out = text;
  const auto kernels = out.find("\n  cpu_kernels:", host);
  const auto next_section = [&](std::size_t from) {
    std::size_t at = from;
    while ((at = out.find('\n', at)) != std::string::npos && at + 1 < out.size() && (out[at + 1] == ' ' || out[at + 1] == '#'))
      ++at;
    return at == std::string::npos ? out.size() : at;
  };
  const auto host_end = next_section(host + 1);
  if (kernels != std::string::npos && kernels < host_end) {
    std::size_t end = out.find('\n', kernels + 1);
    while (end != std::string::npos && out.compare(end + 1, 4, "    ") == 0) end = out.find('\n', end + 1);
    out.erase(kernels, (end == std::string::npos ? out.size() : end) - kernels);
  }
  const auto overhead = out.find("\n  op_overhead:", host);
  if (overhead == std::string::npos || overhead > next_section(host + 1))
    throw InputError(file, 0, "host.op_overhead", "the host section has no op_overhead line to put cpu_kernels after");
  const auto line_end = out.find('\n', overhead + 1);
  out.insert(line_end == std::string::npos ? out.size() : line_end + 1, block);
  return out;
}

}  // namespace tiersim::calib
