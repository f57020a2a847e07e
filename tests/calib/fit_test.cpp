#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "config/embedded_files.hpp"
#include "config/profile_source.hpp"
#include "fit/advised_cycle_fit.hpp"
#include "fit/cpu_fit.hpp"
#include "fit/fp32_gemm_fit.hpp"
#include "fit/oversubscribe_fit.hpp"
#include "fit/profile_fit.hpp"
#include "fit/raw_csv.hpp"
#include "hardware/profile_loader.hpp"

namespace tiersim::calib {
namespace {

TEST(FitTransfer, RecoversLatencyAndBandwidthFromExactPoints) {
  std::vector<std::pair<double, double>> pts;
  for (double b = 4096; b <= 1 << 30; b *= 4) pts.emplace_back(b, 7e-6 + b / 52e9);
  const AffineFit f = fit_transfer(pts);
  EXPECT_NEAR(f.latency, 7e-6, 1e-9);
  EXPECT_NEAR(f.bandwidth, 52e9, 52e9 * 1e-6);
  EXPECT_LT(f.rms_relative, 1e-9);
}

TEST(FitTransfer, ReportsResidualsOfACurveThatIsNotAffine) {
  // Fast in the middle, slow at the end (as pageable copies are): the fit must say it is poor.
  const std::vector<std::pair<double, double>> pts{{1e6, 1e6 / 14e9}, {1.6e7, 1.6e7 / 17e9}, {1e9, 1e9 / 8.8e9}};
  EXPECT_GT(fit_transfer(pts).max_relative, 0.1);
}

TEST(RawCsv, RejectsMalformedRowsWithTheirLine) {
  const std::string head = "# gpu_name: X\nbenchmark,variant,work,work_unit,repeats,median_s,min_s,max_s\n";
  EXPECT_EQ(parse_raw_csv(head + "h2d,pinned_4KiB,4096,bytes,100,1e-6,1e-6,2e-6\n", "r.csv").rows.size(), 1u);
  try {
    parse_raw_csv(head + "h2d,pinned_4KiB,4096,bytes,100,fast,1e-6,2e-6\n", "r.csv");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.line(), 3u);
    EXPECT_EQ(e.key(), "median_s");
  }
  EXPECT_THROW(parse_raw_csv(head + "h2d,pinned_4KiB,4096\n", "r.csv"), InputError);
  EXPECT_THROW(parse_raw_csv("# a: b\n", "r.csv"), InputError);
}

TEST(FitProfile, CommittedMeasuredProfilesAreWhatTheFitWritesFromTheCommittedRawData) {
  const std::string dir = TIERSIM_SOURCE_DIR;
  struct Case {
    const char* raw;
    const char* base;
    const char* name;
    std::vector<std::string> extras;  // rows of later runs (--extra), in order
    const char* cpu;    // the host CPU's kernels (--cpu), or ""
    int cores;
    std::vector<std::string> cpu_experts;  // MUL_MAT_ID runs (--cpu-experts)
    std::vector<std::string> decoder_passes = {};  // tiersim_calib --only oversubscribe_decoder runs (--decoder-passes)
    const char* advised_cycle = "";                // a tiersim_calib --only advised_cycle run (--advised-cycle), or ""
  };
  for (const Case& c : {Case{"results/calib/raw_run4.csv", "h200", "h200-measured", {"results/calib/h200-remote-fresh/h200_remote_fresh.csv", "results/calib/h200-attention/attention.csv",
                        "results/calib/h200-fresh-d2h/fresh_d2h.csv", "results/calib/h200-fp32-gemm/raw_h200_run7_fp32_gemm.csv",
                        "results/calib/h200-convolution/convolution.csv", "results/calib/h200-zero-copy/raw_h200_run8_input_gemv.csv",
                        "results/calib/h200-oversubscribe/calib_oversubscribe.csv",
                        "results/calib/h200-s29/calib_s29.csv", "results/calib/h200-s30/calib_s30.csv"}, "", 0, {},
                        {"results/calib/h200-s31/calib_decoder_qwen3-8b.csv", "results/calib/h200-s31/calib_decoder_qwen3-1.7b.csv"},
                        "results/calib/h200-s31/calib_advised_s31c.csv"},
                       Case{"results/calib/raw_h100_run2.csv", "h100-sxm", "h100-measured",
                            {"results/calib/raw_h100_run3_input_gemv.csv", "results/calib/raw_h100_run4_fp32_gemm.csv",
                             "results/calib/h100-remote-gemm/remote_gemm.csv", "results/calib/h100-fresh-touch/fresh_touch.csv",
                             "results/calib/h100-attention/attention.csv", "results/calib/h100-fresh-d2h/fresh_d2h.csv",
                             "results/calib/h100-convolution/convolution.csv"},
                            "results/validation/llamacpp/raw/cpu.csv", 16,
                            {"results/validation/llamacpp/raw/cpu_moe.csv",
                             "results/validation/llamacpp/raw/cpu_dense_same_host.csv"}}}) {
    RawMeasurements named = read_raw_csv(dir + "/" + c.raw);
    // The fit names its input by the path it was given; the committed profile was made from this one.
    named.file = c.raw;
    for (const std::string& extra : c.extras) {
      const std::size_t rows = named.rows.size();
      const std::string file = named.file;
      add_rows_of(named, {dir + "/" + extra});
      EXPECT_GT(named.rows.size(), rows);
      named.file = file + " + " + extra;  // as the command line names it
      EXPECT_THROW(add_rows_of(named, {dir + "/" + extra}), InputError);  // the same rows twice
    }
    std::vector<RawMeasurements> decoders;
    for (const std::string& path : c.decoder_passes) {
      decoders.push_back(read_raw_csv(dir + "/" + path));
      decoders.back().file = path;
    }
    std::optional<RawMeasurements> cycles;
    if (*c.advised_cycle) {
      cycles = read_raw_csv(dir + "/" + c.advised_cycle);
      cycles->file = c.advised_cycle;
    }
    FitOutput fit = fit_profile(named, hw::resolve_profile(c.base), c.name, decoders, cycles ? &*cycles : nullptr);
    if (*c.cpu) {
      std::ifstream csv(dir + "/" + c.cpu);
      std::stringstream text;
      text << csv.rdbuf();
      CpuFit kernels = fit_cpu_kernels(text.str(), c.cpu, c.cores);
      std::vector<std::pair<std::string, std::string>> runs;
      for (const std::string& path : c.cpu_experts) {
        std::ifstream e(dir + "/" + path);
        std::stringstream t;
        t << e.rdbuf();
        runs.emplace_back(t.str(), path);
      }
      if (!runs.empty()) add_cpu_expert_kernels(kernels, text.str(), c.cpu, runs);
      fit.yaml = with_cpu_kernels(fit.yaml, c.name, kernels.kernels, default_cpu_source(c.cpu, c.cpu_experts));
    }
    std::ifstream in(dir + "/calib/profiles/" + c.name + ".yaml");
    std::stringstream committed;
    committed << in.rdbuf();
    EXPECT_TRUE(fit.yaml == committed.str()) << c.name << ": re-run the tiersim_fit command in results/calib/README.md";
    const auto hw = hw::parse_profile(fit.yaml, "fit");
    EXPECT_GT(hw.host_link.h2d_pinned.bandwidth, 40e9);
    ASSERT_TRUE(hw.managed_memory.has_value());
    EXPECT_GT(hw.managed_memory->free_call, 0);  // measured since run 4, not the preset's
  }
}

// The fp32 sweep's rows between a tile's multiples run at the padded rows' share times the real rows over them: the
// fit finds the tile from rows made so, and runs of M 512 and 2048 alone give no curve.
TEST(FitOversubscribe, WriteBackAndEvictionCostsComeFromPlainAndReadMostlyPasses) {
  // 64 MiB buffers (32 blocks of 2 MiB). The fault path alone: one batch (10 us) + 32 x 5 us + 64 MiB at 10 GB/s.
  const double chunk = 64.0 * 1048576;
  hw::ManagedMemorySpec um;
  um.fault_batch_count = 256;
  um.fault_latency = 10e-6;
  um.fault_block_overhead = 5e-6;
  um.fault_migration_bandwidth = 10e9;
  const double base = 10e-6 + 32 * 5e-6 + chunk / 10e9;
  // ReadMostly passes: the fault path + 30 us per evicted block; plain ones: + 64 MiB at 20 GB/s of write-back.
  const double rm = base + 32 * 30e-6, plain = rm + chunk / 20e9;
  std::ostringstream csv;
  csv.precision(17);
  csv << "# gpu_name: X\nbenchmark,variant,work,work_unit,repeats,median_s,min_s,max_s\n";
  auto row = [&](const std::string& v, double s) {
    csv << "um_oversub_pass," << v << "," << chunk << ",bytes,1," << s << "," << s << "," << s << "\n";
  };
  row("plain_r0.50_p1", 10 * plain);  // below the GPU's memory: not a steady eviction pass, ignored
  row("plain_r1.50_p1", 10 * plain);  // a first pass (it found free memory): ignored
  for (const char* p : {"plain_r1.50_p2", "plain_r1.50_p3", "plain_r2.00_p2"}) row(p, plain);
  for (const char* p : {"read_mostly_r1.50_p2", "read_mostly_r2.00_p2", "read_mostly_r2.00_p3"}) row(p, rm);
  const auto f = fit_oversubscription(parse_raw_csv(csv.str(), "o.csv"), um);
  ASSERT_TRUE(f.fitted) << f.why_not;
  EXPECT_NEAR(f.evict_writeback_bandwidth, 20e9, 20e9 * 1e-6);
  EXPECT_NEAR(f.evict_block_overhead, 30e-6, 1e-9);
  EXPECT_EQ(f.passes, 6);
  // Without ReadMostly rows there is nothing to tell write-back from the fault path: no fit, and why.
  std::ostringstream only_plain;
  only_plain << "# gpu_name: X\nbenchmark,variant,work,work_unit,repeats,median_s,min_s,max_s\n"
             << "um_oversub_pass,plain_r1.50_p2," << chunk << ",bytes,1," << plain << "," << plain << "," << plain << "\n";
  const auto none = fit_oversubscription(parse_raw_csv(only_plain.str(), "p.csv"), um);
  EXPECT_FALSE(none.fitted);
  EXPECT_FALSE(none.why_not.empty());
}

// The decoder passes (tiersim_calib --only oversubscribe_decoder): a layer of two weights, 4 MiB (2 blocks) and
// 1 GiB (512 blocks: 2 batches of 256), so a pass of L layers has 3 L batches of fault latency; the rest of a
// ReadMostly pass is its bytes at the evicting rate, a plain one's that plus the write-back.
TEST(FitOversubscribe, DecoderPassesGiveTheEvictingFaultRateAndTheWriteBack) {
  hw::ManagedMemorySpec um;
  um.fault_batch_count = 256;
  um.fault_latency = 20e-6;
  um.fault_block_overhead = 5e-6;
  um.fault_migration_bandwidth = 10e9;
  const double layer = 1024.0 * 2048 * 2 + 16384.0 * 32768 * 2;
  auto file = [&](const std::string& layer_line, double evicting, double writeback) {
    std::ostringstream csv;
    csv.precision(17);
    csv << "# oversubscribe_decoder_layer: " << layer_line << "\nbenchmark,variant,work,work_unit,repeats,median_s,min_s,max_s\n";
    for (const char* advice : {"plain", "read_mostly"})
      for (const auto& [ratio, layers] : {std::pair<const char*, double>{"1.50", 6}, {"2.00", 8}, {"0.50", 2}})
        for (int p = 1; p <= 3; ++p) {
          const double bytes = layers * layer;
          double s = 3 * layers * 20e-6 + bytes / evicting + (std::string(advice) == "plain" ? bytes / writeback : 0);
          if (p == 1 || std::string(ratio) == "0.50") s *= 3;  // first passes and passes that fit: ignored
          for (const char* kernel : {"gemv", "stream"})
            csv << "um_oversub_decoder," << advice << "_" << kernel << "_r" << ratio << "_p" << p << "," << bytes
                << ",bytes,1," << (std::string(kernel) == "stream" ? 2 * s : s) << "," << s << "," << s << "\n";
        }
    return parse_raw_csv(csv.str(), "d.csv");
  };
  const RawMeasurements d = file("1024x2048 16384x32768", 14e9, 20e9);
  const auto f = fit_oversubscription(d, um, {d});
  ASSERT_TRUE(f.fitted) << f.why_not;
  EXPECT_NEAR(f.evicting_fault_bandwidth, 14e9, 14e9 * 1e-6);
  EXPECT_NEAR(f.evict_writeback_bandwidth, 20e9, 20e9 * 1e-6);
  EXPECT_EQ(f.evict_block_overhead, 0.0);
  EXPECT_EQ(f.passes, 8);  // 2 steady passes x 2 ratios, plain and ReadMostly; the streaming kernel's not
  // A layer line that does not parse, or bytes that are no whole number of its layers: refused, naming the file.
  EXPECT_THROW(fit_oversubscription(d, um, {file("1024x2048 16384xbig", 14e9, 20e9)}), InputError);
  EXPECT_THROW(fit_oversubscription(d, um, {file("1024x2048 16384x32000", 14e9, 20e9)}), InputError);
}

TEST(FitProfile, Fp32GemmFitFindsTheRowTileWhosePaddingExplainsTheRows) {
  auto share = [](double m, double n) {
    const double padded = std::ceil(m / 32) * 32;
    return std::min(0.95, 0.2 + 0.1 * std::log2(padded * n / 65536.0)) * m / padded;
  };
  std::vector<Fp32GemmRow> rows;
  for (double n : {1024.0, 5120.0, 17408.0})
    for (double m : {16.0, 24.0, 32.0, 40.0, 48.0, 64.0, 80.0, 96.0, 128.0, 144.0, 192.0, 256.0, 512.0, 2048.0})
      rows.push_back({m, n, share(m, n)});
  const Fp32GemmFit fit = fit_fp32_gemm(rows);
  EXPECT_EQ(fit.tile, 32);
  EXPECT_LT(fit.mean_error, 0.05);
  ASSERT_FALSE(fit.curve.empty());
  for (std::size_t i = 1; i < fit.curve.size(); ++i) EXPECT_GT(fit.curve[i].first, fit.curve[i - 1].first);
  std::vector<Fp32GemmRow> big;
  for (const auto& r : rows)
    if (r.rows >= 512) big.push_back(r);
  EXPECT_EQ(fit_fp32_gemm(big).tile, 0);
  EXPECT_TRUE(fit_fp32_gemm(big).curve.empty());
}

TEST(FitProfile, RemoteGemmReadsAreEachRowCountsTimeOverOneReadTheMedianOverShapes) {
  RawMeasurements raw = read_raw_csv(std::string(TIERSIM_SOURCE_DIR) + "/results/calib/raw_h100_run2.csv");
  auto add = [&](const std::string& kind, int m, int n, double seconds) {
    RawRow r;
    r.benchmark = "remote_gemm";
    r.variant = "gemm_bf16_" + kind + "_weights_m" + std::to_string(m) + "_out" + std::to_string(n) + "_in" + std::to_string(n);
    r.work = 2.0 * n * n;
    r.work_unit = "bytes";
    r.repeats = 3;
    r.median = r.min = r.max = seconds;
    raw.rows.push_back(r);
  };
  // Per shape, the time over its M <= 64 time: 128 rows 2, 1.5, 1 (median 1.5); 256 rows 4, 3, 2.5 (median 3).
  for (auto [m, s] : {std::pair{1, 1.0}, {64, 1.0}, {128, 2.0}, {256, 4.0}}) add("managed", m, 10, s);
  for (auto [m, s] : {std::pair{1, 2.0}, {64, 2.0}, {128, 3.0}, {256, 6.0}}) add("managed", m, 20, s);
  for (auto [m, s] : {std::pair{16, 1.0}, {128, 0.9}, {256, 2.5}}) add("managed", m, 30, s);
  add("device", 256, 10, 1e-3);  // weights in device memory: not a remote read
  const std::string yaml = fit_profile(raw, hw::resolve_profile("h100-sxm"), "t").yaml;
  EXPECT_NE(yaml.find("  remote_gemm_reads: [[64, 1.00], [128, 1.50], [256, 3.00]]\n"), std::string::npos) << yaml;
  EXPECT_DOUBLE_EQ(hw::parse_profile(yaml, "t.yaml").managed_memory->gemm_weight_reads(256), 3.0);
  add("managed", 0, 40, 1.0);
  EXPECT_THROW(fit_profile(raw, hw::resolve_profile("h100-sxm"), "t"), InputError);
}

TEST(FitProfile, RemoteGemvRowsAreEachShapesInputAndBothMedians) {
  RawMeasurements raw = read_raw_csv(std::string(TIERSIM_SOURCE_DIR) + "/results/calib/raw_h100_run2.csv");
  auto add = [&](const std::string& placement, int out, int in, double seconds) {
    RawRow r;
    r.benchmark = "remote_gemv";
    r.variant = "gemv_bf16_" + placement + "_out" + std::to_string(out) + "_in" + std::to_string(in);
    r.work = 2.0 * out * in;
    r.work_unit = "bytes";
    r.repeats = 3;
    r.median = r.min = r.max = seconds;
    raw.rows.push_back(r);
  };
  add("input", 4096, 4096, 2e-3);
  add("both", 4096, 4096, 3e-3);
  add("weight", 4096, 4096, 1e-3);  // the weight alone is remote_read_bandwidth's: not a row
  add("input", 1024, 4096, 1e-3);
  add("both", 1024, 4096, 1.2e-3);
  const std::string yaml = fit_profile(raw, hw::resolve_profile("h100-sxm"), "t").yaml;
  EXPECT_NE(yaml.find("  remote_gemv: [[\"8192 B\", \"8388608 B\", \"1000 us\", \"1200 us\"], "
                      "[\"8192 B\", \"33554432 B\", \"2000 us\", \"3000 us\"]]\n"), std::string::npos) << yaml;
  EXPECT_DOUBLE_EQ(hw::parse_profile(yaml, "t.yaml").managed_memory->remote_gemv_seconds(8192, 33554432, true), 3e-3);
  add("input", 2048, 2048, 1e-3);  // no both row for this shape
  EXPECT_THROW(fit_profile(raw, hw::resolve_profile("h100-sxm"), "t"), InputError);
}

TEST(FitProfile, FreshTouchIsEachSizeOverItsFirstWriteLessASecond) {
  RawMeasurements raw = read_raw_csv(std::string(TIERSIM_SOURCE_DIR) + "/results/calib/raw_h100_run2.csv");
  auto add = [&](const std::string& variant, double bytes, double seconds) {
    RawRow r;
    r.benchmark = "um_fresh_touch";
    r.variant = variant;
    r.work = bytes;
    r.work_unit = "bytes";
    r.repeats = 3;
    r.median = r.min = r.max = seconds;
    raw.rows.push_back(r);
  };
  add("first_write_2MiB", 2097152, 310e-6);
  add("populated_write_2MiB", 2097152, 10e-6);  // 2 MiB in 300 us
  add("first_write_8KiB", 8192, 40e-6);
  add("populated_write_8KiB", 8192, 8e-6);      // 8 KiB in 32 us
  const std::string yaml = fit_profile(raw, hw::resolve_profile("h100-sxm"), "t").yaml;
  EXPECT_NE(yaml.find("  fresh_touch: [[\"8192 B\", \"0.256 GB/s\"], [\"2097152 B\", \"6.991 GB/s\"]]\n"), std::string::npos) << yaml;
  EXPECT_NEAR(hw::parse_profile(yaml, "t.yaml").managed_memory->fresh_touch_seconds(2097152), 300e-6, 1e-7);  // the rate as written: 4 digits
  add("first_write_64KiB", 65536, 40e-6);  // no second write beside it
  EXPECT_THROW(fit_profile(raw, hw::resolve_profile("h100-sxm"), "t"), InputError);
}

// The calibration binary's path, or "" where it was not built (no CUDA compiler).
std::string calib_binary() {
  const std::string bin = std::string(TIERSIM_BINARY_DIR) + "/bin/tiersim_calib";
  FILE* f = std::fopen(bin.c_str(), "r");
  if (!f) return "";
  std::fclose(f);
  return bin;
}

// tiersim_fit's --decoder-passes belongs to the profile fit (--raw): alone, or with --oversubscribe (which fits the
// 64 MiB passes only), it would change nothing, so it is refused with exit 2.
TEST(FitProfile, AdvisedCycleIsEachAdviceLessNoAdviceAtEachSize) {
  auto csv = [](const std::string& extra_rows) {
    return "benchmark,variant,work,work_unit,repeats,median_s,min_s,max_s\n"
           "um_advised_cycle,none_16B,1,calls,10,2e-05,1e-05,3e-05\n"
           "um_advised_cycle,none_4KiB,1,calls,10,3e-05,1e-05,3e-05\n"
           "um_advised_cycle,none_all,1,calls,20,2.5e-05,1e-05,3e-05\n"
           "um_advised_cycle,prefer_cpu_16B,1,calls,10,2.5e-05,1e-05,3e-05\n"
           "um_advised_cycle,prefer_cpu_4KiB,1,calls,10,2.9e-05,1e-05,3e-05\n"
           "um_advised_cycle,prefer_cpu_accessed_by_16B,1,calls,10,2.2e-05,1e-05,3e-05\n"
           "um_advised_cycle,prefer_cpu_accessed_by_4KiB,1,calls,10,3.3e-05,1e-05,3e-05\n"
           "um_advised_cycle,prefer_cpu_read_mostly_16B,1,calls,10,4e-05,1e-05,3e-05\n" + extra_rows;
  };
  const auto fit = fit_advised_cycle(parse_raw_csv(csv("um_advised_cycle,prefer_cpu_read_mostly_4KiB,1,calls,10,7e-05,1e-05,3e-05\n"), "c.csv"));
  ASSERT_EQ(fit.prefer_cpu.size(), 2u);
  EXPECT_DOUBLE_EQ(fit.prefer_cpu[0].first, 16);
  EXPECT_DOUBLE_EQ(fit.prefer_cpu[1].first, 4096);
  EXPECT_NEAR(fit.prefer_cpu[0].second, 5e-6, 1e-12);
  EXPECT_DOUBLE_EQ(fit.prefer_cpu[1].second, 0.0);  // faster than without advice: nothing added
  EXPECT_NEAR(fit.prefer_cpu_accessed_by[1].second, 3e-6, 1e-12);
  EXPECT_NEAR(fit.prefer_cpu_read_mostly[1].second, 4e-5, 1e-12);
  try {  // a variant without a size 'none' has
    fit_advised_cycle(parse_raw_csv(csv(""), "c.csv"));
    ADD_FAILURE() << "accepted a missing size";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "c.csv");
    EXPECT_EQ(e.key(), "um_advised_cycle,prefer_cpu_read_mostly_4KiB");
  }
  EXPECT_THROW(fit_advised_cycle(parse_raw_csv("benchmark,variant,work,work_unit,repeats,median_s,min_s,max_s\n", "e.csv")),
               InputError);
}

