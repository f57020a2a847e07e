#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "hardware/op_cost.hpp"
#include "runtime/runtime_loader.hpp"

namespace tiersim::runtime {
namespace {

const char* kRuntime = R"(tiersim_runtime: 1
name: test
description: "a runtime for tests"
source: "test"
per_launch: "6 us"
per_copy: "10 us"
per_prefetch: "12 us"
per_step: "500 us"
new_length_attention: "1 ms"
peer_copy_sync: "0 us"
peer_copy_overlaps_compute: true
)";

// Asserts that replacing `from` by `to` in kRuntime fails at `line` naming `key`.
void expect_error(const std::string& from, const std::string& to, const std::string& key, std::size_t line) {
  std::string yaml = kRuntime;
  const auto at = yaml.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  yaml.replace(at, from.size(), to);
  try {
    parse_runtime(yaml, "bad.yaml");
    FAIL() << "accepted " << to;
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "bad.yaml");
    EXPECT_EQ(e.key(), key) << e.what();
    EXPECT_EQ(e.line(), line) << e.what();
  }
}

// A shape-priced kernel section (gpu_gemv_rows, gpu_gemm_rows) with each of `entries` (its weight-type line) after its
// source line: rejected, naming the key, on the entry's line (14).
void expect_entry_errors(const std::string& section, const std::vector<std::pair<std::string, std::string>>& entries) {
  const std::string pre = "peer_copy_overlaps_compute: true\n" + section + ":\n  source: \"x\"\n";
  for (const auto& [entry, key] : entries) expect_error("peer_copy_overlaps_compute: true\n", pre + entry, key, 14);
}

TEST(RuntimeLoader, ReadsEveryKey) {
  const RuntimeProfile r = parse_runtime(kRuntime, "ok.yaml");
  EXPECT_EQ(r.name, "test");
  EXPECT_DOUBLE_EQ(r.per_launch, 6e-6);
  EXPECT_DOUBLE_EQ(r.per_prefetch, 12e-6);
  EXPECT_DOUBLE_EQ(r.new_length_attention, 1e-3);
  EXPECT_TRUE(r.peer_copy_overlaps_compute);
  EXPECT_TRUE(r.per_op.empty());
}

const char* kTraining = R"(training:
  source: "test"
  forward_scale: 1.5
  autocast_forward_scale: 1.75
  backward_per_op: "90 us"
  forward_per_step: "2 ms"
  backward_per_step: "1 ms"
  checkpoint_forward_per_layer: "700 us"
  checkpoint_backward_per_layer: "1.5 ms"
  optimizer_per_step: "400 us"
  optimizer_per_call: "90 us"
  optimizer_per_tensor: "2.5 us"
  optimizer_per_tensor_call: "2 us"
)";

TEST(RuntimeLoader, ReadsTheOptionalTrainingCosts) {
  EXPECT_FALSE(parse_runtime(kRuntime, "ok.yaml").training);
  const RuntimeProfile r = parse_runtime(std::string(kRuntime) + kTraining, "ok.yaml");
  ASSERT_TRUE(r.training);
  EXPECT_DOUBLE_EQ(r.training->forward_scale, 1.5);
  EXPECT_DOUBLE_EQ(r.training->autocast_forward_scale, 1.75);
  EXPECT_DOUBLE_EQ(r.training->backward_per_op, 90e-6);
  EXPECT_DOUBLE_EQ(r.training->checkpoint_backward_per_layer, 1.5e-3);
  EXPECT_DOUBLE_EQ(r.training->optimizer_per_tensor_call, 2e-6);
  // Every key is required, none unknown, scales in range; the error names the key.
  auto reject = [](const std::string& from, const std::string& to, const std::string& key) {
    std::string yaml = std::string(kRuntime) + kTraining;
    yaml.replace(yaml.find(from), from.size(), to);
    try {
      parse_runtime(yaml, "bad.yaml");
      ADD_FAILURE() << "accepted " << to;
    } catch (const InputError& e) {
      EXPECT_EQ(e.key(), key) << e.what();
      EXPECT_EQ(e.file(), "bad.yaml");
    }
  };
  reject("  backward_per_op: \"90 us\"\n", "", "training.backward_per_op");
  reject("forward_scale: 1.5", "forward_scale: 0", "training.forward_scale");
  reject("optimizer_per_call: \"90 us\"", "optimizer_per_call: \"-1 us\"", "training.optimizer_per_call");
  reject("  source: \"test\"\n", "  source: \"test\"\n  per_layer: \"1 us\"\n", "training.per_layer");
  // LoRA's branch costs: optional, both or neither.
  EXPECT_LT(r.training->lora_forward_per_module, 0.0);
  const RuntimeProfile l = parse_runtime(std::string(kRuntime) + kTraining +
                                             "  lora_forward_per_module: \"300 us\"\n  lora_backward_per_module: \"400 us\"\n",
                                         "ok.yaml");
  EXPECT_DOUBLE_EQ(l.training->lora_backward_per_module, 400e-6);
  try {
    parse_runtime(std::string(kRuntime) + kTraining + "  lora_forward_per_module: \"300 us\"\n", "bad.yaml");
    ADD_FAILURE() << "accepted one LoRA cost without the other";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), "training.lora_backward_per_module") << e.what();
  }
}

