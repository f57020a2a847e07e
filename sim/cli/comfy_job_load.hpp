#pragma once
// How a ComfyUI job's node runs its model: placed as ComfyUI's load of that era leaves it (comfy.lowvram
// version=2025-07 with the node's memory estimates: no pinning, no offload streams), the offloaded leaves cast per
// forward from pageable memory on the compute stream, whatever --policy the run itself used. Shared by the jobs of
// `sim run --image-job` and `--sampler-job`.
#include <string>

#include "cli/run_inputs.hpp"
#include "policies/strategy/strategy.hpp"
#include "trace/trace.hpp"

namespace tiersim::app {

// `free`: the free memory the load's budget is taken from (pipeline::StageCost::budget_free); `flag` names the option
// in any error.
strategy::StrategySpec comfy_job_load(double free, double memory_required, double minimum, const char* flag);

// A component's config the job reads beside the model's (`file`, e.g. wan2.1-vae.json): its path, or an InputError
// naming that path and `flag` when it is not there.
std::string job_component(const std::string& model_path, const char* file, const char* flag);

// One step of `source` on the run's machine with its model placed by `load`: the step's seconds.
double comfy_job_stage_seconds(const RunInputs& in, trace::StepSource& source, const strategy::StrategySpec& load);

}  // namespace tiersim::app
