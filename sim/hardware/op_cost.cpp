#include "hardware/op_cost.hpp"

#include <algorithm>

#include "core/rate_curve.hpp"

namespace tiersim::hw {

double GpuOpCost::seconds(double remote_bytes, double remote_rate, double reread_bytes) const {
  const double over_link = remote_bytes + reread_bytes;
  if (measured_seconds >= 0) return measured_seconds + (over_link > 0 ? over_link / remote_rate : 0.0);
  double t = std::max({compute_seconds, (memory_bytes - remote_bytes) / local_rate, floor_seconds});
  if (over_link > 0) t = std::max(t, over_link / remote_rate);
  return t + gap_seconds;
}

GpuOpCost gpu_op_cost(const HardwareProfile& hw, const trace::Op& op, const std::string& default_dtype) {
  return gpu_op_cost(hw, op, OpRates::of(hw, default_dtype));
}

GpuOpCost gpu_op_cost(const HardwareProfile& hw, const trace::Op& op, const OpRates& rates) {
  GpuOpCost c;
  const double rate = op.dtype.empty() ? rates.gpu : hw.gpu_rate(op.dtype);
  // Attention over every key, convolutions and fp32 matrix products that name their features have their own measured
  // rates by size; everything else the GEMM's efficiency.
  const bool own_rate = op.unmasked && op.kind == trace::OpKind::Attention && !hw.gpu.attention_efficiency.empty();
  double efficiency = own_rate ? log_interpolated_rate(hw.gpu.attention_efficiency, static_cast<double>(op.flops))
                               : hw.gpu.compute_efficiency;
  if (!op.conv.empty()) {
    const double share = hw.gpu.convolution_share(op.conv, op.conv.positions(op.flops));
    if (share > 0) efficiency = share;
  } else if (op.kind == trace::OpKind::Gemm && op.rows > 0 && !op.writes.empty() && !hw.gpu.fp32_gemm_efficiency.empty() &&
             (op.dtype.empty() ? rates.fp32 : op.dtype == "fp32")) {
    // An fp32 product that gives its output features (op.rows: ComfyUI's text encoders' Linears) by its rows, its
    // output (the first write, 4 bytes an element) over them: cuBLAS's SGEMM tiles over few rows. Products that give
    // none (a LoRA adapter's, a training step's) keep compute_efficiency: the sweep measured layer shapes only.
    const double m = static_cast<double>(op.writes.front().bytes) / 4 / op.rows;
    if (m > 0) efficiency = hw.gpu.fp32_gemm_share(m, op.rows);
  }
  c.compute_seconds = static_cast<double>(op.flops) / (rate * efficiency);
  c.memory_bytes = static_cast<double>(trace::op_bytes(op));
  c.local_rate = hw.gpu.memory_bandwidth * hw.gpu.memory_efficiency;
  c.floor_seconds = hw.gpu.kernel_min_time * op.launches;
  c.measured_seconds = op.gpu_seconds;
  return c;
}

namespace {
// The whole CPU's roofline: FLOPs at its compute rate, bytes at its memory bandwidth.
double cpu_roofline(const HardwareProfile& hw, const trace::Op& op, const OpRates& rates) {
  const double rate = op.dtype.empty() ? rates.host : hw.host_rate(op.dtype);
  const double compute = static_cast<double>(op.flops) / (rate * hw.host.compute_efficiency);
  const double memory =
      static_cast<double>(trace::op_bytes(op)) / (hw.host.memory_bandwidth * hw.host.memory_efficiency);
  return std::max(compute, memory);
}
}  // namespace

// An op with no launches of its own is part of the op before it (llama.cpp's MUL_MAT_ID: one graph node
// for every expert of a kind): it adds no dispatch cost on the CPU either.
static double dispatch(const trace::Op& op, double per_op) { return op.launches > 0 ? per_op : 0.0; }

double cpu_op_seconds(const HardwareProfile& hw, const trace::Op& op, const OpRates& rates) {
  return cpu_roofline(hw, op, rates) + dispatch(op, hw.host.op_overhead);
}

double cpu_op_seconds(const HardwareProfile& hw, const trace::Op& op, const OpRates& rates, const CpuThreads& run) {
  if (run.threads <= 0 || !hw.host.kernels) return cpu_roofline(hw, op, rates) + dispatch(op, run.per_op);
  const CpuKernelSpec& k = *hw.host.kernels;
  const double read = CpuKernelSpec::at(k.read_bandwidth, run.threads);
  // ggml's MUL_MAT_ID where the op reads an expert's slice and the profile measured it for this type, else its
  // dense matrix-vector product.
  const auto& kernels = run.expert_slice && k.gemv_id.count(op.dtype) ? k.gemv_id : k.gemv;
  const auto gemv = op.dtype.empty() ? kernels.end() : kernels.find(op.dtype);
  const double weight_rate = gemv == kernels.end() ? read : CpuKernelSpec::at(gemv->second, run.threads);
  const double other_bytes = std::max(0.0, static_cast<double>(trace::op_bytes(op)) - run.weight_bytes);
  const double memory = run.weight_bytes / weight_rate + other_bytes / read;
  // A matrix-vector product's measured rate already holds its arithmetic (dequantisation, dot products).
  if (op.kind == trace::OpKind::Gemv && gemv != kernels.end()) return memory + dispatch(op, run.per_op);
  const double rate = op.dtype.empty() ? rates.host : hw.host_rate(op.dtype);
  const double share = std::min(1.0, static_cast<double>(run.threads) / k.cores);
  const double compute = static_cast<double>(op.flops) / (rate * hw.host.compute_efficiency * share);
  return std::max(memory, compute) + dispatch(op, run.per_op);
}

double gpu_op_seconds(const HardwareProfile& hw, const trace::Op& op, const std::string& default_dtype) {
  return gpu_op_cost(hw, op, default_dtype).seconds();
}

double cpu_op_seconds(const HardwareProfile& hw, const trace::Op& op, const std::string& default_dtype) {
  return cpu_op_seconds(hw, op, OpRates::of(hw, default_dtype));
}

double host_issue_seconds(const runtime::RuntimeProfile& runtime, const trace::Op& op) {
  if (op.host_seconds >= 0) return op.host_seconds;
  if (op.launches == 0) return 0.0;  // it runs in the kernel of the op before it: no call of its own
  if (!runtime.per_op.empty()) {
    auto it = runtime.per_op.find(op.kind);
    if (it != runtime.per_op.end()) return it->second;
    // gemv and gemm are the same Linear call to the framework: its host cost does not depend on the batch
    // (at batch >= 12 a decode Linear becomes a GEMM; pricing it per launch made decode 29% faster).
    if (op.kind == trace::OpKind::Gemm || op.kind == trace::OpKind::Gemv) {
      it = runtime.per_op.find(op.kind == trace::OpKind::Gemm ? trace::OpKind::Gemv : trace::OpKind::Gemm);
      if (it != runtime.per_op.end()) return it->second;
    }
  }
  return runtime.per_launch * op.launches;
}

}  // namespace tiersim::hw
