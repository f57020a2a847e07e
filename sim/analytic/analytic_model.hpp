#pragma once
// The closed-form engine. A step is cut into segments at every point where the host waits for the
// device (a pageable copy, an activation copy, a CPU op, the end-of-step sync). Within a segment the
// host, the compute stream and each copy stream are assumed to overlap perfectly, so its time is the
// largest of three bounds:
//   host-bound     H + d_last                 (all issue time, then the last device item)
//   compute-bound  h0 + G + w                 (first issue, all compute-stream work, the wait of the
//                                              first kernel for its prefetched weights)
//   link-bound     x0 + X + g_after           (first copy issue, all copies of a stream, the compute
//                                              that must follow the last copy)
// Exact when one resource dominates the whole segment; it under-estimates when the bottleneck moves
// between layers (a copy-bound layer next to a compute-bound one with shallow prefetch) and when
// transfers contend for one link. tests/engine/analytic_vs_event_test.cpp pins both.
#include "hardware/profile.hpp"
#include "placement/placement.hpp"
#include "replay/run_setup.hpp"
#include "result/run_result.hpp"
#include "trace/trace.hpp"

namespace tiersim::analytic {

result::RunResult run_analytic(const replay::RunSetup& setup, const placement::Placement& placement,
                               trace::StepSource& source);

}  // namespace tiersim::analytic
