#pragma once
// The discrete-event engine: replays a trace's steps against the hardware under a placement. The host
// thread, the compute stream, the copy streams and the links are servers in simulated time; copies
// and kernels overlap exactly as stream order and dependencies allow.
#include "hardware/profile.hpp"
#include "placement/placement.hpp"
#include "replay/run_setup.hpp"
#include "result/run_result.hpp"
#include "report/timeline.hpp"
#include "trace/trace.hpp"

namespace tiersim::replay {

// With `timeline`, the spans of the first steps it records are added to it.
result::RunResult run_event_engine(const RunSetup& setup, const placement::Placement& placement,
                                   trace::StepSource& source, report::Timeline* timeline = nullptr);

}  // namespace tiersim::replay
