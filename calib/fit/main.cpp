// tiersim_fit: raw calibration CSV -> hardware profile YAML (+ a markdown report), or two raw CSVs
// side by side (repeatability).
//   tiersim_fit --raw raw.csv --base h100-sxm --name h100-sxm-measured --out calib/profiles/h100-sxm-measured.yaml [--report r.md]
//   tiersim_fit --compare a.csv b.csv
//   tiersim_fit --oversubscribe RAW.csv --base PROFILE   managed_memory.evict_block_overhead and
//     evict_writeback_bandwidth from tiersim_calib --only oversubscribe's rows, the fault path taken from PROFILE's
//     managed_memory (fit/oversubscribe_fit.hpp): the two YAML lines to add to that section, on stdout
//   tiersim_fit --raw ... --decoder-passes RUN.csv (repeatable): managed memory past the GPU's memory from
//     tiersim_calib --only oversubscribe_decoder's GEMV passes instead of the 64 MiB ones (fit/oversubscribe_fit.hpp)
//   tiersim_fit --raw ... --advised-cycle RUN.csv: what seed 000's advice adds to an activation's cycle, by size, from
//     tiersim_calib --only advised_cycle (fit/advised_cycle_fit.hpp)
//   tiersim_fit --cpu cpu.csv --cpu-cores 8 [--raw raw.csv | --base PRESET] --name NAME --out PROFILE.yaml
//     adds host.cpu_kernels, fitted from experiments/llamacpp/cpu_matmul_bench's CSV (without --raw, to the
//     base profile as it is); --cpu-experts RUN.csv (repeatable): ggml's MUL_MAT_ID from another run (cpu_matmul_bench
//     --experts, with dense rows of a shape cpu.csv has), carried to this profile's host as host.cpu_kernels.gemv_id
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "core/error.hpp"
#include "fit/cpu_fit.hpp"
#include "fit/oversubscribe_fit.hpp"
#include "fit/profile_fit.hpp"
#include "config/embedded_files.hpp"
#include "config/profile_source.hpp"
#include "hardware/profile_loader.hpp"

