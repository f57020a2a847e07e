#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "hardware/op_cost.hpp"
#include "hardware/profile_loader.hpp"
#include "hardware/profile_writer.hpp"
#include "support/toy.hpp"

namespace tiersim::hw {
namespace {

TEST(Presets, EveryPresetLoadsWithSourcesForEverySection) {
  const auto presets = list_presets();
  ASSERT_GE(presets.size(), 7u);
  for (const auto& p : presets) {
    const HardwareProfile hw = resolve_profile(p.name);
    EXPECT_EQ(hw.name, p.name);
    for (const char* section : {"gpu", "host", "host_link"})
      EXPECT_FALSE(hw.sources.at(section).empty()) << p.name << " " << section;
    EXPECT_GT(hw.gpu.memory, hw.gpu.reserved);
  }
}

TEST(Presets, DatasheetFiguresAreParsedOnce) {
  const HardwareProfile hw = resolve_profile("rtx4090");
  EXPECT_DOUBLE_EQ(hw.gpu.memory, 24.0 * 1073741824.0);
  EXPECT_DOUBLE_EQ(hw.gpu.memory_bandwidth, 1008e9);
  EXPECT_DOUBLE_EQ(hw.gpu_rate("bf16"), 165.2e12);
  EXPECT_EQ(hw.host_link.generation, 4);
}

// Asserts that replacing `from` by `to` in the toy profile fails at `line` naming `key`.
void expect_error(const std::string& from, const std::string& to, const std::string& key, std::size_t line) {
  std::string yaml = testing::toy_profile_yaml();
  const auto at = yaml.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  yaml.replace(at, from.size(), to);
  try {
    parse_profile(yaml, "bad.yaml");
    FAIL() << "accepted " << to;
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "bad.yaml");
    EXPECT_EQ(e.key(), key) << e.what();
    EXPECT_EQ(e.line(), line) << e.what();
  }
}

TEST(ProfileLoader, RejectsBadInputNamingFileLineAndKey) {
  expect_error("memory_bandwidth: \"1 GB/s\"", "memory_bandwidth: \"-1 GB/s\"", "gpu.memory_bandwidth", 10);
  expect_error("memory_bandwidth: \"1 GB/s\"", "memory_bandwidth: \"1 GB\"", "gpu.memory_bandwidth", 10);
  expect_error("memory_bandwidth: \"1 GB/s\"", "memory_bandwith: \"1 GB/s\"", "gpu.memory_bandwidth", 10);
  expect_error("  kernel_min_time: \"0 us\"\n", "  kernel_min_time: \"0 us\"\n  colour: blue\n", "gpu.colour", 16);
  expect_error("  memory_efficiency: 1.0\n  compute:\n    bf16", "  memory_efficiency: 1.5\n  compute:\n    bf16",
               "gpu.memory_efficiency", 11);
  expect_error("  count: 2\n", "  count: 0\n", "gpu.count", 7);
  expect_error("    bf16: \"1000 TFLOP/s\"\n  compute_efficiency: 1.0\n  kernel",
               "    fp64: \"1000 TFLOP/s\"\n  compute_efficiency: 1.0\n  kernel", "gpu.compute.fp64", 13);
  expect_error("  type: pcie\n", "  type: cxl\n", "host_link.type", 0);
}

TEST(ProfileLoader, ADiskSectionIsOptionalAndCheckedLikeTheRest) {
  EXPECT_FALSE(parse_profile(testing::toy_profile_yaml(), "toy.yaml").disk);
  const std::string disk = "disk:\n  source: \"test\"\n  read_bandwidth: \"2 GB/s\"\n  read_latency: \"50 us\"\n";
  const auto hw = parse_profile(testing::toy_profile_yaml() + disk, "toy.yaml");
  ASSERT_TRUE(hw.disk);
  EXPECT_DOUBLE_EQ(hw.disk->read_bandwidth, 2e9);
  EXPECT_DOUBLE_EQ(hw.disk->read_latency, 50e-6);
  try {
    parse_profile(testing::toy_profile_yaml() + "disk:\n  source: \"test\"\n  read_bandwidth: \"2 GB\"\n", "bad.yaml");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), "disk.read_bandwidth") << e.what();
  }
}

