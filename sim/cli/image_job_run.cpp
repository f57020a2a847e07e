#include "cli/image_job_run.hpp"

#include <cstdio>
#include <filesystem>

#include "cli/comfy_job_load.hpp"
#include "core/error.hpp"
#include "model/model_family.hpp"
#include "model/text_encoder/text_encoder_trace_generator.hpp"
#include "model/vae/vae_decoder_trace_generator.hpp"

namespace tiersim::app {

namespace {

// ComfyUI's VAE (sd.py VAE: memory_used_decode).
constexpr double kVaeDecodeFactor = 2178.0 * 64;

std::string component(const std::string& model_path, const char* file) {
  const std::filesystem::path p = std::filesystem::path(model_path).parent_path() / file;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec))
    throw InputError(p.string(), 0, "--image-job",
                     std::string("the job reads ") + file + " beside the model's config; it is not there");
  return p.string();
}

}  // namespace

ImageJobResult run_image_job(const RunInputs& in, const Simulation& sim) {
  if (in.trace.model_path.empty() || model::model_family(in.trace.model_path) != model::ModelFamily::Flux)
    throw InputError("", 0, "--image-job", "the whole job is modelled for FLUX only (--model a FLUX config)");
  const model::GenerationOptions& g = in.trace.generation;
  const auto& im = g.image;
  if (im.has_reference())
    throw InputError("", 0, "--image-job", "a Kontext job (--reference) also VAE-encodes its reference image, which the "
                                           "job does not model yet; drop --image-job for the sampler's iterations alone");
  ImageJobResult r;
  r.t5_file = component(in.trace.model_path, "t5-v1_1-xxl.json");
  r.clip_file = component(in.trace.model_path, "clip-vit-large-patch14.json");
  r.vae_file = component(in.trace.model_path, "flux.1-vae.json");
  const model::TextEncoderConfig t5 = model::load_text_encoder_config(r.t5_file);
  const model::TextEncoderConfig clip = model::load_text_encoder_config(r.clip_file);
  const model::VaeConfig vae = model::load_vae_config(r.vae_file);
  // FLUX's T5 sees the prompt padded to 256 tokens at least (--text-tokens); CLIP-L its 77 positions. One prompt
  // at cfg 1 (FLUX.1-dev's guidance is distilled); a negative prompt is a second encode.
  const std::uint32_t prompts = im.guided() ? 2 : 1;
  model::TextEncoderTraceGenerator t5_trace(t5, im.text_tokens, in.image_job->text_encoder_dtype);
  model::TextEncoderTraceGenerator clip_trace(clip, clip.positions, model::WeightDtype::Fp16);
  // ComfyUI decodes in bf16 on GPUs that have it (model_management.vae_dtype), the batch's images at once.
  model::VaeDecoderTraceGenerator vae_trace(vae, im.width, im.height, g.batch, model::WeightDtype::Bf16);
  pipeline::ImageJobSpec& s = r.spec;
  s.free_bytes = in.hw.gpu.memory - in.hw.gpu.reserved;
  s.text_encoder_bytes = placement::weight_bytes(t5_trace.header()) + placement::weight_bytes(clip_trace.header());
  s.dit_bytes = placement::weight_bytes(sim.header);
  s.vae_bytes = 2.0 * static_cast<double>(vae.params());  // ae.safetensors (fp32) made bf16 at load
  s.steps = im.steps;
  // sampler_helpers.estimate_memory: model_base.memory_required (the generator's estimate per prompt, FLUX's
  // memory_usage_factor 3.1) at the batch doubled (cond and uncond) and at the batch.
  s.sampling_minimum = std::stod(sim.header.meta.at("comfy_memory_per_cond"));
  s.sampling_memory = 2 * s.sampling_minimum;
  s.vae_memory = kVaeDecodeFactor * (im.width / 8.0) * (im.height / 8.0) * 2;
  s.text_encoder_name = "text encoders (T5-XXL + CLIP-L)";
  s.dit_name = sim.header.meta.count("model") ? sim.header.meta.at("model") : "diffusion model";
  s.vae_name = "VAE";
  // Where ComfyUI's loads leave each model (the first image's), then each stage run placed so; the encoders and
  // the VAE usually load whole, the diffusion model on a small card partly. T5 and CLIP are one ComfyUI model (one
  // budget); each is placed here within that budget on its own (T5's leaves, the larger, load first either way).
  const pipeline::ImageJob placed = pipeline::comfy_image_job(s, in.hw.host_link);
  const strategy::StrategySpec te_load = comfy_job_load(placed.first.text.budget_free, 0, 0, "--image-job");
  r.t5_seconds = prompts * comfy_job_stage_seconds(in, t5_trace, te_load);
  r.clip_seconds = prompts * comfy_job_stage_seconds(in, clip_trace, te_load);
  s.text_seconds = r.t5_seconds + r.clip_seconds;
  s.vae_seconds = comfy_job_stage_seconds(
      in, vae_trace, comfy_job_load(placed.first.vae.budget_free, s.vae_memory, s.vae_memory, "--image-job"));
  r.dit_strategy = comfy_job_load(placed.first.sampler.budget_free, s.sampling_memory, s.sampling_minimum, "--image-job");
  const Simulation dit = simulate(in.setup(), r.dit_strategy, in.engine, in.trace);
  s.iteration_seconds = result::summarize(dit.result).iteration_median;
  r.job = pipeline::comfy_image_job(s, in.hw.host_link);
  return r;
}

}  // namespace tiersim::app
