#include "cli/image_job_run.hpp"

#include <algorithm>
#include <functional>
#include <memory>

#include "cli/comfy_job_load.hpp"
#include "core/error.hpp"
#include "model/model_family.hpp"
#include "model/text_encoder/llm_text_encoder_trace_generator.hpp"
#include "model/text_encoder/text_encoder_trace_generator.hpp"
#include "model/vae/vae_decoder_trace_generator.hpp"
#include "model/vae/vae_encoder_trace_generator.hpp"
#include "model/vae/wan_vae_config.hpp"
#include "model/vae/wan_vae_decoder_trace_generator.hpp"
#include "pipeline/comfy_vae_memory.hpp"

namespace tiersim::app {

namespace {

constexpr const char* kFlag = "--image-job";

// Qwen-Image's prompt template (comfy/text_encoders/qwen_image.py QwenImageTokenizer.llama_template): the system turn
// and "<|im_start|>user\n" come to 34 tokens before the prompt, which the encoder runs and encode_token_weights then
// cuts (template_end: the second <|im_start|>, + 3); the transformer sees the prompt and the template's last 5
// (--text-tokens counts those). Counted with ComfyUI's own tokenizer files on the GPU machine
// (experiments/validate/qwen25_vl_encode.py, results/validation/qwen-image-te).
constexpr std::uint64_t kQwenImageTemplatePrefix = 34;

using Forward = std::function<std::unique_ptr<trace::StepSource>(std::uint32_t prompt)>;

// A text encoder of the job: its label and its forward of prompt 0 (positive) or 1 (negative).
struct Encoder {
  std::string label;
  Forward forward;
};

}  // namespace

ImageJobResult run_image_job(const RunInputs& in, const Simulation& sim) {
  const model::ModelFamily family =
      in.trace.model_path.empty() ? model::ModelFamily::Decoder : model::model_family(in.trace.model_path);
  const bool flux = family == model::ModelFamily::Flux;
  if (!flux && family != model::ModelFamily::QwenImage)
    throw InputError("", 0, kFlag, "the whole job is modelled for FLUX and Qwen-Image (--model a FLUX or Qwen-Image config)");
  const model::GenerationOptions& g = in.trace.generation;
  const auto& im = g.image;
  if (im.has_reference() && !flux)
    throw InputError("", 0, kFlag,
                     "a Qwen-Image-Edit job (--reference) also encodes its reference image with Qwen2.5-VL's vision "
                     "tower (TextEncodeQwenImageEdit), which the job does not model yet; drop --image-job for the "
                     "sampler's iterations alone");
  // One prompt at cfg 1 (FLUX.1-dev's guidance is distilled); a guided run's negative prompt is a second encode
  // (Qwen-Image's template: cfg 2.5).
  const std::uint32_t prompts = im.guided() ? 2 : 1;
  const ImageJobOptions& options = *in.image_job;
  const std::vector<std::string> formats = job_text_encoder_dtypes(in.trace.model_path);
  if (std::find(formats.begin(), formats.end(), options.text_encoder_dtype) == formats.end())
    throw InputError("", 0, "--text-encoder-dtype", "must be " + formats[0] + " or " + formats[1] + " for this model, not '" +
                                                       options.text_encoder_dtype + "'");
  ImageJobResult r;
  pipeline::ImageJobSpec& s = r.spec;
  std::vector<Encoder> encoders;
  std::function<std::unique_ptr<trace::StepSource>()> vae_decode, reference_encode;
  if (flux) {
    const model::TextEncoderConfig t5 =
        model::load_text_encoder_config(job_component(in.trace.model_path, "t5-v1_1-xxl.json", kFlag));
    const model::TextEncoderConfig clip =
        model::load_text_encoder_config(job_component(in.trace.model_path, "clip-vit-large-patch14.json", kFlag));
    const model::VaeConfig vae = model::load_vae_config(job_component(in.trace.model_path, "flux.1-vae.json", kFlag));
    // FLUX's T5 sees the prompt padded to 256 tokens at least (--text-tokens), both prompts alike; CLIP-L its 77
    // positions.
    const model::WeightDtype t5_dtype = options.weight_dtype();
    encoders.push_back({"T5", [t5, t5_dtype, tokens = im.text_tokens](std::uint32_t) {
                          return std::make_unique<model::TextEncoderTraceGenerator>(t5, tokens, t5_dtype);
                        }});
    encoders.push_back({"CLIP", [clip](std::uint32_t) {
                          return std::make_unique<model::TextEncoderTraceGenerator>(clip, clip.positions,
                                                                                    model::WeightDtype::Fp16);
                        }});
    // ComfyUI decodes in bf16 on GPUs that have it (model_management.vae_dtype), the batch's images at once.
    vae_decode = [vae, w = im.width, h = im.height, batch = g.batch] {
      return std::make_unique<model::VaeDecoderTraceGenerator>(vae, w, h, batch, model::WeightDtype::Bf16);
    };
    s.vae_bytes = 2.0 * static_cast<double>(vae.params());  // ae.safetensors (fp32) made bf16 at load
    s.vae_memory = pipeline::comfy::ae_decode_memory(im.width, im.height, 2);
    if (im.has_reference()) {
      // FLUX.1 Kontext: the reference image's VAEEncode (ComfyUI's template: LoadImage, FluxKontextImageScale,
      // VAEEncode, ReferenceLatent), one image, in the VAE's dtype.
      reference_encode = [vae, w = im.reference_width, h = im.reference_height] {
        return std::make_unique<model::VaeEncoderTraceGenerator>(vae, w, h, 1, model::WeightDtype::Bf16);
      };
      s.reference = true;
      s.encode_memory = pipeline::comfy::ae_encode_memory(im.reference_width, im.reference_height, 2);
    }
    s.text_encoder_name = "text encoders (T5-XXL + CLIP-L)";
    s.vae_name = "VAE";
  } else {
    if (g.batch != 1)
      throw InputError("", 0, "--batch", "the Qwen-Image job decodes one image (its Wan VAE decode is of one latent)");
    const model::LlmTextEncoderConfig te =
        model::load_llm_text_encoder_config(job_component(in.trace.model_path, "qwen2.5-vl-7b.json", kFlag));
    const model::WanVaeConfig vae =
        model::load_wan_vae_config(job_component(in.trace.model_path, "qwen-image-vae.json", kFlag));
    // The prompt in its template, not padded: the positive prompt's tokens and the negative's (an empty negative
    // prompt is the template alone).
    encoders.push_back({"Qwen2.5-VL", [te, dtype = options.weight_dtype(), scaled = options.scaled(),
                                       positive = im.text_tokens, negative = im.negative_tokens](std::uint32_t prompt) {
                          const std::uint64_t tokens = kQwenImageTemplatePrefix + (prompt == 0 ? positive : negative);
                          return std::make_unique<model::LlmTextEncoderTraceGenerator>(
                              te, tokens, dtype, scaled, prompt == 0 ? "--text-tokens" : "--negative-tokens");
                        }});
    // qwen_image_vae.safetensors in ComfyUI's vae_dtype (bf16 on GPUs that have it), the Wan 2.1 VAE over one frame.
    vae_decode = [vae, w = im.width, h = im.height] {
      return std::make_unique<model::WanVaeDecoderTraceGenerator>(vae, w, h, 1, model::WeightDtype::Bf16);
    };
    s.vae_bytes = 2.0 * static_cast<double>(vae.params());
    s.vae_memory = pipeline::comfy::wan21_vae_decode_memory(im.width, im.height, 2);
    s.text_encoder_name = "text encoder (" + te.name + ")";
    s.vae_name = vae.name;
  }
  s.free_bytes = in.hw.gpu.memory - in.hw.gpu.reserved;
  for (const Encoder& e : encoders) s.text_encoder_bytes += placement::weight_bytes(e.forward(0)->header());
  s.dit_bytes = placement::weight_bytes(sim.header);
  s.steps = im.steps;
  // sampler_helpers.estimate_memory: model_base.memory_required (the generator's estimate per prompt: FLUX's
  // memory_usage_factor 3.1) at the batch doubled (cond and uncond) and at the batch.
  s.sampling_minimum = std::stod(sim.header.meta.at("comfy_memory_per_cond"));
  s.sampling_memory = 2 * s.sampling_minimum;
  s.dit_name = sim.header.meta.count("model") ? sim.header.meta.at("model") : "diffusion model";
  // Where ComfyUI's loads leave each model (the first image's), then each stage run placed so; the encoders and
  // the VAE usually load whole, the diffusion model on a small card partly. FLUX's T5 and CLIP are one ComfyUI model
  // (one budget); each is placed here within that budget on its own (T5's leaves, the larger, load first either way).
  const pipeline::ImageJob placed = pipeline::comfy_image_job(s, in.hw.host_link);
  const strategy::StrategySpec te_load = comfy_job_load(placed.first.text.budget_free, 0, 0, kFlag);
  for (const Encoder& e : encoders) {
    double seconds = 0;
    for (std::uint32_t p = 0; p < prompts; ++p) seconds += comfy_job_stage_seconds(in, *e.forward(p), te_load);
    r.text_seconds.emplace_back(e.label, seconds);
    s.text_seconds += seconds;
  }
  if (reference_encode)
    s.encode_seconds = comfy_job_stage_seconds(
        in, *reference_encode(), comfy_job_load(placed.first.encode.budget_free, s.encode_memory, s.encode_memory, kFlag));
  s.vae_seconds = comfy_job_stage_seconds(
      in, *vae_decode(), comfy_job_load(placed.first.vae.budget_free, s.vae_memory, s.vae_memory, kFlag));
  r.dit_strategy = comfy_job_load(placed.first.sampler.budget_free, s.sampling_memory, s.sampling_minimum, kFlag);
  const Simulation dit = simulate(in.setup(), r.dit_strategy, in.engine, in.trace);
  s.iteration_seconds = result::summarize(dit.result).iteration_median;
  r.job = pipeline::comfy_image_job(s, in.hw.host_link);
  return r;
}

}  // namespace tiersim::app