TEST(ProfileLoader, RejectsWhatTheYamlLibraryWouldHaveThrownOrSilentlyTaken) {
  // A key given twice (yaml-cpp keeps the first), a key that is a list, a curve point whose size is a
  // mapping (yaml-cpp's TypedBadConversion used to escape main): each an InputError with file, line, key.
  expect_error("  name: \"toy GPU\"\n", "  name: \"toy GPU\"\n  name: \"other\"\n", "gpu.name", 7);
  expect_error("  name: \"toy GPU\"\n", "  name: \"toy GPU\"\n  [a, b]: 1\n", "gpu", 7);
  expect_error("  h2d_pinned: {bandwidth: \"100 MB/s\", latency: \"0 us\"}",
               "  h2d_pinned: {bandwidth: \"100 MB/s\", latency: \"0 us\", points: [[{a: 1}, \"1 GB/s\"]]}",
               "host_link.h2d_pinned.points", 31);
  expect_error("  memory_bandwidth: \"1 GB/s\"\n", "  memory_bandwidth: \"1e308 TB/s\"\n", "gpu.memory_bandwidth", 10);
  expect_error("  memory_bandwidth: \"1 GB/s\"\n", "  memory_bandwidth: [1, 2]\n", "gpu.memory_bandwidth", 10);
}

TEST(ProfileLoader, FrameworkCostsBelongToARuntimeProfile) {
  expect_error("host_link:\n", "framework:\n  per_launch: \"6 us\"\nhost_link:\n", "framework", 27);
}

TEST(ProfileLoader, ManagedBlockSizeIsBounded) {
  // "1 B" made the managed-memory model allocate one block per byte (15 GB, then bad_alloc).
  std::string yaml = testing::toy_profile_yaml("1 GiB", true);
  yaml.replace(yaml.find("va_block: \"1 MiB\""), 17, "va_block: \"1 B\"");
  try {
    parse_profile(yaml, "bad.yaml");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), "managed_memory.va_block") << e.what();
    EXPECT_NE(std::string(e.what()).find("between 4 KiB and 1 GiB"), std::string::npos) << e.what();
  }
}

TEST(ProfileLoader, RemoteGemvRowsArePerShapeTimesReadAtTheNearestInput) {
  const std::string yaml = testing::toy_profile_yaml("1 GiB", true);
  EXPECT_EQ(parse_profile(yaml, "toy.yaml").managed_memory->remote_gemv_seconds(8192, 1e8, true), 0.0);  // none
  auto with = [&](const std::string& value) {
    std::string y = yaml;
    y.insert(y.find("  va_block:"), "  remote_gemv: " + value + "\n");
    return y;
  };
  const auto m = *parse_profile(with("[[\"8 KiB\", \"8 MiB\", \"1 ms\", \"1.5 ms\"], [\"8 KiB\", \"32 MiB\", \"4 ms\", \"6 ms\"], "
                                     "[\"16 KiB\", \"32 MiB\", \"10 ms\", \"12 ms\"]]"),
                                "toy.yaml").managed_memory;
  const double MiB = 1048576;
  EXPECT_DOUBLE_EQ(m.remote_gemv_seconds(8192, 8 * MiB, false), 1e-3);    // a measured shape
  EXPECT_DOUBLE_EQ(m.remote_gemv_seconds(8192, 8 * MiB, true), 1.5e-3);   // the weight host-resident too
  EXPECT_NEAR(m.remote_gemv_seconds(8192, 16 * MiB, false), 2e-3, 1e-12);  // log-log between 8 and 32 MiB
  EXPECT_DOUBLE_EQ(m.remote_gemv_seconds(8192, 4 * MiB, false), 0.5e-3);  // in proportion below the first
  EXPECT_DOUBLE_EQ(m.remote_gemv_seconds(8192, 64 * MiB, false), 8e-3);   // and beyond the last
  EXPECT_DOUBLE_EQ(m.remote_gemv_seconds(10240, 8 * MiB, false), 1.25e-3);  // nearest input 8 KiB, scaled by 10/8
  EXPECT_DOUBLE_EQ(m.remote_gemv_seconds(16384, 32 * MiB, true), 12e-3);
  for (const char* bad : {"[[\"16 KiB\", \"8 MiB\", \"1 ms\", \"1 ms\"], [\"8 KiB\", \"8 MiB\", \"1 ms\", \"1 ms\"]]",
                          "[[\"8 KiB\", \"8 MiB\", \"1 ms\"]]", "[[\"8 KiB\", \"8 MiB\", \"0 ms\", \"1 ms\"]]",
                          "[[\"8 KiB\", \"8 MiB\", \"1 ms\", \"fast\"]]", "[]", "{a: 1}"}) {
    try {
      parse_profile(with(bad), "bad.yaml");
      ADD_FAILURE() << bad;
    } catch (const InputError& e) {
      EXPECT_EQ(e.key(), "managed_memory.remote_gemv") << bad << ": " << e.what();
    }
  }
}

