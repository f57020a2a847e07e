#pragma once
// How long one op takes where it runs: a roofline (FLOPs against the compute rate, bytes against
// memory bandwidth, each scaled by its efficiency) with a floor per kernel launch. A measured time
// in the trace wins over the model. Both engines use these functions, so they agree on op times.
#include <string>

#include "hardware/profile.hpp"
#include "runtime/runtime_profile.hpp"
#include "trace/trace.hpp"

namespace tiersim::hw {

// An op's GPU time by its parts, so that the managed-memory model can re-price it when some of its
// bytes are read over the link instead of from device memory.
struct GpuOpCost {
  double compute_seconds = 0;  // FLOPs at the dtype's rate
  double memory_bytes = 0;     // bytes it moves
  double local_rate = 0;       // bytes/s from device memory
  double floor_seconds = 0;    // kernel floor per launch
  double measured_seconds = -1;
  double gap_seconds = 0;      // the runtime's GPU gap before each host-launched kernel (no CUDA graph)
  // Seconds when `remote_bytes` of its bytes are read over the link at `remote_rate`, and `reread_bytes` more cross
  // it again (a matrix product's host-resident weight, once per tile of its rows).
  double seconds(double remote_bytes = 0, double remote_rate = 1, double reread_bytes = 0) const;
};
GpuOpCost gpu_op_cost(const HardwareProfile& hw, const trace::Op& op, const std::string& default_dtype);

// The compute rates an op runs at, resolved from dtype names once (the step planner keeps the trace's
// default dtype's and looks up only ops that name another): no string work per op per step.
struct OpRates {
  double gpu = 0;   // FLOP/s of the GPU for the trace's default dtype
  double host = 0;  // FLOP/s of the host for it
  bool fp32 = false;  // the default dtype is fp32 (its matrix products take gpu.fp32_gemm_efficiency)
  static OpRates of(const HardwareProfile& hw, const std::string& dtype) {
    return {hw.gpu_rate(dtype), hw.host_rate(dtype), dtype == "fp32"};
  }
};
GpuOpCost gpu_op_cost(const HardwareProfile& hw, const trace::Op& op, const OpRates& default_rates);
double cpu_op_seconds(const HardwareProfile& hw, const trace::Op& op, const OpRates& default_rates);
// An op run on the CPU by a runtime with a thread pool (llama.cpp's ggml, -t threads): with the host's
// measured CPU kernels (host.cpu_kernels) its weight bytes move at the gemv rate of the op's weight type
// (op.dtype), its other bytes at the read bandwidth, both at `threads`; its FLOPs at the CPU's compute
// scaled by threads / cores when that is longer (not for a GEMV with a measured rate, which holds its
// arithmetic); plus `per_op` (the runtime's cost of one graph node).
// Without cpu_kernels, or with threads = 0, it is cpu_op_seconds above with `per_op` for op_overhead.
struct CpuThreads {
  int threads = 0;
  double weight_bytes = 0;  // bytes of the op's reads that are weights
  bool expert_slice = false;  // the weight read is part of a tensor (one expert's slice): the gemv_id rates
  double per_op = 0;
};
double cpu_op_seconds(const HardwareProfile& hw, const trace::Op& op, const OpRates& default_rates, const CpuThreads& run);
double gpu_op_seconds(const HardwareProfile& hw, const trace::Op& op, const std::string& default_dtype);
double cpu_op_seconds(const HardwareProfile& hw, const trace::Op& op, const std::string& default_dtype);
// Host time to issue the op's kernels: measured host time if the trace has it, else the
// runtime's per_op for its kind (gemv and gemm price each other: both are one Linear call), else per launch.
double host_issue_seconds(const runtime::RuntimeProfile& runtime, const trace::Op& op);

}  // namespace tiersim::hw