TEST(RuntimeLoader, RejectsBadInputNamingFileLineAndKey) {
  expect_error("per_step: \"500 us\"\n", "", "per_step", 1);
  expect_error("new_length_attention: \"1 ms\"\n", "new_length_attention: \"-1 ms\"\n", "new_length_attention", 9);
  expect_error("per_prefetch: \"12 us\"\n", "", "per_prefetch", 1);
  expect_error("peer_copy_sync: \"0 us\"\n", "peer_copy_sync: \"0 us\"\nper_op: {gemv: \"30 us\", softmax: \"9 us\"}\n",
               "per_op.softmax", 11);
  expect_error("peer_copy_sync: \"0 us\"\n", "peer_copy_sync: \"0 us\"\nper_op: {gemv: \"-30 us\"}\n", "per_op.gemv", 11);
  expect_error("peer_copy_sync: \"0 us\"\n", "peer_copy_sync: \"0 us\"\nper_op: {}\n", "per_op", 11);
  expect_error("peer_copy_overlaps_compute: true\n", "peer_copy_overlaps_compute: maybe\n", "peer_copy_overlaps_compute", 11);
  expect_error("peer_copy_sync: \"0 us\"\n", "peer_copy_sync: \"-2 us\"\n", "peer_copy_sync", 10);
  expect_error("per_launch: \"6 us\"\n", "per_launch: \"6 us\"\ncolour: blue\n", "colour", 6);
  expect_error("per_launch: \"6 us\"\n", "per_lanch: \"6 us\"\n", "per_launch", 5);
}

// gpu_cast: the share of the memory rate a weight's cast from its storage type runs at (fp8, GGUF types), with its source.
TEST(RuntimeLoader, ReadsTheCastShareAndRefusesOtherTypes) {
  const std::string with = std::string(kRuntime) + "gpu_cast: {source: \"a microbenchmark\", fp8: 0.364}\n";
  const RuntimeProfile r = parse_runtime(with, "ok.yaml");
  EXPECT_DOUBLE_EQ(r.gpu_cast.at("fp8"), 0.364);
  EXPECT_EQ(r.gpu_cast_source, "a microbenchmark");
  EXPECT_TRUE(parse_runtime(kRuntime, "ok.yaml").gpu_cast.empty());
  // ComfyUI-GGUF's dequantizations, by stored type.
  const RuntimeProfile g = parse_runtime(std::string(kRuntime) + "gpu_cast: {source: \"x\", q4_k: 0.2, gguf_bf16: 0.3}\n", "g.yaml");
  EXPECT_DOUBLE_EQ(g.gpu_cast.at("q4_k"), 0.2);
  EXPECT_DOUBLE_EQ(g.gpu_cast.at("gguf_bf16"), 0.3);
  expect_error("peer_copy_overlaps_compute: true\n",
               "peer_copy_overlaps_compute: true\ngpu_cast: {source: \"x\", int8: 0.5}\n", "gpu_cast.int8", 12);
  expect_error("peer_copy_overlaps_compute: true\n",
               "peer_copy_overlaps_compute: true\ngpu_cast: {source: \"x\", q3_k: 0.5}\n", "gpu_cast.q3_k", 12);
  expect_error("peer_copy_overlaps_compute: true\n",
               "peer_copy_overlaps_compute: true\ngpu_cast: {source: \"x\", fp8: 2}\n", "gpu_cast.fp8", 12);
  expect_error("peer_copy_overlaps_compute: true\n", "peer_copy_overlaps_compute: true\ngpu_cast: {fp8: 0.5}\n",
               "gpu_cast.source", 12);
}