TEST(ProfileLoader, AdvisedCycleTablesAreOptionalAndInterpolatedInLogSize) {
  const std::string yaml = testing::toy_profile_yaml("1 GiB", true);
  EXPECT_EQ(parse_profile(yaml, "toy.yaml").managed_memory->advised_cycle_seconds(false, true, 4096), 0.0);  // none
  auto with = [&](const std::string& value) {
    std::string y = yaml;
    y.insert(y.find("  va_block:"), "  advised_cycle:\n" + value);
    return y;
  };
  const auto m = *parse_profile(with("    prefer_cpu: [[\"1 KiB\", \"10 us\"], [\"4 KiB\", \"30 us\"]]\n"
                                     "    prefer_cpu_read_mostly: [[\"1 KiB\", \"0 us\"]]\n"),
                                "toy.yaml").managed_memory;
  EXPECT_NEAR(m.advised_cycle_seconds(false, false, 512), 10e-6, 1e-15);   // below the first point: the first's
  EXPECT_NEAR(m.advised_cycle_seconds(false, false, 2048), 20e-6, 1e-12);  // halfway in log size
  EXPECT_NEAR(m.advised_cycle_seconds(false, false, 1 << 20), 30e-6, 1e-15);  // beyond the last: the last's
  EXPECT_EQ(m.advised_cycle_seconds(true, false, 2048), 0.0);   // AccessedBy: no table, not charged
  EXPECT_EQ(m.advised_cycle_seconds(false, true, 2048), 0.0);   // ReadMostly's table: 0 us
  // The writer keeps it: a profile written and read back prices the same.
  const auto again = *parse_profile(config::profile_to_json(parse_profile(with("    prefer_cpu: [[\"1 KiB\", \"10 us\"], [\"4 KiB\", \"30 us\"]]\n"), "toy.yaml")).dump(), "again.json").managed_memory;
  EXPECT_NEAR(again.advised_cycle_seconds(false, false, 2048), 20e-6, 1e-12);
  for (const char* bad : {"    prefer_cpu: [[\"4 KiB\", \"1 us\"], [\"1 KiB\", \"1 us\"]]\n", "    prefer_cpu: [[\"1 KiB\", \"-1 us\"]]\n",
                          "    prefer_cpu: []\n", "    prefer_cpu: [[\"1 KiB\"]]\n", "    read_mostly: [[\"1 KiB\", \"1 us\"]]\n", "    {}\n"}) {
    try {
      parse_profile(with(bad), "bad.yaml");
      ADD_FAILURE() << bad;
    } catch (const InputError& e) {
      EXPECT_EQ(e.file(), "bad.yaml") << bad;
      EXPECT_NE(e.key().find("managed_memory.advised_cycle"), std::string::npos) << bad << ": " << e.key();
    }
  }
}