namespace {

int compare(const std::string& a_path, const std::string& b_path) {
  const auto a = tiersim::calib::read_raw_csv(a_path), b = tiersim::calib::read_raw_csv(b_path);
  std::map<std::string, const tiersim::calib::RawRow*> in_b;
  for (const auto& r : b.rows) in_b[r.benchmark + "," + r.variant] = &r;
  std::printf("| benchmark | variant | run A | run B | B/A |\n|---|---|---|---|---|\n");
  for (const auto& r : a.rows) {
    auto it = in_b.find(r.benchmark + "," + r.variant);
    if (it == in_b.end()) continue;
    const double va = r.rate(), vb = it->second->rate();
    const char* unit = r.work_unit == "bytes" ? "GB/s" : r.work_unit == "flop" ? "TFLOP/s" : "/s";
    const double scale = r.work_unit == "bytes" ? 1e9 : r.work_unit == "flop" ? 1e12 : 1.0;
    std::printf("| %s | %s | %.4g %s | %.4g %s | %.3f |\n", r.benchmark.c_str(), r.variant.c_str(), va / scale, unit,
                vb / scale, unit, vb / va);
  }
  return 0;
}

int oversubscribe(const std::string& raw_path, const std::string& base) {
  const auto raw = tiersim::calib::read_raw_csv(raw_path);
  const auto profile = tiersim::hw::resolve_profile(base);
  if (!profile.managed_memory)
    throw tiersim::InputError(profile.origin, 0, "managed_memory", "--oversubscribe needs the base profile's fault costs");
  const auto f = tiersim::calib::fit_oversubscription(raw, *profile.managed_memory);
  if (!f.fitted) throw tiersim::InputError(raw_path, 0, "um_oversub_pass", f.why_not);
  std::printf("# %d steady passes: plain %.2f GB/s, ReadMostly %.2f GB/s, the fault path alone %.2f GB/s\n", f.passes,
              f.plain_rate / 1e9, f.read_mostly_rate / 1e9, f.fault_path_rate / 1e9);
  std::printf("  evict_block_overhead: \"%.1f us\"\n", f.evict_block_overhead * 1e6);
  std::printf("  evict_writeback_bandwidth: \"%.2f GB/s\"\n", f.evict_writeback_bandwidth / 1e9);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string raw, base = "h100-sxm", name, out, report, cpu, cpu_source;
  std::vector<std::string> cpu_experts;
  int cpu_cores = 0;
  std::vector<std::string> extras;  // rows of other runs: benchmarks the main run lacks
  std::vector<std::string> decoder_passes;  // tiersim_calib --only oversubscribe_decoder runs, each with its layer
  std::string advised_cycle;                // a tiersim_calib --only advised_cycle run
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw tiersim::InputError("", 0, a, "needs a value");
        return argv[++i];
      };
      if (a == "--compare") {
        if (i + 2 >= argc) throw tiersim::InputError("", 0, "--compare", "needs two CSV files");
        return compare(argv[i + 1], argv[i + 2]);
      }
      if (a == "--oversubscribe") {
        const std::string csv = value();
        for (int k = 1; k < argc; ++k)  // that mode fits the 64 MiB passes alone: the decoder's go with --raw
          if (std::string(argv[k]) == "--decoder-passes" || std::string(argv[k]) == "--advised-cycle")
            throw tiersim::InputError("", 0, argv[k], "goes with --raw (the profile fit), not --oversubscribe");
        for (int k = 1; k + 1 < argc; ++k)
          if (std::string(argv[k]) == "--base") return oversubscribe(csv, argv[k + 1]);
        throw tiersim::InputError("", 0, "--oversubscribe", "needs --base PROFILE (the fault costs it subtracts)");
      }
      if (a == "--raw") raw = value();
      else if (a == "--base") base = value();
      else if (a == "--name") name = value();
      else if (a == "--out") out = value();
      else if (a == "--report") report = value();
      else if (a == "--extra") extras.push_back(value());
      else if (a == "--decoder-passes") decoder_passes.push_back(value());
      else if (a == "--advised-cycle") {
        if (!advised_cycle.empty()) throw tiersim::InputError("", 0, a, "given twice (one run's cycles)");
        advised_cycle = value();
      }
      else if (a == "--cpu") cpu = value();
      else if (a == "--cpu-source") cpu_source = value();
      else if (a == "--cpu-experts") cpu_experts.push_back(value());
      else if (a == "--cpu-cores") {
        const std::string v = value();
        try {
          std::size_t used = 0;
          cpu_cores = std::stoi(v, &used);
          if (used != v.size()) throw std::invalid_argument("");
        } catch (const std::exception&) {
          throw tiersim::InputError("", 0, "--cpu-cores", "expected a whole number, got '" + v + "'");
        }
      } else
        throw tiersim::InputError("", 0, a,
                                  "unknown option (--raw, --oversubscribe, --extra, --decoder-passes, --advised-cycle, --base, --name, --out, --report, --compare, --cpu, "
                                  "--cpu-cores, --cpu-source, --cpu-experts)");
    }
    if ((raw.empty() && cpu.empty()) || name.empty() || out.empty())
      throw tiersim::InputError("", 0, "--raw",
                                "usage: tiersim_fit --raw RAW.csv --name NAME --out PROFILE.yaml [--base PRESET] "
                                "[--report R.md] [--cpu CPU.csv --cpu-cores N [--cpu-experts RUN.csv ...]]");
    tiersim::calib::FitOutput fit;
    if (!raw.empty()) {
      auto measurements = tiersim::calib::read_raw_csv(raw);
      tiersim::calib::add_rows_of(measurements, extras);
      std::vector<tiersim::calib::RawMeasurements> decoders;
      for (const std::string& path : decoder_passes) decoders.push_back(tiersim::calib::read_raw_csv(path));
      std::optional<tiersim::calib::RawMeasurements> cycles;
      if (!advised_cycle.empty()) cycles = tiersim::calib::read_raw_csv(advised_cycle);
      fit = tiersim::calib::fit_profile(measurements, tiersim::hw::resolve_profile(base), name, decoders,
                                        cycles ? &*cycles : nullptr);
    } else {
      // The base profile's own text, renamed: its sections stay as they were written.
      const auto src = tiersim::config::find_profile(base, tiersim::config::embedded_profiles(), "--base", "hardware profile", "preset");
      fit.yaml = src.text;
      const auto at = fit.yaml.find("\nname: ");
      if (at == std::string::npos) throw tiersim::InputError(src.origin, 0, "name", "no top-level name line to replace");
      const auto end = fit.yaml.find('\n', at + 1);
      fit.yaml.replace(at + 1, end - at - 1, "name: " + name);
    }
    if (!advised_cycle.empty() && raw.empty())
      throw tiersim::InputError("", 0, "--advised-cycle", "needs --raw (the profile fit it adds to)");
    if (!decoder_passes.empty() && raw.empty())
      throw tiersim::InputError("", 0, "--decoder-passes", "needs --raw (the fault costs the passes are read with)");
    if (!cpu_experts.empty() && cpu.empty())
      throw tiersim::InputError("", 0, "--cpu-experts", "needs --cpu (the dense rates the experts are carried with)");
    if (!cpu.empty()) {
      if (cpu_cores == 0) throw tiersim::InputError("", 0, "--cpu-cores", "give the host's physical core count with --cpu");
      std::ifstream in(cpu);
      if (!in) throw tiersim::InputError(cpu, 0, "--cpu", "cannot open");
      std::stringstream text;
      text << in.rdbuf();
      auto kernels = tiersim::calib::fit_cpu_kernels(text.str(), cpu, cpu_cores);
      if (!cpu_experts.empty()) {
        std::vector<std::pair<std::string, std::string>> runs;
        for (const std::string& path : cpu_experts) {
          std::ifstream e(path);
          if (!e) throw tiersim::InputError(path, 0, "--cpu-experts", "cannot open");
          std::stringstream t;
          t << e.rdbuf();
          runs.emplace_back(t.str(), path);
        }
        tiersim::calib::add_cpu_expert_kernels(kernels, text.str(), cpu, runs);
      }
      const std::string source = cpu_source.empty() ? tiersim::calib::default_cpu_source(cpu, cpu_experts) : cpu_source;
      fit.yaml = tiersim::calib::with_cpu_kernels(fit.yaml, out, kernels.kernels, source);
      fit.report += "\n## Host CPU kernels (" + cpu + ")\n\n" + kernels.report;
    }
    tiersim::hw::parse_profile(fit.yaml, out);  // what we write must load
    std::ofstream(out) << fit.yaml;
    if (!report.empty()) std::ofstream(report) << fit.report;
    std::cout << fit.report;
    std::cerr << "wrote " << out << "\n";
    return 0;
  } catch (const tiersim::InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
}