// The framework's matrix kernels by weight type, plain and over a stack of experts (llama.cpp's MUL_MAT_ID).
TEST(RuntimeLoader, ReadsTheMatrixKernelRatesPlainAndForExperts) {
  const RuntimeProfile r = parse_runtime(std::string(kRuntime) +
                                             "gpu_gemv: {q4_k: \"1974 GB/s\"}\ngpu_gemm: {q4_k: \"177.1 TFLOP/s\"}\n"
                                             "gpu_gemv_id: {q4_k: \"884 GB/s\", q8_0: \"1309 GB/s\"}\n"
                                             "gpu_gemm_id: {q4_k: \"37 TFLOP/s\"}\n",
                                         "ok.yaml");
  EXPECT_DOUBLE_EQ(r.gpu_gemv.at("q4_k"), 1974e9);
  EXPECT_DOUBLE_EQ(r.gpu_gemm.at("q4_k"), 177.1e12);
  EXPECT_DOUBLE_EQ(r.gpu_gemv_id.at("q4_k"), 884e9);
  EXPECT_DOUBLE_EQ(r.gpu_gemv_id.at("q8_0"), 1309e9);
  EXPECT_DOUBLE_EQ(r.gpu_gemm_id.at("q4_k"), 37e12);
  EXPECT_TRUE(parse_runtime(kRuntime, "ok.yaml").gpu_gemm_id.empty());
  expect_error("peer_copy_overlaps_compute: true\n",
               "peer_copy_overlaps_compute: true\ngpu_gemm_id: {q4_k: \"37 GB/s\"}\n", "gpu_gemm_id.q4_k", 12);
  expect_error("peer_copy_overlaps_compute: true\n",
               "peer_copy_overlaps_compute: true\ngpu_gemv_id: {q4_k: \"-1 GB/s\"}\n", "gpu_gemv_id.q4_k", 12);
  EXPECT_DOUBLE_EQ(parse_runtime(std::string(kRuntime) + "gpu_gemm_id_share: 0.21\n", "ok.yaml").gpu_gemm_id_share, 0.21);
  EXPECT_EQ(parse_runtime(kRuntime, "ok.yaml").gpu_gemm_id_share, 0);
  expect_error("peer_copy_overlaps_compute: true\n", "peer_copy_overlaps_compute: true\ngpu_gemm_id_share: 0\n",
               "gpu_gemm_id_share", 12);
  expect_error("peer_copy_overlaps_compute: true\n", "peer_copy_overlaps_compute: true\ngpu_gemm_id_share: 1.5\n",
               "gpu_gemm_id_share", 12);
}

// gpu_gemv_rows: the matrix-vector kernel by weight type priced by its rows, a fixed time and a rate by bytes per row.
TEST(RuntimeLoader, ReadsTheRowPricedMatrixVectorKernel) {
  const RuntimeProfile r = parse_runtime(std::string(kRuntime) +
                                             "gpu_gemv_rows:\n  source: \"cpu_matmul_bench --backend gpu\"\n"
                                             "  q4_k: {fixed: \"2.9 us\", rows: [[\"144 B\", \"500 GB/s\"], [\"1440 B\", \"1.5 TB/s\"]]}\n",
                                         "ok.yaml");
  EXPECT_EQ(r.gpu_gemv_rows_source, "cpu_matmul_bench --backend gpu");
  const GemvRowKernel& k = r.gpu_gemv_rows.at("q4_k");
  EXPECT_DOUBLE_EQ(k.fixed, 2.9e-6);
  ASSERT_EQ(k.row_rates.size(), 2u);
  EXPECT_DOUBLE_EQ(k.row_rates[1].first, 1440);
  EXPECT_DOUBLE_EQ(k.row_rates[1].second, 1.5e12);
  EXPECT_TRUE(parse_runtime(kRuntime, "ok.yaml").gpu_gemv_rows.empty());
  expect_entry_errors("gpu_gemv_rows",
                      {{"  q9_z: {fixed: \"1 us\", rows: [[\"1 B\", \"1 GB/s\"]]}\n", "gpu_gemv_rows.q9_z"},
                       {"  q4_k: {rows: [[\"1 B\", \"1 GB/s\"]]}\n", "gpu_gemv_rows.q4_k.fixed"},
                       {"  q4_k: {fixed: \"1 us\", rows: []}\n", "gpu_gemv_rows.q4_k.rows"},
                       {"  q4_k: {fixed: \"1 us\", rows: [[\"2 B\", \"1 GB/s\"], [\"1 B\", \"1 GB/s\"]]}\n", "gpu_gemv_rows.q4_k.rows"}});
  expect_error("peer_copy_overlaps_compute: true\n",
               "peer_copy_overlaps_compute: true\ngpu_gemv_rows: {q4_k: {fixed: \"1 us\", rows: [[\"1 B\", \"1 GB/s\"]]}}\n",
               "gpu_gemv_rows.source", 12);
}