TEST(ProfileLoader, RemoteGemmReadsAreOptionalRowCountsAndTimes) {
  const std::string yaml = testing::toy_profile_yaml("1 GiB", true);
  const auto plain = parse_profile(yaml, "toy.yaml");
  EXPECT_TRUE(plain.managed_memory->remote_gemm_reads.empty());
  EXPECT_EQ(plain.managed_memory->gemm_weight_reads(8192), 1.0);  // not measured: one read, as before
  auto with = [&](const std::string& value) {
    std::string y = yaml;
    y.insert(y.find("  va_block:"), "  remote_gemm_reads: " + value + "\n");
    return y;
  };
  const auto m = *parse_profile(with("[[64, 1.0], [256, 2.0], [1024, 4.0]]"), "toy.yaml").managed_memory;
  EXPECT_EQ(m.gemm_weight_reads(32), 1.0);                     // below the first point
  EXPECT_NEAR(m.gemm_weight_reads(128), std::sqrt(2.0), 1e-12);  // log-log between 64 and 256
  EXPECT_DOUBLE_EQ(m.gemm_weight_reads(1024), 4.0);
  EXPECT_DOUBLE_EQ(m.gemm_weight_reads(4096), 16.0);             // beyond the last: one more read per tile of rows
  for (const char* bad : {"[[256, 2.0], [64, 1.0]]", "[[64, 0.5]]", "[[64]]", "[]", "[[6.5, 1]]", "[[64, fast]]",
                          "[[0, 1]]", "{a: 1}"}) {
    try {
      parse_profile(with(bad), "bad.yaml");
      ADD_FAILURE() << bad;
    } catch (const InputError& e) {
      EXPECT_EQ(e.key(), "managed_memory.remote_gemm_reads") << bad << ": " << e.what();
      EXPECT_EQ(e.file(), "bad.yaml");
    }
  }
}

TEST(ProfileLoader, FreshTouchIsAnOptionalSizeRateCurve) {
  const std::string yaml = testing::toy_profile_yaml("1 GiB", true);
  EXPECT_EQ(parse_profile(yaml, "toy.yaml").managed_memory->fresh_touch_seconds(1e6), 0.0);  // not measured
  auto with = [&](const std::string& value) {
    std::string y = yaml;
    y.insert(y.find("  va_block:"), "  fresh_touch: " + value + "\n");
    return y;
  };
  const auto m = *parse_profile(with("[[\"8 KiB\", \"0.25 GB/s\"], [\"2 MiB\", \"7 GB/s\"]]"), "toy.yaml").managed_memory;
  EXPECT_NEAR(m.fresh_touch_seconds(8192), 8192 / 0.25e9, 1e-15);
  EXPECT_NEAR(m.fresh_touch_seconds(64 * 2097152.0), 64 * 2097152.0 / 7e9, 1e-12);  // the last rate beyond
  for (const char* bad : {"[]", "[[\"2 MiB\", \"7 GB/s\"], [\"8 KiB\", \"1 GB/s\"]]", "[[\"8 KiB\", \"0 GB/s\"]]", "7"}) {
    try {
      parse_profile(with(bad), "bad.yaml");
      ADD_FAILURE() << bad;
    } catch (const InputError& e) {
      EXPECT_EQ(e.key(), "managed_memory.fresh_touch") << bad << ": " << e.what();
    }
  }
}

TEST(ProfileLoader, RejectsYamlSyntaxErrorsWithTheirLine) {
  try {
    parse_profile("tiersim_profile: 1\nname: [unclosed\n", "broken.yaml");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "broken.yaml");
    EXPECT_GT(e.line(), 0u);
  }
}

