#include "cli/expert_job_run.hpp"

#include <string>

#include "cli/comfy_job_load.hpp"
#include "core/error.hpp"
#include "placement/placement.hpp"

namespace tiersim::app {

ExpertJobResult run_expert_job(const RunInputs& in, const Simulation& sim) {
  // The Wan generator writes where the low-noise expert takes over for a two-expert model only (a model description:
  // a trace file's meta is not read here).
  const auto& meta = sim.header.meta;
  if (in.trace.model_path.empty() || !meta.count("switch_step"))
    throw InputError("", 0, "--sampler-job",
                     "is the sampling of a model with two experts (Wan 2.2 A14B: a Wan config with boundary_ratio); "
                     "a FLUX run's whole job is --image-job");
  const std::uint32_t switch_step = static_cast<std::uint32_t>(std::stoul(meta.at("switch_step")));
  ExpertJobResult r;
  pipeline::ExpertJobSpec& s = r.spec;
  s.free_bytes = in.hw.gpu.memory - in.hw.gpu.reserved;
  s.expert_bytes = placement::weight_bytes(sim.header);
  s.high_steps = switch_step;
  s.low_steps = in.trace.generation.image.steps - switch_step;
  // sampler_helpers.estimate_memory: model_base.memory_required at the batch doubled (cond and uncond) as the
  // requirement, at the batch as the minimum (the generator's estimate per prompt: WAN21_T2V's, which an A14B expert
  // is to ComfyUI's model detection).
  s.sampling_minimum = std::stod(meta.at("comfy_memory_per_cond"));
  s.sampling_memory = 2 * s.sampling_minimum;
  s.high_name = "high-noise expert";
  s.low_name = "low-noise expert";
  s.iteration_seconds = [&](double budget_free) {
    const strategy::StrategySpec load = comfy_job_load(budget_free, s.sampling_memory, s.sampling_minimum, "--sampler-job");
    return result::summarize(simulate(in.setup(), load, in.engine, in.trace).result).iteration_median;
  };
  r.job = pipeline::comfy_expert_job(s, in.hw.host_link);
  s.iteration_seconds = nullptr;  // it holds references to this call's locals
  return r;
}

}  // namespace tiersim::app
