#include "hardware/op_cost.hpp"

#include <algorithm>

namespace tiersim::hw {

double gpu_op_seconds(const HardwareProfile& hw, const trace::Op& op, const std::string& default_dtype) {
  if (op.gpu_seconds >= 0) return op.gpu_seconds;
  const std::string& dtype = op.dtype.empty() ? default_dtype : op.dtype;
  const double compute = static_cast<double>(op.flops) / (hw.gpu_rate(dtype) * hw.gpu.compute_efficiency);
  const double memory =
      static_cast<double>(trace::op_bytes(op)) / (hw.gpu.memory_bandwidth * hw.gpu.memory_efficiency);
  return std::max({compute, memory, hw.gpu.kernel_min_time * op.launches});
}

double cpu_op_seconds(const HardwareProfile& hw, const trace::Op& op, const std::string& default_dtype) {
  const std::string& dtype = op.dtype.empty() ? default_dtype : op.dtype;
  const double compute = static_cast<double>(op.flops) / (hw.host_rate(dtype) * hw.host.compute_efficiency);
  const double memory =
      static_cast<double>(trace::op_bytes(op)) / (hw.host.memory_bandwidth * hw.host.memory_efficiency);
  return std::max(compute, memory) + hw.host.op_overhead;
}

double host_issue_seconds(const HardwareProfile& hw, const trace::Op& op) {
  if (op.host_seconds >= 0) return op.host_seconds;
  return hw.framework.per_launch * op.launches;
}

}  // namespace tiersim::hw
