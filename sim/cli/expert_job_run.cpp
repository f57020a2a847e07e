#include "cli/expert_job_run.hpp"

#include <algorithm>
#include <optional>
#include <string>

#include "cli/comfy_job_load.hpp"
#include "core/error.hpp"
#include "model/model_family.hpp"
#include "model/text_encoder/text_encoder_trace_generator.hpp"
#include "model/vae/wan_vae_decoder_trace_generator.hpp"
#include "model/wan/wan_config.hpp"
#include "pipeline/comfy_vae_memory.hpp"
#include "placement/placement.hpp"

namespace tiersim::app {

ExpertJobResult run_expert_job(const RunInputs& in, const Simulation& sim) {
  const char* flag = in.video_job ? "--video-job" : "--sampler-job";
  // The Wan generator writes where the low-noise expert takes over for a two-expert model only (a model description:
  // a trace file's meta is not read here).
  const auto& meta = sim.header.meta;
  const bool two = meta.count("switch_step") > 0;
  if (in.trace.model_path.empty())
    throw InputError("", 0, flag, "is a job of a model description (--model a Wan config), not of a trace file");
  if (!two && !in.video_job)
    throw InputError("", 0, "--sampler-job",
                     "is the sampling of a model with two experts (Wan 2.2 A14B: a Wan config with boundary_ratio); "
                     "a FLUX or Qwen-Image run's whole job is --image-job, a Wan video's --video-job");
  if (in.video_job && in.trace.generation.batch != 1)
    throw InputError("", 0, "--batch", "--video-job is one video at a time (its VAE decode and ComfyUI's estimate are a "
                                       "video's); drop --batch or the job");
  if (in.video_job && model::model_family(in.trace.model_path) != model::ModelFamily::Wan)
    throw InputError("", 0, "--video-job", "is a Wan video's job (--model a Wan config); a FLUX or Qwen-Image run's is --image-job");
  ExpertJobResult r;
  pipeline::ExpertJobSpec& s = r.spec;
  s.free_bytes = in.hw.gpu.memory - in.hw.gpu.reserved;
  s.expert_bytes = placement::weight_bytes(sim.header);
  s.two_experts = two;
  const std::uint32_t steps = in.trace.generation.image.steps;
  const std::uint32_t switch_step = two ? static_cast<std::uint32_t>(std::stoul(meta.at("switch_step"))) : steps;
  s.high_steps = switch_step;
  s.low_steps = steps - switch_step;
  // sampler_helpers.estimate_memory: model_base.memory_required at the batch doubled (cond and uncond) as the
  // requirement, at the batch as the minimum (the generator's estimate per prompt: WAN21_T2V's, which an A14B expert
  // is to ComfyUI's model detection).
  s.sampling_minimum = std::stod(meta.at("comfy_memory_per_cond"));
  s.sampling_memory = 2 * s.sampling_minimum;
  s.high_name = two ? "high-noise expert" : "diffusion model";
  s.low_name = "low-noise expert";
  s.iteration_seconds = [&](double budget_free) {
    const strategy::StrategySpec load = comfy_job_load(budget_free, s.sampling_memory, s.sampling_minimum, flag);
    return result::summarize(simulate(in.setup(), load, in.engine, in.trace).result).iteration_median;
  };
  std::optional<model::WanVaeConfig> vae;
  std::optional<model::TextEncoderConfig> text;
  const auto& im = in.trace.generation.image;
  if (in.video_job) {
    if (model::load_wan_config(in.trace.model_path).in_channels != 16)
      throw InputError(in.trace.model_path, 0, "--video-job",
                       "Wan 2.2 TI2V-5B decodes with the Wan 2.2 VAE (48 latent channels, comfy/ldm/wan/vae2_2.py), "
                       "which is not modelled; its sampling alone is the run without --video-job");
    r.vae_file = job_component(in.trace.model_path, "wan2.1-vae.json", flag);
    r.text_encoder_file = job_component(in.trace.model_path, "umt5-xxl.json", flag);
    vae = model::load_wan_vae_config(r.vae_file);
    text = model::load_text_encoder_config(r.text_encoder_file);
    // Wan's umT5 tokenizer pads to 512 tokens at least (comfy/text_encoders/wan.py min_length 512); a guided run
    // encodes the negative prompt too (a second CLIPTextEncode).
    const std::uint64_t tokens = std::max<std::uint64_t>(512, im.text_tokens);
    const std::uint32_t prompts = im.guided() ? 2 : 1;
    const model::WeightDtype te_dtype = in.video_job->weight_dtype();
    s.text_encoder_bytes = placement::weight_bytes(model::TextEncoderTraceGenerator(*text, tokens, te_dtype).header());
    s.text_encoder_name = "umT5-XXL";
    s.text_seconds = [&, tokens, prompts, te_dtype](double budget_free) {
      model::TextEncoderTraceGenerator encode(*text, tokens, te_dtype);
      return prompts * comfy_job_stage_seconds(in, encode, comfy_job_load(budget_free, 0, 0, flag));
    };
    // wan_2.1_vae.safetensors in ComfyUI's vae_dtype: bf16 on GPUs that have it.
    s.vae_bytes = 2.0 * static_cast<double>(vae->params());
    s.vae_memory = pipeline::comfy::wan21_vae_decode_memory(im.width, im.height, 2);
    s.vae_name = vae->name;
    s.vae_seconds = [&](double budget_free) {
      model::WanVaeDecoderTraceGenerator decode(*vae, im.width, im.height, im.frames, model::WeightDtype::Bf16);
      return comfy_job_stage_seconds(in, decode, comfy_job_load(budget_free, s.vae_memory, s.vae_memory, flag));
    };
  }
  r.job = pipeline::comfy_expert_job(s, in.hw.host_link);
  s.iteration_seconds = nullptr;  // they hold references to this call's locals
  s.vae_seconds = nullptr;
  s.text_seconds = nullptr;
  return r;
}

}  // namespace tiersim::app