// gpu_gemm_rows: the prompt-sized product by weight type priced by its shape.
TEST(RuntimeLoader, ReadsTheShapePricedMatrixProduct) {
  const RuntimeProfile r = parse_runtime(std::string(kRuntime) +
                                             "gpu_gemm_rows:\n  source: \"cpu_matmul_bench --batch 512\"\n"
                                             "  q4_k: {fixed: \"10 us\", rate: \"206 TFLOP/s\", extra_rows: 1000}\n",
                                         "ok.yaml");
  EXPECT_EQ(r.gpu_gemm_rows_source, "cpu_matmul_bench --batch 512");
  const GemmRowsKernel& k = r.gpu_gemm_rows.at("q4_k");
  EXPECT_DOUBLE_EQ(k.fixed, 10e-6);
  EXPECT_DOUBLE_EQ(k.rate, 206e12);
  EXPECT_DOUBLE_EQ(k.extra_rows, 1000);
  EXPECT_DOUBLE_EQ(k.seconds(2e9, 1000), 10e-6 + 2e9 * 2 / 206e12);
  expect_entry_errors("gpu_gemm_rows",
                      {{"  q4_k: {fixed: \"1 us\", rate: \"1 GB/s\", extra_rows: 0}\n", "gpu_gemm_rows.q4_k.rate"},
                       {"  q4_k: {fixed: \"1 us\", rate: \"1 TFLOP/s\", extra_rows: -1}\n", "gpu_gemm_rows.q4_k.extra_rows"},
                       {"  q4_k: {fixed: \"1 us\", rate: \"1 TFLOP/s\"}\n", "gpu_gemm_rows.q4_k.extra_rows"}});
}

// Rows at the rate their length streams: log-interpolated between the points, held beyond them, after a fixed time.
TEST(GemvRowKernel, RowsTakeTheRateOfTheirLengthAfterTheFixedTime) {
  GemvRowKernel k;
  k.fixed = 3e-6;
  k.row_rates = {{1000, 1e12}, {4000, 2e12}};
  EXPECT_DOUBLE_EQ(k.seconds(100, 500), 3e-6 + 100 * 500 / 1e12);      // below the first point: its rate
  EXPECT_DOUBLE_EQ(k.seconds(100, 8000), 3e-6 + 100 * 8000 / 2e12);    // beyond the last: its rate
  EXPECT_NEAR(k.seconds(100, 2000), 3e-6 + 100 * 2000 / std::sqrt(2.0) / 1e12, 1e-15);  // halfway in log: sqrt(1 x 2)
  EXPECT_DOUBLE_EQ(k.seconds(0, 2000), 3e-6);
}

// gpu_block_reduction: one thread block's streaming rate (PyTorch's GroupNorm statistics), with its source.
TEST(RuntimeLoader, ReadsTheBlockRateWithItsSource) {
  const RuntimeProfile r =
      parse_runtime(std::string(kRuntime) + "gpu_block_reduction:\n  source: \"group_norm_rate.py\"\n  block_rate: \"2.5 GB/s\"\n", "ok.yaml");
  EXPECT_DOUBLE_EQ(r.gpu_block_rate, 2.5e9);
  EXPECT_EQ(r.gpu_block_rate_source, "group_norm_rate.py");
  EXPECT_EQ(parse_runtime(kRuntime, "ok.yaml").gpu_block_rate, 0.0);
  expect_error("peer_copy_overlaps_compute: true\n",
               "peer_copy_overlaps_compute: true\ngpu_block_reduction: {source: \"x\", block_rate: \"-1 GB/s\"}\n",
               "gpu_block_reduction.block_rate", 12);
  expect_error("peer_copy_overlaps_compute: true\n",
               "peer_copy_overlaps_compute: true\ngpu_block_reduction: {block_rate: \"2 GB/s\"}\n",
               "gpu_block_reduction.source", 12);
  expect_error("peer_copy_overlaps_compute: true\n",
               "peer_copy_overlaps_compute: true\ngpu_block_reduction: {source: \"x\", block_rate: \"2 GB/s\", threads: 512}\n",
               "gpu_block_reduction.threads", 12);
}

TEST(RuntimePresets, EveryEmbeddedRuntimeLoadsAndTheDefaultIsOne) {
  const auto list = list_runtimes();
  ASSERT_GE(list.size(), 3u);
  bool has_default = false;
  for (const auto& r : list) {
    const RuntimeProfile p = resolve_runtime(r.name);
    EXPECT_EQ(p.name, r.name);
    EXPECT_FALSE(p.source.empty()) << r.name;
    has_default |= r.name == kDefaultRuntime;
  }
  EXPECT_TRUE(has_default);
  try {
    resolve_runtime("tensorflow");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(kDefaultRuntime), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tiersim::runtime