TEST(FitBinary, RefusesDecoderPassesWhereTheyWouldChangeNothing) {
  const std::string bin = std::string(TIERSIM_BINARY_DIR) + "/bin/tiersim_fit";
  const std::string dir = TIERSIM_SOURCE_DIR, passes = dir + "/results/calib/h200-s31/calib_decoder_qwen3-8b.csv";
  auto code = [&](const std::string& args) {
    const int status = std::system((bin + " " + args + " > /dev/null 2>&1").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(code("--oversubscribe " + dir + "/results/calib/h200-oversubscribe/calib_oversubscribe.csv --base h200"), 0);
  EXPECT_EQ(code("--oversubscribe " + dir + "/results/calib/h200-oversubscribe/calib_oversubscribe.csv --base h200 "
                 "--decoder-passes " + passes), 2);
  EXPECT_EQ(code("--cpu " + dir + "/results/validation/llamacpp/raw/cpu.csv --cpu-cores 16 --base h100-sxm --name t "
                 "--out " + std::string(TIERSIM_BINARY_DIR) + "/fit_test_t.yaml --decoder-passes " + passes), 2);
}

TEST(CalibBinary, RunsOnAGpuOrSaysThereIsNone) {
  const std::string bin = calib_binary();
  if (bin.empty()) GTEST_SKIP() << "tiersim_calib not built (no CUDA compiler)";
  const std::string out = std::string(TIERSIM_BINARY_DIR) + "/calib_smoke.csv";
  const int status = std::system((bin + " --quick --only host_link --out " + out + " > /dev/null 2>&1").c_str());
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 3) GTEST_SKIP() << "no CUDA device here: calibration runs on a GPU machine";
  ASSERT_EQ(code, 0);
  EXPECT_FALSE(read_raw_csv(out).find("h2d", "pinned_").empty());
}

// --gemv-shapes is read before any device is looked for: a bad line is refused with its file and line, no GPU needed.
TEST(CalibBinary, RefusesABadGemvShapesFile) {
  const std::string bin = calib_binary();
  if (bin.empty()) GTEST_SKIP() << "tiersim_calib not built (no CUDA compiler)";
  const std::string dir = std::string(TIERSIM_BINARY_DIR);
  const auto run = [&](const std::string& text, const std::string& only) {
    const std::string shapes = dir + "/gemv_shapes_test.txt", log = dir + "/gemv_shapes_test.log";
    std::ofstream(shapes) << text;
    const int status = std::system((bin + " --only " + only + " --gemv-shapes " + shapes + " --out " + dir +
                                    "/gemv_shapes_test.csv > " + log + " 2>&1").c_str());
    std::ifstream in(log);
    std::stringstream msg;
    msg << in.rdbuf();
    return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : -1, msg.str());
  };
  for (const char* bad : {"4096 4096\n4096 x\n", "4096\n", "4096 4096 7\n", "0 4096\n", "1000000 4096\n",
                          "2048 2048\n2048 2048\n"}) {
    const auto [code, msg] = run(bad, "remote_gemv");
    EXPECT_EQ(code, 2) << bad;
    EXPECT_NE(msg.find("gemv_shapes_test.txt:"), std::string::npos) << msg;
  }
  EXPECT_EQ(run("# nothing\n", "remote_gemv").first, 2);             // no shape at all
  EXPECT_EQ(run("4096 4096\n", "remote_gemv,host_link").first, 2);  // the shapes are remote_gemv's alone
  // oversubscribe_decoder's layer: a bad line is refused the same way, and the part without its balloon too
  EXPECT_NE(run("4096 x\n", "oversubscribe_decoder").second.find("gemv_shapes_test.txt:1"), std::string::npos);
  EXPECT_EQ(run("4096 4096\n", "oversubscribe_decoder").first, 2);  // no --oversubscribe-leave
}

}  // namespace
}  // namespace tiersim::calib

