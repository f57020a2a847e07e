#include "cli/expert_job_run.hpp"

#include <string>

#include "cli/comfy_job_load.hpp"
#include "core/error.hpp"
#include "model/model_family.hpp"
#include "model/wan/wan_config.hpp"
#include "placement/placement.hpp"

namespace tiersim::app {

ExpertJobResult run_expert_job(const RunInputs& in, const Simulation& sim) {
  const std::string& path = in.trace.model_path;
  if (path.empty() || model::model_family(path) != model::ModelFamily::Wan || !model::load_wan_config(path).two_experts())
    throw InputError("", 0, "--sampler-job",
                     "is the sampling of a model with two experts (Wan 2.2 A14B: a Wan config with boundary_ratio); "
                     "a FLUX run's whole job is --image-job");
  const model::WanConfig wan = model::load_wan_config(path);
  const model::GenerationOptions& g = in.trace.generation;
  const auto& im = g.image;
  const std::uint32_t switch_step = static_cast<std::uint32_t>(std::stoul(sim.header.meta.at("switch_step")));
  ExpertJobResult r;
  pipeline::ExpertJobSpec& s = r.spec;
  s.free_bytes = in.hw.gpu.memory - in.hw.gpu.reserved;
  s.expert_bytes = placement::weight_bytes(sim.header);
  s.high_steps = switch_step;
  s.low_steps = im.steps - switch_step;
  // model_base.memory_required (flash/SDPA branch): area x the compute dtype's bytes x 0.01 x memory_usage_factor, in
  // MiB, area = the noise's batch x its latent frames x (H/8) x (W/8); WAN21_T2V (a 16-channel Wan, which an A14B
  // expert is to ComfyUI's model detection) sets memory_usage_factor = dim / 2222 (comfy/supported_models.py). fp8
  // weights compute in bf16 (manual cast): 2 bytes, as bf16 and fp16; fp32 4. sampler_helpers.estimate_memory
  // passes the batch doubled (cond and uncond) as the requirement and the batch as the minimum.
  const double dtype_bytes = g.dtype == model::WeightDtype::Fp32 ? 4.0 : 2.0;
  const double latent_frames = (im.frames - 1) / 4 + 1;
  const double area = g.batch * latent_frames * (im.height / static_cast<double>(wan.vae_spatial)) *
                      (im.width / static_cast<double>(wan.vae_spatial));
  const double factor = static_cast<double>(wan.dim()) / 2222.0;
  s.sampling_minimum = area * dtype_bytes * 0.01 * factor * 1048576.0;
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
