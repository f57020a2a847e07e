#pragma once
// An optimistic bound on what the event engine predicts, cheap enough to screen thousands of candidates
// (sim plan). No step can end before its busiest resource has done its own work:
//   host     every action's issue cost, the ops the host runs itself, the transfers it waits for;
//   stream   each in-order stream's items back to back: a GPU's kernels at their resident cost (a kernel on
//            managed memory at the least any split of its bytes between HBM and the link can cost) and the
//            copies and activation transfers queued on it, each copy stream's copies, every transfer at its
//            latency plus its bytes at its solo rate (a shared link only slows a transfer);
//   link     each link direction's bytes at the link's capacity.
// Waits, contention, faults, evictions and prefetch misses only add to these, so the event engine's step
// takes at least the largest of them (tests/engine/step_bound_test.cpp checks it over random machines,
// strategies and models). Unlike the analytic engine (a closed-form estimate that can land on either side),
// it is never above the event engine.
#include <vector>

#include "placement/placement.hpp"
#include "replay/run_setup.hpp"
#include "replay/step_plan.hpp"
#include "trace/trace.hpp"

namespace tiersim::analytic {

struct StepBound {
  double host = 0;    // s the host thread is busy or waiting on its own transfers
  double stream = 0;  // s of the busiest in-order stream
  double link = 0;    // s of the busiest link direction at full capacity
  double seconds() const;
};

class StepBounder {
 public:
  StepBounder(const replay::RunSetup& setup, const trace::Header& header, const placement::Placement& placement);
  StepBound bound(const trace::Step& step);

 private:
  const replay::RunSetup& setup_;
  replay::StepPlanner planner_;
  replay::StepPlan plan_;
  std::vector<double> compute_;  // by GPU: its compute stream's items
};

// A run's summary bounded from its representative steps: every prefill step, the first and the last decode
// step (decode steps differ in their context only, and no bound term falls as the context grows, so every
// decode step, the median too, is bounded by the smaller of the two) and the first diffusion iteration (all
// alike).
struct RunBound {
  double prefill_seconds = 0;   // the prefill takes at least this
  double decode_tps = 0;        // decode tokens/s is at most this (0: no decode step)
  double iteration_seconds = 0; // a diffusion iteration takes at least this (0: no iteration step)
};
RunBound bound_run(const replay::RunSetup& setup, const trace::Header& header, const placement::Placement& placement,
                   const std::vector<trace::Step>& steps);

}  // namespace tiersim::analytic
