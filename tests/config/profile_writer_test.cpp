// Profiles written back in their schema read back to the same numbers: what a result's "inputs" and
// `sim profiles show` rely on.
#include <gtest/gtest.h>

#include "hardware/profile_writer.hpp"
#include "hardware/profile_loader.hpp"
#include "runtime/runtime_loader.hpp"

namespace tiersim::config {
namespace {

TEST(ProfileWriter, EveryPresetReadsBackToTheSameNumbers) {
  for (const auto& preset : hw::list_presets()) {
    const hw::HardwareProfile p = hw::resolve_profile(preset.name);
    const auto written = profile_to_json(p);
    const hw::HardwareProfile again = hw::parse_profile(written.dump(), "written.json");
    EXPECT_EQ(profile_to_json(again).dump(), written.dump()) << preset.name;
    EXPECT_EQ(again.gpu.memory, p.gpu.memory) << preset.name;
    EXPECT_EQ(again.host_link.h2d_pinned.latency, p.host_link.h2d_pinned.latency) << preset.name;
    // And through YAML, as `sim profiles show` prints it.
    const hw::HardwareProfile from_yaml = hw::parse_profile(json_to_yaml(written), "written.yaml");
    EXPECT_EQ(profile_to_json(from_yaml).dump(), written.dump()) << preset.name;
  }
}

TEST(ProfileWriter, EveryRuntimeReadsBackToTheSameNumbers) {
  for (const auto& info : runtime::list_runtimes()) {
    const runtime::RuntimeProfile r = runtime::resolve_runtime(info.name);
    const auto written = runtime_to_json(r);
    const runtime::RuntimeProfile again = runtime::parse_runtime(written.dump(), "written.json");
    EXPECT_EQ(runtime_to_json(again).dump(), written.dump()) << info.name;
    EXPECT_EQ(again.per_op, r.per_op) << info.name;
    EXPECT_EQ(again.gpu_gemv, r.gpu_gemv) << info.name;
    EXPECT_EQ(again.gpu_gemm, r.gpu_gemm) << info.name;
    EXPECT_EQ(again.gpu_gemv_id, r.gpu_gemv_id) << info.name;
    EXPECT_EQ(again.gpu_gemm_id, r.gpu_gemm_id) << info.name;
    EXPECT_EQ(again.gpu_gemm_id_share, r.gpu_gemm_id_share) << info.name;
    ASSERT_EQ(again.gpu_gemv_rows.size(), r.gpu_gemv_rows.size()) << info.name;
    for (const auto& [type, k] : r.gpu_gemv_rows) {
      EXPECT_EQ(again.gpu_gemv_rows.at(type).fixed, k.fixed) << info.name << " " << type;
      EXPECT_EQ(again.gpu_gemv_rows.at(type).row_rates, k.row_rates) << info.name << " " << type;
    }
    EXPECT_EQ(again.gpu_gemv_rows_source, r.gpu_gemv_rows_source) << info.name;
    ASSERT_EQ(again.gpu_gemm_rows.size(), r.gpu_gemm_rows.size()) << info.name;
    for (const auto& [type, k] : r.gpu_gemm_rows) {
      EXPECT_EQ(again.gpu_gemm_rows.at(type).fixed, k.fixed) << info.name << " " << type;
      EXPECT_EQ(again.gpu_gemm_rows.at(type).rate, k.rate) << info.name << " " << type;
      EXPECT_EQ(again.gpu_gemm_rows.at(type).extra_rows, k.extra_rows) << info.name << " " << type;
    }
    if (info.name == "llamacpp-h100") {
      EXPECT_EQ(r.gpu_gemv_rows.size(), 4u);  // f16, q4_k, q6_k, q8_0 measured
    }
  }
}

}  // namespace
}  // namespace tiersim::config
