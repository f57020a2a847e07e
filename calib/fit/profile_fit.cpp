#include "fit/profile_fit.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "core/error.hpp"
#include "fit/fp32_gemm_fit.hpp"
#include "fit/advised_cycle_fit.hpp"
#include "fit/oversubscribe_fit.hpp"
#include "core/units.hpp"

namespace tiersim::calib {

AffineFit fit_transfer(const std::vector<std::pair<double, double>>& pts) {
  if (pts.size() < 2) throw std::invalid_argument("a transfer fit needs at least two sizes");
  Eigen::MatrixXd A(static_cast<Eigen::Index>(pts.size()), 2);
  Eigen::VectorXd b(static_cast<Eigen::Index>(pts.size()));
  for (std::size_t i = 0; i < pts.size(); ++i) {
    const double w = 1.0 / pts[i].second;  // relative error: divide each equation by its time
    A(static_cast<Eigen::Index>(i), 0) = w;
    A(static_cast<Eigen::Index>(i), 1) = pts[i].first * w;
    b(static_cast<Eigen::Index>(i)) = 1.0;
  }
  const Eigen::Vector2d x = A.colPivHouseholderQr().solve(b);
  AffineFit f;
  f.latency = std::max(0.0, x(0));
  f.bandwidth = 1.0 / x(1);
  if (!(f.bandwidth > 0) || !std::isfinite(f.bandwidth)) throw std::invalid_argument("transfer fit gave no positive bandwidth");
  double sq = 0;
  for (const auto& [bytes, t] : pts) {
    const double rel = (f.latency + bytes / f.bandwidth - t) / t;
    sq += rel * rel;
    f.max_relative = std::max(f.max_relative, std::fabs(rel));
  }
  f.rms_relative = std::sqrt(sq / static_cast<double>(pts.size()));
  f.points = pts.size();
  return f;
}

namespace {

std::string gbs(double bytes_per_s) {
  char b[48];
  std::snprintf(b, sizeof b, "%.4g GB/s", bytes_per_s / 1e9);
  return b;
}
std::string us(double s) {
  char b[48];
  std::snprintf(b, sizeof b, "%.4g us", s * 1e6);
  return b;
}
std::string tflops(double f) {
  char b[48];
  std::snprintf(b, sizeof b, "%.5g TFLOP/s", f / 1e12);
  return b;
}
std::string gib(double bytes) {
  char b[48];
  std::snprintf(b, sizeof b, "%.4f GiB", bytes / 1073741824.0);
  return b;
}
std::string num(double v, const char* fmt = "%.4g") {
  char b[48];
  std::snprintf(b, sizeof b, fmt, v);
  return b;
}
std::string yaml_quote(std::string s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

struct Curve {
  AffineFit fit;
  std::vector<std::pair<double, double>> points;  // bytes, effective B/s
};

Curve fit_curve(const RawMeasurements& raw, const std::string& benchmark, const std::string& prefix) {
  Curve c;
  std::vector<std::pair<double, double>> pts;
  for (const RawRow* r : raw.find(benchmark, prefix)) {
    pts.emplace_back(r->work, r->median);
    c.points.emplace_back(r->work, r->rate());
  }
  if (pts.size() < 2) throw InputError(raw.file, 0, benchmark + "," + prefix, "too few sizes measured to fit a curve");
  std::sort(pts.begin(), pts.end());
  std::sort(c.points.begin(), c.points.end());
  c.fit = fit_transfer(pts);
  return c;
}

std::string curve_yaml(const Curve& c) {
  std::string s = "{bandwidth: \"" + gbs(c.fit.bandwidth) + "\", latency: \"" + us(c.fit.latency) + "\",\n      points: [";
  for (std::size_t i = 0; i < c.points.size(); ++i) {
    if (i) s += ", ";
    s += "[\"" + num(c.points[i].first, "%.0f") + " B\", \"" + gbs(c.points[i].second) + "\"]";
  }
  return s + "]}";
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[(v.size() - 1) / 2];
}

// How many times a matrix product reads a host-resident weight, by its rows (calib's remote_gemm: cuBLAS bf16 GEMM
// on managed PreferredLocation=CPU + AccessedBy weights): per shape, each M's time over the median time at M <= 64
// (where every shape reads its weight once); at each M above 64 the median over the shapes, at least 1. Empty when
// the raw file has no such rows.
std::vector<std::pair<int, double>> remote_gemm_reads(const RawMeasurements& raw) {
  std::map<std::pair<int, int>, std::map<int, double>> by_shape;  // {out, in} -> M -> median seconds
  for (const RawRow* r : raw.find("remote_gemm", "gemm_bf16_managed_weights_")) {
    int m = 0, out = 0, in = 0;
    char tail = 0;
    if (std::sscanf(r->variant.c_str(), "gemm_bf16_managed_weights_m%d_out%d_in%d%c", &m, &out, &in, &tail) != 3 || m < 1)
      throw InputError(raw.file, 0, "remote_gemm," + r->variant, "expected gemm_bf16_managed_weights_m<M>_out<N>_in<K>");
    by_shape[{out, in}][m] = r->median;
  }
  std::map<int, std::vector<double>> reads;
  for (const auto& [shape, times] : by_shape) {
    std::vector<double> once;
    for (const auto& [m, t] : times)
      if (m <= 64) once.push_back(t);
    if (once.empty()) continue;
    const double one = median_of(once);
    for (const auto& [m, t] : times)
      if (m > 64) reads[m].push_back(t / one);
  }
  std::vector<std::pair<int, double>> out;
  if (!reads.empty()) out.emplace_back(64, 1.0);
  for (const auto& [m, v] : reads) out.emplace_back(m, std::max(1.0, median_of(v)));
  return out;
}

// cuBLAS bf16 GEMVs with a host-resident input vector, per shape (calib's remote_gemv): {input bytes, weight bytes,
// median seconds with the weight on the GPU, with the weight host-resident too}, ascending. Empty without such rows;
// a shape with one of the two placements and not the other is refused.
std::vector<std::array<double, 4>> remote_gemv_rows(const RawMeasurements& raw) {
  std::map<std::pair<int, int>, std::array<double, 2>> by_shape;  // {in, out} -> {input, both} seconds
  for (const char* placement : {"input", "both"})
    for (const RawRow* r : raw.find("remote_gemv", std::string("gemv_bf16_") + placement + "_")) {
      int out = 0, in = 0;
      char tail = 0;
      const std::string format = std::string("gemv_bf16_") + placement + "_out%d_in%d%c";
      if (std::sscanf(r->variant.c_str(), format.c_str(), &out, &in, &tail) != 2 || out < 1 || in < 1)
        throw InputError(raw.file, 0, "remote_gemv," + r->variant, "expected gemv_bf16_" + std::string(placement) + "_out<N>_in<K>");
      by_shape.try_emplace({in, out}, std::array<double, 2>{0, 0})
          .first->second[std::string(placement) == "input" ? 0 : 1] = r->median;
    }
  std::vector<std::array<double, 4>> out;
  for (const auto& [shape, t] : by_shape) {
    if (!(t[0] > 0 && t[1] > 0))
      throw InputError(raw.file, 0, "remote_gemv,gemv_bf16_*_out" + std::to_string(shape.second) + "_in" + std::to_string(shape.first),
                       "needs both its input and its both row");
    out.push_back({2.0 * shape.first, 2.0 * shape.first * shape.second, t[0], t[1]});
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A fresh managed range's first GPU write, per size (calib's fresh_touch): the size over the first write's median
// time less the populated write's, ascending sizes. Empty when the raw file has no such rows.
std::vector<std::pair<double, double>> fresh_touch_points(const RawMeasurements& raw) {
  std::vector<std::pair<double, double>> out;
  for (const RawRow* first : raw.find("um_fresh_touch", "first_write_")) {
    const std::string size = first->variant.substr(std::string("first_write_").size());
    const RawRow* again = raw.one("um_fresh_touch", "populated_write_" + size);
    if (!again || again->variant != "populated_write_" + size)
      throw InputError(raw.file, 0, "um_fresh_touch," + first->variant, "no populated_write_" + size + " row beside it");
    const double extra = first->median - again->median;
    if (!(extra > 0)) throw InputError(raw.file, 0, "um_fresh_touch," + first->variant, "the first write is not slower than the second");
    out.emplace_back(first->work, first->work / extra);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

FitOutput fit_profile(const RawMeasurements& raw, const hw::HardwareProfile& base, const std::string& name,
                      const std::vector<RawMeasurements>& decoder_passes, const RawMeasurements* advised_cycle) {
  auto need = [&](const std::string& b, const std::string& prefix) {
    const RawRow* r = raw.one(b, prefix);
    if (!r) throw InputError(raw.file, 0, b + "," + prefix, "measurement missing from the raw CSV");
    return r;
  };
  const std::string when = raw.fact("measured_at", "unknown date");
  const std::string by = "measured by tiersim_calib on " + when + " (" + raw.fact("gpu_name") + ", driver " +
                         raw.fact("nvidia_driver") + ", CUDA runtime " + raw.fact("cuda_runtime") + ")";

  // GPU.
  const double hbm = need("hbm_read", "stream_")->rate();
  std::vector<double> gemv_eff;
  for (const RawRow* r : raw.find("gemv", "bf16_")) gemv_eff.push_back(std::min(1.0, r->rate() / hbm));
  const double mem_eff = median_of(gemv_eff);
  double best_bf16 = 0, best_fp16 = 0;
  std::vector<double> big_gemm_bf16;
  for (const RawRow* r : raw.find("gemm", "bf16_")) {
    best_bf16 = std::max(best_bf16, r->rate());
    if (r->variant.find("_m2048_") != std::string::npos || r->variant.find("_m512_") != std::string::npos)
      big_gemm_bf16.push_back(r->rate());
  }
  for (const RawRow* r : raw.find("gemm", "fp16_")) best_fp16 = std::max(best_fp16, r->rate());
  double best_fp32 = 0;  // tiersim_calib --only fp32_gemm (since 2026-11-24); the datasheet's rate without it
  for (const RawRow* r : raw.find("gemm", "fp32_")) best_fp32 = std::max(best_fp32, r->rate());
  // fp32 GEMMs by rows and output features where the run swept M below 512 (since 2026-11-28): the row tile and the
  // curve by output elements (fit/fp32_gemm_fit.hpp); runs of M 512 and 2048 alone give none (compute_efficiency).
  Fp32GemmFit fp32;
  {
    std::vector<Fp32GemmRow> rows;
    for (const RawRow* r : raw.find("gemm", "fp32_")) {
      int m = 0, out = 0, in = 0;
      if (std::sscanf(r->variant.c_str(), "fp32_m%d_out%d_in%d", &m, &out, &in) != 3 || m <= 0 || out <= 0)
        throw InputError(raw.file, 0, "gemm," + r->variant, "an fp32 GEMM variant is fp32_m<M>_out<N>_in<K>");
      rows.push_back({double(m), double(out), std::clamp(r->rate() / best_fp32, 0.01, 1.0)});
    }
    fp32 = fit_fp32_gemm(rows);
  }
  const std::vector<std::pair<double, double>>& fp32_curve = fp32.curve;
  if (best_bf16 <= 0) throw InputError(raw.file, 0, "gemm,bf16_", "no bf16 GEMM measured");
  for (double& v : big_gemm_bf16) v /= best_bf16;
  const double compute_eff = std::max(0.01, median_of(big_gemm_bf16));
  // Attention without a mask (experiments/calibrate/sdpa_rate.py --csv, an --extra file): its rate over the best bf16
  // GEMM, by the op's FLOPs; shapes of equal FLOPs averaged. Causal rows (sdpa_causal_) are kept, not fitted.
  std::vector<std::pair<double, double>> attention;
  for (const RawRow* r : raw.find("attention", "sdpa_bf16_")) {
    const double eff = std::clamp(r->rate() / best_bf16, 0.01, 1.0);
    auto same = std::find_if(attention.begin(), attention.end(), [&](const auto& p) { return p.first == r->work; });
    if (same == attention.end()) attention.emplace_back(r->work, eff);
    else same->second = (same->second + eff) / 2;
  }
  std::sort(attention.begin(), attention.end());
  // cuDNN convolutions (experiments/calibrate/conv_rate.py --csv, an --extra file: conv3d_bf16_c96x96_k3x3x3_t6_384x512,
  // conv2d_bf16_c384x192_k3x3_t4_192x256): the rate over the best bf16 GEMM by kernel and channels, each at its output
  // positions (the FLOPs over 2 x kernel volume x in x out); rows of equal positions averaged.
  std::map<std::string, std::vector<std::pair<double, double>>> convolution;
  for (const RawRow* r : raw.find("convolution", "conv")) {
    const std::string& v = r->variant;
    const std::size_t c = v.find("_c"), x = v.find('x', c), k = v.find("_k", x), t = v.find("_t", k);
    trace::ConvShape shape;
    bool ok = c != std::string::npos && x != std::string::npos && k != std::string::npos && t != std::string::npos;
    try {
      if (ok) {
        const std::string in = v.substr(c + 2, x - c - 2), out = v.substr(x + 1, k - x - 1);
        const auto digits = [](const std::string& n) {
          return !n.empty() && n.size() <= 7 && n.find_first_not_of("0123456789") == std::string::npos;
        };
        ok = digits(in) && digits(out);
        const unsigned long ci = ok ? std::stoul(in) : 0, co = ok ? std::stoul(out) : 0;
        ok = ok && ci >= 1 && co >= 1 && ci <= (1ul << 20) && co <= (1ul << 20);
        shape.in = static_cast<std::uint32_t>(ci);
        shape.out = static_cast<std::uint32_t>(co);
        ok = ok && trace::parse_conv_kernel(std::string_view(v).substr(k + 2, t - k - 2), shape);
      }
    } catch (const std::exception&) {
      ok = false;
    }
    if (!ok) throw InputError(raw.file, 0, "convolution," + v, "expected a variant conv3d_bf16_cINxOUT_kKERNEL_t...");
    const double eff = std::clamp(r->rate() / best_bf16, 0.01, 1.0);
    const double positions = shape.positions(static_cast<std::uint64_t>(r->work));
    auto& pts = convolution[shape.kernel_name() + ":" + std::to_string(shape.in) + ":" + std::to_string(shape.out)];
    auto same = std::find_if(pts.begin(), pts.end(), [&](const auto& p) { return p.first == positions; });
    if (same == pts.end()) pts.emplace_back(positions, eff);
    else same->second = (same->second + eff) / 2;
  }
  for (auto& [key, pts] : convolution) std::sort(pts.begin(), pts.end());
  const RawRow* launch = need("launch", "device_empty");
  const double kernel_min = launch->median / launch->work;
  const RawRow* issue = need("launch", "issue_and_run_empty");
  const double gpu_total = std::stod(raw.fact("gpu_memory_total_bytes", "0"));
  const double gpu_free = std::stod(raw.fact("gpu_memory_free_bytes", "0"));
  if (gpu_total <= 0) throw InputError(raw.file, 0, "gpu_memory_total_bytes", "missing machine fact");
  const int gpu_count = std::stoi(raw.fact("gpu_count", "1"));

  // Host link.
  const Curve h2d_pinned = fit_curve(raw, "h2d", "pinned_"), d2h_pinned = fit_curve(raw, "d2h", "pinned_");
  const Curve h2d_pageable = fit_curve(raw, "h2d", "pageable_"), d2h_pageable = fit_curve(raw, "d2h", "pageable_");
  const double bidir = need("bidir", "pinned_")->rate();
  int gen = base.host_link.generation, width = base.host_link.width;
  {
    // "current gen, max gen, current width, max width"
    std::stringstream ss(raw.fact("pcie_link"));
    std::string cell;
    std::vector<int> v;
    while (std::getline(ss, cell, ',')) {
      try {
        v.push_back(std::stoi(cell));
      } catch (const std::exception&) {
      }
    }
    if (v.size() == 4) {
      gen = v[1];
      width = v[3];
    }
  }
  const bool have_peer = !raw.find("peer").empty();

  std::ostringstream y;
  y << "# Measured profile: written by tiersim_fit from " << raw.file << ".\n"
    << "# Each section's source says what was measured and what was taken from the base preset '" << base.name << "'.\n"
    << "tiersim_profile: 1\n"
    << "name: " << name << "\n"
    << "description: " << yaml_quote(raw.fact("gpu_name") + ", measured " + when + " by tiersim_calib") << "\n"
    << "facts:\n";
  for (const auto& [k, v] : raw.facts) {
    std::string key = k;
    for (char& c : key)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
    y << "  " << key << ": " << yaml_quote(v) << "\n";
  }
  auto fact_rate = [&](const std::string& key, const std::string& b, const std::string& prefix) {
    if (const RawRow* r = raw.one(b, prefix)) {
      if (r->work_unit == "bytes") y << "  " << key << ": " << yaml_quote(gbs(r->rate())) << "\n";
      else y << "  " << key << ": " << yaml_quote(us(r->median / r->work) + " per " + r->work_unit.substr(0, r->work_unit.size() - 1)) << "\n";
    }
  };
  fact_rate("zero_copy_stream_read_1GiB", "zero_copy", "stream_read_footprint_1GiB");
  fact_rate("zero_copy_stream_read_4GiB", "zero_copy", "stream_read_footprint_4GiB");
  fact_rate("zero_copy_stream_read_16GiB", "zero_copy", "stream_read_footprint_16GiB");
  fact_rate("zero_copy_gemv_5120x5120", "zero_copy", "gemv_bf16_host_weights_out5120_in5120");
  fact_rate("zero_copy_gemv_17408x5120", "zero_copy", "gemv_bf16_host_weights_out17408_in5120");
  fact_rate("zero_copy_gemv_5120x17408", "zero_copy", "gemv_bf16_host_weights_out5120_in17408");
  fact_rate("um_first_touch_migration", "um_first_touch", "");
  fact_rate("um_fault_serial_2MiB", "um_fault", "serial_");
  fact_rate("um_fault_batched_2MiB", "um_fault", "batched_one_touch_per_2MiB");
  fact_rate("um_fault_batched_64KiB", "um_fault", "batched_one_touch_per_64KiB");
  fact_rate("um_prefetch_to_gpu", "um_prefetch", "to_gpu");
  fact_rate("um_prefetch_to_cpu", "um_prefetch", "to_cpu");
  fact_rate("um_preferred_cpu_first_read", "um_preferred_cpu", "first_read");
  fact_rate("um_preferred_cpu_second_read", "um_preferred_cpu", "second_read");
  fact_rate("um_accessed_by_first_read", "um_accessed_by", "first_read");
  fact_rate("um_accessed_by_second_read", "um_accessed_by", "second_read");
  fact_rate("um_read_mostly_first_read", "um_read_mostly", "first_read");
  fact_rate("um_read_mostly_second_read", "um_read_mostly", "second_read");
  y << "  launch_issue_host: " << yaml_quote(us(issue->median / issue->work) + " per empty-kernel launch, host side") << "\n";

  y << "gpu:\n"
    << "  source: " << yaml_quote(by + ": memory from cudaMemGetInfo, reserved = memory in use before calib allocated, "
                                       "memory_bandwidth = streaming read of 4 GiB, memory_efficiency = median cuBLAS bf16 GEMV / streaming read, "
                                       "bf16/fp16 = best cuBLAS GEMM at LLM shapes, compute_efficiency = median M>=512 bf16 GEMM / best, "
                                       "kernel_min_time = back-to-back empty kernels; " +
                                       (attention.empty() ? std::string()
                                                          : "attention_efficiency = torch SDPA without a mask (sdpa_rate.py, ComfyUI's "
                                                            "cuDNN-first priority) over the best bf16 GEMM, by the op's FLOPs; ") +
                                       (convolution.empty() ? std::string()
                                                            : "convolution_efficiency = torch conv2d/conv3d bf16 on cuDNN "
                                                              "(conv_rate.py, layout transposes included) over the best "
                                                              "bf16 GEMM, by kernel and channels, by output positions; ") +
                                       (best_fp32 > 0 ? "fp32 = best cuBLAS fp32 GEMM without TF32; " : "") +
                                       (fp32_curve.empty() ? ""
                                                           : "fp32_gemm_efficiency = cuBLAS fp32 GEMM over the best, by "
                                                             "output elements (M x N) at whole row tiles of "
                                                             "fp32_gemm_row_tile (the tile of 16-128 rows whose padding "
                                                             "fits M 16-2048 best), the median of each octave; ") +
                                       (best_fp32 > 0 ? "tf32/fp8" : "fp32/tf32/fp8") +
                                       " rates from base preset '" + base.name + "' (datasheet)") << "\n"
    << "  name: " << yaml_quote(raw.fact("gpu_name")) << "\n"
    << "  count: " << gpu_count << "\n"
    << "  memory: \"" << gib(gpu_total) << "\"\n"
    << "  reserved: \"" << gib(std::max(0.0, gpu_total - gpu_free)) << "\"\n"
    << "  memory_bandwidth: \"" << gbs(hbm) << "\"\n"
    << "  memory_efficiency: " << num(mem_eff) << "\n"
    << "  compute:\n";
  for (const auto& [dtype, rate] : base.gpu.compute) {
    double v = rate;
    if (dtype == "bf16") v = best_bf16;
    if (dtype == "fp16" && best_fp16 > 0) v = best_fp16;
    if (dtype == "fp32" && best_fp32 > 0) v = best_fp32;
    y << "    " << dtype << ": \"" << tflops(v) << "\"\n";
  }
  y << "  compute_efficiency: " << num(compute_eff) << "\n"
    << "  kernel_min_time: \"" << us(kernel_min) << "\"\n"
    << "  provenance: measured\n";  // every speed-setting value of this section comes from calib's rows
  if (!attention.empty()) {
    y << "  attention_efficiency: [";
    for (std::size_t i = 0; i < attention.size(); ++i) {
      char b[64];
      std::snprintf(b, sizeof b, "%s[%.0f, %.4f]", i ? ", " : "", attention[i].first, attention[i].second);
      y << b;
    }
    y << "]\n";
  }
  if (!fp32_curve.empty()) {
    y << "  fp32_gemm_efficiency: [";
    for (std::size_t i = 0; i < fp32_curve.size(); ++i) {
      char b[64];
      std::snprintf(b, sizeof b, "%s[%.0f, %.4f]", i ? ", " : "", fp32_curve[i].first, fp32_curve[i].second);
      y << b;
    }
    y << "]\n"
      << "  fp32_gemm_row_tile: " << fp32.tile << "\n";
  }
  if (!convolution.empty()) {
    y << "  convolution_efficiency:\n";
    for (const auto& [key, pts] : convolution) {
      y << "    \"" << key << "\": [";
      for (std::size_t i = 0; i < pts.size(); ++i) {
        char b[64];
        std::snprintf(b, sizeof b, "%s[%.0f, %.4f]", i ? ", " : "", pts[i].first, pts[i].second);
        y << b;
      }
      y << "]\n";
    }
  }

  y << "host:\n"
    << "  source: " << yaml_quote("memory from /proc/meminfo (" + raw.fact("host_memory") + "), CPU '" + raw.fact("host_cpu") +
                                  "'; bandwidth, CPU rates and op overhead NOT measured: from base preset '" + base.name + "'") << "\n"
    << "  name: " << yaml_quote(raw.fact("host_cpu", base.host.name)) << "\n";
  double host_mem = base.host.memory;
  {
    const std::string m = raw.fact("host_memory");  // "131072000 kB"
    try {
      if (!m.empty()) host_mem = std::stod(m) * 1024.0;
    } catch (const std::exception&) {
    }
  }
  y << "  memory: \"" << gib(host_mem) << "\"\n"
    << "  memory_bandwidth: \"" << gbs(base.host.memory_bandwidth) << "\"\n"
    << "  memory_efficiency: " << num(base.host.memory_efficiency) << "\n"
    << "  compute:\n";
  for (const auto& [dtype, rate] : base.host.compute) y << "    " << dtype << ": \"" << tflops(rate) << "\"\n";
  y << "  compute_efficiency: " << num(base.host.compute_efficiency) << "\n"
    << "  op_overhead: \"" << us(base.host.op_overhead) << "\"\n";

  y << "host_link:\n"
    << "  source: " << yaml_quote(by + ": copies 4 KiB..1 GiB, latency + bytes/bandwidth fitted by least squares on relative error (tiersim_fit), measured points kept; "
                                       "bidirectional = both directions at once from pinned memory; generation/width from nvidia-smi" +
                                       (raw.find("d2h", "fresh_pageable_").empty()
                                            ? std::string()
                                            : "; d2h_fresh_pageable = torch .to(\"cpu\") into freshly allocated pageable memory "
                                              "(experiments/calibrate/fresh_d2h.py)")) << "\n"
    << "  type: pcie\n"
    << "  generation: " << gen << "\n"
    << "  width: " << width << "\n"
    << "  h2d_pinned: " << curve_yaml(h2d_pinned) << "\n"
    << "  d2h_pinned: " << curve_yaml(d2h_pinned) << "\n"
    << "  h2d_pageable: " << curve_yaml(h2d_pageable) << "\n"
    << "  d2h_pageable: " << curve_yaml(d2h_pageable) << "\n";
  if (raw.find("d2h", "fresh_pageable_").size() >= 2)
    y << "  d2h_fresh_pageable: " << curve_yaml(fit_curve(raw, "d2h", "fresh_pageable_")) << "\n";
  y
    << "  bidirectional: \"" << gbs(bidir) << "\"\n";
  Curve peer;
  if (have_peer) {
    peer = fit_curve(raw, "peer", "");
    y << "peer_link:\n"
      << "  source: " << yaml_quote(by + ": cudaMemcpyPeerAsync 4 KiB..1 GiB, fitted as the host link; bidirectional not measured (2x one direction assumed)") << "\n"
      << "  type: " << (base.peer_link ? base.peer_link->type : std::string("nvlink")) << "\n"
      << "  transfer: " << curve_yaml(peer) << "\n"
      << "  bidirectional: \"" << gbs(2 * peer.fit.bandwidth) << "\"\n";
  }
  // Managed memory. Fault cost model: a kernel that faults on n blocks moving b bytes stalls
  // n * block_overhead + b / migration_bandwidth (+ one fault latency). Two measurements give the two
  // unknowns: 512 sparse faults moving 64 KiB each, and a dense first touch of the whole buffer.
  const RawRow* sparse = raw.one("um_fault", "batched_one_touch_per_2MiB");
  const RawRow* dense = raw.one("um_first_touch", "");
  const RawRow* serial = raw.one("um_fault", "serial_");
  const RawRow* pf_gpu = raw.one("um_prefetch", "to_gpu");
  const RawRow* pf_cpu = raw.one("um_prefetch", "to_cpu");
  std::string oversub_report;  // what the past-VRAM fit read (for the report)
  if (sparse && dense && serial && pf_gpu && pf_cpu) {
    const double block = 2.0 * 1048576, big_page = 65536;
    Eigen::Matrix2d A;
    Eigen::Vector2d t;
    A << sparse->work, sparse->work * big_page, dense->work / block, dense->work;
    t << sparse->median, dense->median;
    const Eigen::Vector2d x = A.colPivHouseholderQr().solve(t);
    const double block_overhead = std::max(0.0, x(0));
    const double migration_bw = x(1) > 0 ? 1.0 / x(1) : dense->rate();
    std::vector<double> remote, remote_input;
    for (const RawRow* r : raw.find("zero_copy", "gemv_")) remote.push_back(r->rate());
    for (const RawRow* r : raw.find("zero_copy", "input_gemv_")) remote_input.push_back(r->rate());
    const std::vector<std::pair<int, double>> gemm_reads = remote_gemm_reads(raw);
    const std::vector<std::pair<double, double>> touch = fresh_touch_points(raw);
    const std::vector<std::array<double, 4>> gemv_rows = remote_gemv_rows(raw);
    double mapping = 0;
    const RawRow* fresh = raw.one("um_preferred_cpu", "fresh_first_read");
    const RawRow* first = raw.one("um_preferred_cpu", "first_read");
    const RawRow* second = raw.one("um_preferred_cpu", "second_read");
    // A fresh allocation written on the CPU (tiersim_calib after 2026-11-23) is what weights loaded into host
    // memory pay on the GPU's first read. Older runs only have the first read after the memory had been on the
    // GPU, which costs far more per block; used only when that is all there is (and said so in the source).
    if (fresh && second) mapping = std::max(0.0, (fresh->median - second->median) / (fresh->work / block));
    else if (first && second) mapping = std::max(0.0, (first->max - second->median) / (first->work / block));
    const auto& bum = base.managed_memory;
    // Per-tensor allocator call costs. Since session 29 (tiersim_calib --only alloc_calls) the calls as a step makes
    // them, beside live ranges (every call of the size cycle): a framework's calls always have live neighbours, and
    // a call with none (the 64 KiB rows of run 4, each free releasing the last range of its VA block) costs 2-3x
    // more. Before that the 64 KiB rows (most of a decode step's tensors are small activations); runs before
    // 2026-11-22 (run 3) measured neither.
    const RawRow* live_alloc = raw.one("um_alloc_call_live", "malloc_managed_all");
    const RawRow* live_free = raw.one("um_free_call_live", "free_gpu_written_all");
    const bool calls_live = live_alloc && live_free;
    const RawRow* alloc_row = calls_live ? live_alloc : raw.one("um_alloc_call", "malloc_managed_64KiB");
    const RawRow* free_row = calls_live ? live_free : raw.one("um_free_call", "free_gpu_written_64KiB");
    const bool calls_measured = alloc_row && free_row;
    // Past the GPU's memory (tiersim_calib --only oversubscribe), against the fault path just fitted.
    hw::ManagedMemorySpec fault_path;
    const std::string batch_fact = raw.fact("uvm.uvm_perf_fault_batch_count", "256");
    if (std::from_chars(batch_fact.data(), batch_fact.data() + batch_fact.size(), fault_path.fault_batch_count).ptr !=
            batch_fact.data() + batch_fact.size() || fault_path.fault_batch_count < 1)
      throw InputError(raw.file, 0, "uvm.uvm_perf_fault_batch_count", "not a positive whole number: '" + batch_fact + "'");
    fault_path.fault_latency = serial->median / serial->work;
    fault_path.fault_block_overhead = block_overhead;
    fault_path.fault_migration_bandwidth = migration_bw;
    const OversubscribeFit oversub = fit_oversubscription(raw, fault_path, decoder_passes);
    const hw::ManagedMemorySpec::AdvisedCycle advised =
        advised_cycle ? fit_advised_cycle(*advised_cycle) : hw::ManagedMemorySpec::AdvisedCycle{};
    if (!decoder_passes.empty() && !oversub.fitted)
      throw InputError(decoder_passes.front().file, 0, "um_oversub_decoder", oversub.why_not);
    if (oversub.fitted) {
      char b[320];
      std::snprintf(b, sizeof b, "\nPast the GPU's memory (%s): %d steady passes, plain %.2f GB/s, ReadMostly %.2f GB/s\n",
                    decoder_passes.empty() ? "tiersim_calib's 64 MiB streaming passes"
                                           : "tiersim_calib's oversubscribe_decoder GEMV passes",
                    oversub.passes, oversub.plain_rate / 1e9, oversub.read_mostly_rate / 1e9);
      oversub_report = b;
    }
    y << "managed_memory:\n"
      << "  source: " << yaml_quote(by + ": fault_latency = isolated faults (one thread, one touch per 2 MiB, each waiting); "
                                         "fault_block_overhead and fault_migration_bandwidth solved from 512 batched sparse faults and a dense first touch; "
                                         "prefetch and eviction rates from cudaMemPrefetchAsync both ways; remote reads = median cuBLAS GEMV on host memory; "
                                         + (fresh && second ? std::string("mapping cost = PreferredLocation=CPU first read of a fresh host-written allocation minus a second read, per block; ")
                                                  : std::string("mapping cost = PreferredLocation=CPU cold first read (its slowest repetition) minus second, per block; ")) +
                                         "driver constants from nvidia_uvm parameters; "
                                         + (calls_live ? std::string("alloc_call and free_call = median host time of cudaMallocManaged and of cudaFree of a GPU-written range beside live ones, a step's sizes (16 B - 256 KiB, tiersim_calib alloc_calls)")
                                            : calls_measured ? std::string("alloc_call and free_call = median host time of cudaMallocManaged and of cudaFree of a GPU-written range, 64 KiB")
                                                           : "alloc/free call costs NOT measured: base preset '" + base.name + "'")
                                         + (remote_input.empty() ? std::string("")
                                                                 : "; gemv_remote_input_bandwidth = median cuBLAS GEMV with its input vector in host memory, its weight's bytes per second")
                                         + (gemm_reads.empty() ? std::string("")
                                                               : "; remote_gemm_reads = cuBLAS bf16 GEMM on PreferredLocation=CPU + AccessedBy weights, its time at M rows over its time at M <= 64, the median over the measured shapes")
                                         + (gemv_rows.empty() ? std::string("")
                                                              : "; remote_gemv = cuBLAS bf16 GEMV with its input vector (and, in the last column, its weight too) in PreferredLocation=CPU + AccessedBy managed memory, median time per shape")
                                         + (touch.empty() ? std::string("")
                                                          : "; fresh_touch = a fresh cudaMallocManaged range's first GPU write (no advice) less a second write, per size")
                                         + (!oversub.fitted ? std::string("")
                                            : oversub.evicting_fault_bandwidth > 0
                                                ? "; evicting_fault_bandwidth and evict_writeback_bandwidth = tiersim_calib's oversubscribe_decoder passes past a ballooned GPU (a decoder's weights, one cudaMallocManaged range each, read by cuBLAS's GEMV: ReadMostly passes per byte less the batches' latency; plain less ReadMostly passes, per written-back byte)"
                                                : "; evict_block_overhead and evict_writeback_bandwidth = tiersim_calib's oversubscribe passes past a ballooned GPU (ReadMostly passes less the fault path above, per evicted block; plain less ReadMostly passes, per written-back byte)")
                                         + (advised.empty() ? std::string("")
                                                            : "; advised_cycle = tiersim_calib's advised_cycle (" + advised_cycle->fact("measured_at", "unknown date") + "): an activation's whole cycle (cudaMallocManaged, the advice, a GPU write, a GPU read, cudaFree, beside live ranges) with the advice less without, median per size")) << "\n"
      << "  va_block: \"2 MiB\"\n  big_page: \"64 KiB\"\n"
      << "  prefetch_threshold: " << num(std::stod(raw.fact("uvm.uvm_perf_prefetch_threshold", "51")) / 100.0) << "\n"
      << "  fault_batch_count: " << raw.fact("uvm.uvm_perf_fault_batch_count", "256") << "\n"
      << "  fault_latency: \"" << us(serial->median / serial->work) << "\"\n"
      << "  fault_block_overhead: \"" << us(block_overhead) << "\"\n"
      << "  fault_migration_bandwidth: \"" << gbs(migration_bw) << "\"\n"
      << "  prefetch_to_gpu: \"" << gbs(pf_gpu->rate()) << "\"\n"
      << "  evict_to_cpu: \"" << gbs(pf_cpu->rate()) << "\"\n"
      << "  remote_read_bandwidth: \"" << gbs(median_of(remote)) << "\"\n";
    if (oversub.fitted && oversub.evicting_fault_bandwidth > 0)
      y << "  evicting_fault_bandwidth: \"" << gbs(oversub.evicting_fault_bandwidth) << "\"\n"
        << "  evict_writeback_bandwidth: \"" << gbs(oversub.evict_writeback_bandwidth) << "\"\n";
    else if (oversub.fitted)
      y << "  evict_block_overhead: \"" << us(oversub.evict_block_overhead) << "\"\n"
        << "  evict_writeback_bandwidth: \"" << gbs(oversub.evict_writeback_bandwidth) << "\"\n";
    if (!remote_input.empty()) y << "  gemv_remote_input_bandwidth: \"" << gbs(median_of(remote_input)) << "\"\n";
    if (!gemm_reads.empty()) {
      y << "  remote_gemm_reads: [";
      for (std::size_t i = 0; i < gemm_reads.size(); ++i)
        y << (i ? ", " : "") << "[" << gemm_reads[i].first << ", " << num(gemm_reads[i].second, "%.2f") << "]";
      y << "]\n";
    }
    if (!gemv_rows.empty()) {
      y << "  remote_gemv: [";
      for (std::size_t i = 0; i < gemv_rows.size(); ++i)
        y << (i ? ", " : "") << "[\"" << num(gemv_rows[i][0], "%.0f") << " B\", \"" << num(gemv_rows[i][1], "%.0f")
          << " B\", \"" << us(gemv_rows[i][2]) << "\", \"" << us(gemv_rows[i][3]) << "\"]";
      y << "]\n";
    }
    if (!touch.empty()) {
      y << "  fresh_touch: [";
      for (std::size_t i = 0; i < touch.size(); ++i)
        y << (i ? ", " : "") << "[\"" << num(touch[i].first, "%.0f") << " B\", \"" << gbs(touch[i].second) << "\"]";
      y << "]\n";
    }
    if (!advised.empty()) {
      y << "  advised_cycle:\n";
      auto table = [&](const char* key, const std::vector<std::pair<double, double>>& pts) {
        y << "    " << key << ": [";
        for (std::size_t i = 0; i < pts.size(); ++i)
          y << (i ? ", " : "") << "[\"" << num(pts[i].first, "%.0f") << " B\", \"" << us(pts[i].second) << "\"]";
        y << "]\n";
      };
      table("prefer_cpu", advised.prefer_cpu);
      table("prefer_cpu_accessed_by", advised.prefer_cpu_accessed_by);
      table("prefer_cpu_read_mostly", advised.prefer_cpu_read_mostly);
    }
    y
      << "  mapping_fault_cost: \"" << us(mapping) << "\"\n"
      << "  alloc_call: \"" << us(calls_measured ? alloc_row->median : bum ? bum->alloc_call : 20e-6) << "\"\n"
      << "  free_call: \"" << us(calls_measured ? free_row->median : bum ? bum->free_call : 20e-6) << "\"\n";
  }
  // No framework section: calib measures CUDA, not the framework; host costs are a runtime profile
  // (calib/runtimes/), calibrated from framework runs by experiments/validate/compare.py.

  // Report: measured against the base preset's datasheet figures, and fit residuals.
  std::ostringstream r;
  r << "| parameter | measured | datasheet preset '" << base.name << "' | measured / datasheet |\n|---|---|---|---|\n";
  auto row = [&](const std::string& what, double m, double d, const std::string& unit, double scale) {
    char b[256];
    std::snprintf(b, sizeof b, "| %s | %.4g %s | %.4g %s | %.2f |\n", what.c_str(), m / scale, unit.c_str(), d / scale,
                  unit.c_str(), d > 0 ? m / d : 0.0);
    r << b;
  };
  row("GPU memory", gpu_total, base.gpu.memory, "GiB", 1073741824.0);
  row("HBM streaming read", hbm, base.gpu.memory_bandwidth, "GB/s", 1e9);
  row("bf16 GEMV achieved (median of shapes)", mem_eff * hbm, base.gpu.memory_efficiency * base.gpu.memory_bandwidth, "GB/s", 1e9);
  row("bf16 GEMM best", best_bf16, base.gpu_rate("bf16"), "TFLOP/s", 1e12);
  if (best_fp16 > 0) row("fp16 GEMM best", best_fp16, base.gpu_rate("fp16"), "TFLOP/s", 1e12);
  if (best_fp32 > 0) row("fp32 GEMM best (no TF32)", best_fp32, base.gpu_rate("fp32"), "TFLOP/s", 1e12);
  row("kernel minimum time", kernel_min, base.gpu.kernel_min_time, "us", 1e-6);
  row("H2D pinned bandwidth (fit)", h2d_pinned.fit.bandwidth, base.host_link.h2d_pinned.bandwidth, "GB/s", 1e9);
  row("D2H pinned bandwidth (fit)", d2h_pinned.fit.bandwidth, base.host_link.d2h_pinned.bandwidth, "GB/s", 1e9);
  row("H2D pageable bandwidth (fit)", h2d_pageable.fit.bandwidth, base.host_link.h2d_pageable.bandwidth, "GB/s", 1e9);
  row("D2H pageable bandwidth (fit)", d2h_pageable.fit.bandwidth, base.host_link.d2h_pageable.bandwidth, "GB/s", 1e9);
  row("H2D pinned latency (fit)", h2d_pinned.fit.latency, base.host_link.h2d_pinned.latency, "us", 1e-6);
  row("bidirectional pinned", bidir, base.host_link.bidirectional, "GB/s", 1e9);
  if (have_peer && base.peer_link) row("peer copy bandwidth (fit)", peer.fit.bandwidth, base.peer_link->transfer.bandwidth, "GB/s", 1e9);
  r << "\n| curve | points | latency | bandwidth | rms relative residual | max relative residual |\n|---|---|---|---|---|---|\n";
  auto fitrow = [&](const char* what, const Curve& c) {
    char b[256];
    std::snprintf(b, sizeof b, "| %s | %zu | %.3g us | %.4g GB/s | %.1f%% | %.1f%% |\n", what, c.fit.points, c.fit.latency * 1e6,
                  c.fit.bandwidth / 1e9, 100 * c.fit.rms_relative, 100 * c.fit.max_relative);
    r << b;
  };
  fitrow("h2d pinned", h2d_pinned);
  fitrow("d2h pinned", d2h_pinned);
  fitrow("h2d pageable", h2d_pageable);
  fitrow("d2h pageable", d2h_pageable);
  if (have_peer) fitrow("peer", peer);
  if (fp32.tile > 0) {
    char b[256];
    std::snprintf(b, sizeof b, "\nfp32 GEMM by rows: a tile of %.0f rows, %zu octaves of output elements; the model's mean "
                  "|error| over the measured rows %.1f%% (worst %+.1f%%)\n", fp32.tile, fp32.curve.size(),
                  100 * fp32.mean_error, 100 * fp32.worst_error);
    r << b;
  }
  r << oversub_report;
  return {y.str(), r.str()};
}

}  // namespace tiersim::calib