TEST(ProfileLoader, UnknownPresetListsTheKnownOnes) {
  try {
    resolve_profile("rtx9090");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("rtx4090"), std::string::npos);
  }
}

TEST(TransferCurve, MeasuredPointsInterpolateInLogSize) {
  TransferCurve c;
  c.bandwidth = 50e9;
  c.latency = 10e-6;
  EXPECT_DOUBLE_EQ(c.seconds(1e6), 10e-6 + 1e6 / 50e9);
  c.points = {{4096, 1e9}, {1048576, 25e9}, {1073741824, 50e9}};
  EXPECT_DOUBLE_EQ(c.seconds(4096), 4096 / 1e9);
  EXPECT_NEAR(c.seconds(65536), 65536 / std::exp((std::log(1e9) + std::log(25e9)) / 2), 1e-15);
  // Beyond the last point: the last measured effective bandwidth, not the fit.
  EXPECT_NEAR(c.seconds(4294967296.0), 4294967296.0 / 50e9, 1e-12);
  c.points.back().second = 9e9;
  EXPECT_NEAR(c.seconds(4294967296.0), 4294967296.0 / 9e9, 1e-12);
}

TEST(ProfileLoader, AFreshPageableUnloadCurveIsOptional) {
  const std::string yaml = testing::toy_profile_yaml("1 GiB", true);
  const auto plain = parse_profile(yaml, "toy.yaml");
  EXPECT_FALSE(plain.host_link.d2h_fresh_pageable);
  EXPECT_EQ(&plain.host_link.unload_curve(), &plain.host_link.d2h_pageable);
  std::string y = yaml;
  y.insert(y.find("  bidirectional:"), "  d2h_fresh_pageable: {bandwidth: \"1.4 GB/s\", latency: \"20 us\"}\n");
  const auto fresh = parse_profile(y, "toy.yaml");
  ASSERT_TRUE(fresh.host_link.d2h_fresh_pageable);
  EXPECT_DOUBLE_EQ(fresh.host_link.unload_curve().bandwidth, 1.4e9);
  std::string bad = yaml;
  bad.insert(bad.find("  bidirectional:"), "  d2h_fresh_pageable: {bandwidth: \"fast\", latency: \"20 us\"}\n");
  try {
    parse_profile(bad, "bad.yaml");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.key()).find("host_link.d2h_fresh_pageable"), std::string::npos) << e.what();
  }
}

TEST(ProfileLoader, AttentionEfficiencyIsAnOptionalFlopsCurve) {
  const std::string yaml = testing::toy_profile_yaml("1 GiB", true);
  EXPECT_TRUE(parse_profile(yaml, "toy.yaml").gpu.attention_efficiency.empty());
  auto with = [&](const std::string& value) {
    std::string y = yaml;
    y.insert(y.find("  kernel_min_time:"), "  attention_efficiency: " + value + "\n");
    return y;
  };
  const auto p = parse_profile(with("[[1e9, 0.4], [1e12, 0.8]]"), "toy.yaml");
  ASSERT_EQ(p.gpu.attention_efficiency.size(), 2u);
  EXPECT_DOUBLE_EQ(p.gpu.attention_efficiency[1].first, 1e12);
  for (const char* bad : {"[[1e12, 0.8], [1e9, 0.4]]", "[[1e9, 0]]", "[[1e9, 1.5]]", "[[0, 0.5]]", "[[1e9]]", "[]",
                          "[[1e9, fast]]", "{a: 1}"}) {
    try {
      parse_profile(with(bad), "bad.yaml");
      ADD_FAILURE() << bad;
    } catch (const InputError& e) {
      EXPECT_EQ(e.key(), "gpu.attention_efficiency") << bad << ": " << e.what();
      EXPECT_EQ(e.file(), "bad.yaml");
    }
  }
}

