#pragma once
// How long one op takes where it runs: a roofline (FLOPs against the compute rate, bytes against
// memory bandwidth, each scaled by its efficiency) with a floor per kernel launch. A measured time
// in the trace wins over the model. Both engines use these functions, so they agree on op times.
#include <string>

#include "hardware/profile.hpp"
#include "trace/trace.hpp"

namespace tiersim::hw {

double gpu_op_seconds(const HardwareProfile& hw, const trace::Op& op, const std::string& default_dtype);
double cpu_op_seconds(const HardwareProfile& hw, const trace::Op& op, const std::string& default_dtype);
// Host time to issue the op's kernels: measured host time if the trace has it, else per launch.
double host_issue_seconds(const HardwareProfile& hw, const trace::Op& op);

}  // namespace tiersim::hw