namespace tiersim::calib {
namespace {

const char* kCpuCsv =
    "kind,type,rows,cols,batch,threads,seconds,bytes,gbps,gflops\n"
    "read,,0,0,0,1,0.1,1e9,10,0\n"
    "read,,0,0,0,8,0.02,1e9,50,0\n"
    "gemv,q4_k,4096,4096,1,1,0.001,9437184,9.4,33\n"
    "gemv,q4_k,4096,14336,1,1,0.003,33030144,11,39\n"
    "gemv,q4_k,4096,4096,1,8,0.0002,9437184,47,160\n"
    "gemv,q4_k,4096,4096,4,8,0.0003,9437184,30,400\n";

TEST(CpuFit, ReadRowsGiveTheBandwidthAndBatchOneProductsEachTypesRateOverAllShapes) {
  const auto fit = fit_cpu_kernels(kCpuCsv, "cpu.csv", 8);
  EXPECT_EQ(fit.kernels.cores, 8);
  ASSERT_EQ(fit.kernels.read_bandwidth.size(), 2u);
  EXPECT_DOUBLE_EQ(fit.kernels.read_bandwidth[1].second, 50e9);
  const auto& q4 = fit.kernels.gemv.at("q4_k");
  ASSERT_EQ(q4.size(), 2u);  // the batch-4 row is not a GEMV rate
  EXPECT_DOUBLE_EQ(q4[0].second, (9437184.0 + 33030144.0) / 0.004);
  EXPECT_DOUBLE_EQ(q4[1].second, 9437184.0 / 0.0002);
}

TEST(CpuFit, BadRowsNameTheLineAndColumn) {
  auto fails = [](const std::string& text, int line, const std::string& key) {
    try {
      fit_cpu_kernels(text, "cpu.csv", 8);
      ADD_FAILURE() << text;
    } catch (const InputError& e) {
      EXPECT_EQ(e.line(), static_cast<std::size_t>(line)) << e.what();
      EXPECT_EQ(e.key(), key) << e.what();
    }
  };
  const std::string header = "kind,type,rows,cols,batch,threads,seconds,bytes,gbps,gflops\n";
  fails("kind,type\n", 1, "header");
  fails(header + "read,,0,0,0,1,0.1,1e9,10\n", 2, "row");
  fails(header + "read,,0,0,0,1.5,0.1,1e9,10,0\n", 2, "threads");
  fails(header + "read,,0,0,0,1,-1,1e9,10,0\n", 2, "seconds");
  fails(header + "read,,0,0,0,1,0.1,1e9,10,0\ngemv,Q4_K,1,1,1,1,0.1,1e9,10,0\n", 3, "type");
  fails(header + "gemv,q4_k,1,1,1,1,0.1,1e9,10,0\n", 2, "kind");  // no read rows
}

// MUL_MAT_ID measured on another host: its rate times the dense rate here over the shapes both measured, divided by
// the dense rate there; a type and thread count with no shared dense shape is refused.
TEST(CpuFit, ExpertRatesFromAnotherRunAreCarriedByTheDenseRatesBothMeasured) {
  const std::string header = "kind,type,rows,cols,batch,threads,seconds,bytes,gbps,gflops\n";
  const std::string other = header +
                            "gemv_id,q4_k,768,2048,1,1,0.001,7110656,7.1,0\n"
                            "gemv_id,q4_k,768,2048,1,8,0.0004,7110656,17.8,0\n"
                            "gemv,q4_k,4096,14336,1,1,0.006,33030144,5.5,0\n"   // half the main run's rate at 1 thread
                            "gemv,q4_k,4096,14336,1,8,0.001,33030144,33,0\n"
                            "gemv,q4_k,768,2048,1,8,0.0001,896000,9,0\n";      // a shape the main run lacks: ignored
  auto fit = fit_cpu_kernels(kCpuCsv, "cpu.csv", 8);
  // Main at 8 threads has only 4096 x 4096: no shape in common there.
  try {
    add_cpu_expert_kernels(fit, kCpuCsv, "cpu.csv", {{other, "moe.csv"}});
    ADD_FAILURE() << "accepted experts with no shared dense shape at 8 threads";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "moe.csv");
    EXPECT_EQ(e.key(), "gemv");
    EXPECT_NE(std::string(e.what()).find("q4_k at 8 threads"), std::string::npos) << e.what();
  }
  const std::string main = std::string(kCpuCsv) + "gemv,q4_k,4096,14336,1,8,0.0005,33030144,66,0\n";
  auto ok = fit_cpu_kernels(main, "cpu.csv", 8);
  add_cpu_expert_kernels(ok, main, "cpu.csv", {{other, "moe.csv"}});
  const auto& c = ok.kernels.gemv_id.at("q4_k");
  ASSERT_EQ(c.size(), 2u);
  EXPECT_NEAR(c[0].second, 7110656 / 0.001 * ((33030144 / 0.003) / (33030144 / 0.006)), 1);  // x2
  EXPECT_NEAR(c[1].second, 7110656 / 0.0004 * ((33030144 / 0.0005) / (33030144 / 0.001)), 1);
  EXPECT_NE(ok.report.find("MUL_MAT_ID"), std::string::npos);
  // Through the profile text and back.
  const auto src = config::find_profile("h100-measured", config::embedded_profiles(), "--base", "hardware profile", "preset");
  const auto p = hw::parse_profile(with_cpu_kernels(src.text, "p.yaml", ok.kernels, "measured"), "p.yaml");
  ASSERT_EQ(p.host.kernels->gemv_id.at("q4_k").size(), 2u);
  EXPECT_NEAR(p.host.kernels->gemv_id.at("q4_k")[1].second, c[1].second, 1e-3 * c[1].second);  // written to 4 digits
  auto none = fit_cpu_kernels(main, "cpu.csv", 8);
  EXPECT_THROW(add_cpu_expert_kernels(none, main, "cpu.csv", {{header + "read,,0,0,0,1,0.1,1e9,10,0\n", "x.csv"}}), InputError);
}

TEST(CpuFit, TheSectionGoesIntoTheHostSectionOfTheProfileTextAndReplacesAnOldOne) {
  const auto fit = fit_cpu_kernels(kCpuCsv, "cpu.csv", 8);
  const auto src = config::find_profile("h100-measured", config::embedded_profiles(), "--base", "hardware profile", "preset");
  const std::string once = with_cpu_kernels(src.text, "p.yaml", fit.kernels, "measured");
  const auto p = hw::parse_profile(once, "p.yaml");
  ASSERT_TRUE(p.host.kernels);
  EXPECT_EQ(p.host.kernels->cores, 8);
  EXPECT_NEAR(hw::CpuKernelSpec::at(p.host.kernels->gemv.at("q4_k"), 8), 47.19e9, 0.01e9);
  // Everything else as it was; a second fit replaces the section instead of adding another.
  EXPECT_EQ(hw::parse_profile(src.text, "p.yaml").gpu.memory_bandwidth, p.gpu.memory_bandwidth);
  EXPECT_EQ(with_cpu_kernels(once, "p.yaml", fit.kernels, "measured"), once);
  EXPECT_THROW(with_cpu_kernels("tiersim_profile: 1\n", "p.yaml", fit.kernels, "m"), InputError);
}

}  // namespace
}  // namespace tiersim::calib