TEST(ProfileLoader, ConvolutionEfficiencyIsOptionalCurvesByKernelAndChannels) {
  const std::string yaml = testing::toy_profile_yaml("1 GiB", true);
  EXPECT_TRUE(parse_profile(yaml, "toy.yaml").gpu.convolution_efficiency.empty());
  auto with = [&](const std::string& value) {
    std::string y = yaml;
    y.insert(y.find("  kernel_min_time:"), "  convolution_efficiency: " + value + "\n");
    return y;
  };
  const auto p = parse_profile(with("{\"3x3x3:96:96\": [[1e5, 0.2], [1e6, 0.25]], \"3x3:384:192\": [[1e4, 0.3]]}"), "toy.yaml");
  ASSERT_EQ(p.gpu.convolution_efficiency.size(), 2u);
  EXPECT_EQ(p.gpu.convolution_efficiency[0].shape.kernel_name(), "3x3x3");
  EXPECT_EQ(p.gpu.convolution_efficiency[1].shape.kernel_name(), "3x3");
  EXPECT_EQ(p.gpu.convolution_efficiency[1].shape.out, 192u);
  EXPECT_DOUBLE_EQ(p.gpu.convolution_efficiency[0].points[1].first, 1e6);
  for (const char* bad : {"{\"3x3x3:96\": [[1e5, 0.2]]}", "{\"3x3x3:96:0\": [[1e5, 0.2]]}", "{\"q:1:1\": [[1e5, 0.2]]}",
                          "{\"3x3:1:1\": [[1e5, 2]]}", "{\"3x3:1:1\": []}", "[[1e5, 0.2]]",
                          "{\"3x3x3:096:96\": [[1e5, 0.2]]}", "{\"3x3:+4:4\": [[1e5, 0.2]]}", "{\"03x3:4:4\": [[1e5, 0.2]]}",
                          "{\"3x3:4:4\": [[1e5, 0.2]], \"3x3:4:04\": [[1e5, 0.3]]}"}) {
    try {
      parse_profile(with(bad), "bad.yaml");
      ADD_FAILURE() << bad;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.key()).find("gpu.convolution_efficiency"), std::string::npos) << bad << ": " << e.what();
      EXPECT_EQ(e.file(), "bad.yaml");
    }
  }
}

TEST(ProfileLoader, Fp32GemmEfficiencyIsAnOptionalCurveWithItsRowTile) {
  const std::string yaml = testing::toy_profile_yaml("1 GiB", true);
  EXPECT_TRUE(parse_profile(yaml, "toy.yaml").gpu.fp32_gemm_efficiency.empty());
  auto with = [&](const std::string& lines) {
    std::string y = yaml;
    y.insert(y.find("  kernel_min_time:"), lines);
    return y;
  };
  const auto p = parse_profile(with("  fp32_gemm_efficiency: [[65536, 0.3], [1e6, 0.9]]\n  fp32_gemm_row_tile: 64\n"), "toy.yaml");
  ASSERT_EQ(p.gpu.fp32_gemm_efficiency.size(), 2u);
  EXPECT_DOUBLE_EQ(p.gpu.fp32_gemm_row_tile, 64);
  // It round-trips through the writer (results' inputs).
  const auto again = parse_profile(config::profile_to_json(p).dump(), "again.json");
  EXPECT_EQ(again.gpu.fp32_gemm_efficiency, p.gpu.fp32_gemm_efficiency);
  EXPECT_DOUBLE_EQ(again.gpu.fp32_gemm_row_tile, 64);
  for (const auto& [bad, key] : std::vector<std::pair<std::string, std::string>>{
           {"  fp32_gemm_efficiency: [[65536, 0.3]]\n", "gpu.fp32_gemm_row_tile"},  // the tile is required with it
           {"  fp32_gemm_row_tile: 64\n", "gpu.fp32_gemm_row_tile"},               // and only with it
           {"  fp32_gemm_efficiency: [[65536, 0.3]]\n  fp32_gemm_row_tile: 0\n", "gpu.fp32_gemm_row_tile"},
           {"  fp32_gemm_efficiency: [[1e6, 0.3], [65536, 0.9]]\n  fp32_gemm_row_tile: 64\n", "gpu.fp32_gemm_efficiency"}}) {
    try {
      parse_profile(with(bad), "bad.yaml");
      ADD_FAILURE() << bad;
    } catch (const InputError& e) {
      EXPECT_EQ(e.key(), key) << bad << ": " << e.what();
      EXPECT_EQ(e.file(), "bad.yaml");
    }
  }
}

