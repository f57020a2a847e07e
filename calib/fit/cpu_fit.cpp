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

}  // namespace

CpuFit fit_cpu_kernels(const std::string& csv_text, const std::string& file, int cores) {
  if (cores < 1 || cores > 4096) throw InputError(file, 0, "cores", "must be from 1 to 4096");
  std::istringstream in(csv_text);
  std::string line;
  int n = 0;
  if (!std::getline(in, line)) throw InputError(file, 1, "header", "empty file");
  ++n;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line != kHeader) throw InputError(file, 1, "header", std::string("expected '") + kHeader + "', got '" + line + "'");
  // (threads) -> bytes and seconds summed, for reads and for each type's batch-1 products.
  std::map<int, std::pair<double, double>> reads;
  std::map<std::string, std::map<int, std::pair<double, double>>> gemv;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const auto f = split(line);
    if (f.size() != 10) throw InputError(file, n, "row", "expected 10 columns, got " + std::to_string(f.size()));
    const std::string& kind = f[0];
    const double batch = number(f[4], file, n, "batch");
    const double threads = number(f[5], file, n, "threads");
    const double seconds = number(f[6], file, n, "seconds");
    const double bytes = number(f[7], file, n, "bytes");
    if (threads < 1 || threads > 4096 || threads != std::floor(threads))
      throw InputError(file, n, "threads", "must be a whole number from 1 to 4096");
    if (!(seconds > 0) || !(bytes > 0)) throw InputError(file, n, "seconds", "a measurement needs seconds > 0 and bytes > 0");
    if (kind == "read") {
      auto& r = reads[static_cast<int>(threads)];
      r.first += bytes, r.second += seconds;
    } else if (kind == "gemv" && batch == 1) {
      if (!config::is_ggml_type_name(f[1]))
        throw InputError(file, n, "type", "a ggml weight type in lower case (q4_k), got '" + f[1] + "'");
      auto& r = gemv[f[1]][static_cast<int>(threads)];
      r.first += bytes, r.second += seconds;
    }
  }
  if (reads.empty()) throw InputError(file, n, "kind", "no 'read' rows: the read bandwidth was not measured");
  CpuFit out;
  out.kernels.cores = cores;
  auto curve = [](const std::map<int, std::pair<double, double>>& m) {
    std::vector<std::pair<double, double>> c;
    for (const auto& [threads, bs] : m) c.emplace_back(threads, bs.first / bs.second);
    return c;
  };
  out.kernels.read_bandwidth = curve(reads);
  for (const auto& [type, m] : gemv) out.kernels.gemv[type] = curve(m);
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

std::string default_cpu_source(const std::string& csv_path) {
  return "measured: " + csv_path + " (experiments/llamacpp/cpu_matmul_bench: ggml's CPU kernels, batch 1, by threads), "
         "fitted by tiersim_fit --cpu";
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
