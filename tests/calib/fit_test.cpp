#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
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
    const char* extra;  // rows of a later run (--extra), or ""
  };
  for (const Case c : {Case{"results/calib/raw_run4.csv", "h200", "h200-measured", ""},
                       Case{"results/calib/raw_h100_run2.csv", "h100-sxm", "h100-measured",
                            "results/calib/raw_h100_run3_input_gemv.csv"}}) {
    RawMeasurements named = read_raw_csv(dir + "/" + c.raw);
    // The fit names its input by the path it was given; the committed profile was made from this one.
    named.file = c.raw;
    if (*c.extra) {
      const std::size_t rows = named.rows.size();
      add_rows_of(named, {dir + "/" + c.extra});
      EXPECT_GT(named.rows.size(), rows);
      named.file = std::string(c.raw) + " + " + c.extra;
      EXPECT_THROW(add_rows_of(named, {dir + "/" + c.extra}), InputError);  // the same rows twice
    }
    const FitOutput fit = fit_profile(named, hw::resolve_profile(c.base), c.name);
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

TEST(CalibBinary, RunsOnAGpuOrSaysThereIsNone) {
  const std::string bin = std::string(TIERSIM_BINARY_DIR) + "/bin/tiersim_calib";
  if (FILE* f = std::fopen(bin.c_str(), "r")) {
    std::fclose(f);
  } else {
    GTEST_SKIP() << "tiersim_calib not built (no CUDA compiler)";
  }
  const std::string out = std::string(TIERSIM_BINARY_DIR) + "/calib_smoke.csv";
  const int status = std::system((bin + " --quick --only host_link --out " + out + " > /dev/null 2>&1").c_str());
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 3) GTEST_SKIP() << "no CUDA device here: calibration runs on a GPU machine";
  ASSERT_EQ(code, 0);
  EXPECT_FALSE(read_raw_csv(out).find("h2d", "pinned_").empty());
}

}  // namespace
}  // namespace tiersim::calib