// An fp32 matrix product that gives its features (a ComfyUI text encoder's) runs at the measured share for its output
// elements at whole row tiles, times the share of the padded rows that are real; ops in another dtype, and profiles
// without the curve, at compute_efficiency.
TEST(OpCost, Fp32ProductsPayForWholeRowTiles) {
  auto hw = testing::toy_profile().hw;
  hw.gpu.compute["fp32"] = 50e12;
  hw.gpu.memory_bandwidth = 1e18;  // compute-bound: the products' time is their FLOPs'
  trace::Op op;
  op.kind = trace::OpKind::Gemm;
  op.rows = 3584;                                   // output features
  const std::uint64_t m = 134;                      // rows: 3 tiles of 64, 192 rows computed
  op.flops = 2ull * m * 3584 * 3584;
  op.writes = {{0, 4 * m * 3584}};
  const double plain = gpu_op_seconds(hw, op, "fp32");
  EXPECT_NEAR(plain, op.flops / (hw.gpu.compute["fp32"] * hw.gpu.compute_efficiency), 1e-15);
  hw.gpu.fp32_gemm_efficiency = {{192.0 * 3584, 0.8}, {1e8, 0.9}};
  hw.gpu.fp32_gemm_row_tile = 64;
  EXPECT_NEAR(gpu_op_seconds(hw, op, "fp32"), op.flops / (hw.gpu.compute["fp32"] * 0.8 * 134 / 192), 1e-15);
  EXPECT_DOUBLE_EQ(gpu_op_seconds(hw, op, "bf16"), op.flops / (hw.gpu.compute["bf16"] * hw.gpu.compute_efficiency));
  // Products that give no features (a LoRA adapter's, a training step's) and matrix-vector products keep
  // compute_efficiency: the sweep measured neither.
  op.rows = 0;
  EXPECT_DOUBLE_EQ(gpu_op_seconds(hw, op, "fp32"), plain);
  op.rows = 3584;
  op.kind = trace::OpKind::Gemv;
  EXPECT_DOUBLE_EQ(gpu_op_seconds(hw, op, "fp32"), plain);
}

// A convolution (`conv=`) runs at its kernel and channels' measured share, by output positions; without its pair, at
// the nearest pair's of its kernel; without its kernel, or for an op that is not a convolution, at compute_efficiency.
TEST(OpCost, ConvolutionRunsAtItsKernelsMeasuredRate) {
  auto hw = testing::toy_profile().hw;
  trace::Op op;
  op.kind = trace::OpKind::Gemm;
  op.conv.kernel[0] = op.conv.kernel[1] = op.conv.kernel[2] = 3;
  op.conv.in = op.conv.out = 100;
  op.flops = 2ull * 27 * 100 * 100 * 1'000'000;  // a million output positions
  const double gemm_rate = gpu_op_seconds(hw, op, "bf16");
  EXPECT_NEAR(gemm_rate, op.flops / (hw.gpu.compute["bf16"] * hw.gpu.compute_efficiency), 1e-15);
  hw.gpu.convolution_efficiency = {{op.conv, {{1e4, 0.1}, {1e6, 0.4}}}};
  EXPECT_NEAR(gpu_op_seconds(hw, op, "bf16"), op.flops / (hw.gpu.compute["bf16"] * 0.4), 1e-15);
  op.flops /= 100;  // 1e4 positions
  EXPECT_NEAR(gpu_op_seconds(hw, op, "bf16"), op.flops / (hw.gpu.compute["bf16"] * 0.1), 1e-15);
  trace::ConvShape other = op.conv;
  other.in = other.out = 400;  // farther from 100 x 100 than 200 x 200 is
  trace::ConvShape near = op.conv;
  near.in = near.out = 200;
  hw.gpu.convolution_efficiency = {{other, {{1e4, 0.9}}}, {near, {{1e4, 0.2}}}};
  EXPECT_NEAR(gpu_op_seconds(hw, op, "bf16"), op.flops / (hw.gpu.compute["bf16"] * 0.2), 1e-15);
  trace::ConvShape flat = op.conv;
  flat.kernel[0] = 0;  // a 2D 3x3 is another kernel
  hw.gpu.convolution_efficiency = {{flat, {{1e4, 0.2}}}};
  EXPECT_NEAR(gpu_op_seconds(hw, op, "bf16"), op.flops / (hw.gpu.compute["bf16"] * hw.gpu.compute_efficiency), 1e-15);
}

// Attention over every key (a DiT's SDPA, `mask=none`) runs at the profile's measured efficiency for its FLOPs,
// log-log between points and held beyond them; other ops, and every op of a profile without the curve, at
// compute_efficiency.
TEST(OpCost, UnmaskedAttentionRunsAtItsOwnMeasuredRate) {
  auto hw = testing::toy_profile().hw;
  trace::Op op;
  op.kind = trace::OpKind::Attention;
  op.flops = 1'000'000'000'000'000ull;  // 1 PFLOP at 1 PFLOP/s x compute_efficiency
  const double gemm_rate = gpu_op_seconds(hw, op, "bf16");
  op.unmasked = true;
  EXPECT_DOUBLE_EQ(gpu_op_seconds(hw, op, "bf16"), gemm_rate);  // no curve: as before
  hw.gpu.attention_efficiency = {{1e9, 0.25}, {1e15, 0.5}};
  EXPECT_NEAR(gpu_op_seconds(hw, op, "bf16"), 1.0 / (hw.gpu.compute["bf16"] / 1e15 * 0.5), 1e-12);
  op.flops = 1'000'000'000'000ull;  // 1e12: half way in log between the points
  EXPECT_NEAR(gpu_op_seconds(hw, op, "bf16"), 1e12 / (hw.gpu.compute["bf16"] * std::sqrt(0.25 * 0.5)), 1e-15);
  op.flops = 1000;  // below the first point: held (the launch floor aside)
  EXPECT_DOUBLE_EQ(gpu_op_cost(hw, op, std::string("bf16")).compute_seconds, 1000 / (hw.gpu.compute["bf16"] * 0.25));
  op.unmasked = false;  // a causal prefill's attention keeps the GEMM's efficiency
  EXPECT_DOUBLE_EQ(gpu_op_cost(hw, op, std::string("bf16")).compute_seconds,
                   1000 / (hw.gpu.compute["bf16"] * hw.gpu.compute_efficiency));
}

TEST(OpCost, RooflineWithAFloorPerLaunch) {
  const auto hw = testing::toy_profile().hw;
  trace::Op op;
  op.flops = 0;
  op.reads = {{0, 1000000}};
  EXPECT_DOUBLE_EQ(gpu_op_seconds(hw, op, "bf16"), 1e-3);  // 1e6 B at 1 GB/s
  op.flops = 2'000'000'000'000'000ull;                     // 2 PFLOP at 1 PFLOP/s
  EXPECT_DOUBLE_EQ(gpu_op_seconds(hw, op, "bf16"), 2.0);
  op.gpu_seconds = 5e-6;                                    // measured wins
  EXPECT_DOUBLE_EQ(gpu_op_seconds(hw, op, "bf16"), 5e-6);
}

}  // namespace
}  // namespace tiersim::hw
