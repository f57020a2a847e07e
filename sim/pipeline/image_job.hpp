#pragma once
// A ComfyUI text-to-image job, stage by stage (CLIPTextEncode, a reference image's VAEEncode where the job has one,
// the sampler's iterations, VAEDecode), with the model loads and unloads ComfyUI's model management makes between them
// (comfy_model_management.hpp), for the first image and for the next one with the same prompt (ComfyUI's execution
// cache skips the text encoders and the reference's encode) or a new one, the reference kept
// (experiments/frameworks/comfyui_model_management.md, section 4). Each stage's compute time comes from the engine;
// each load and unload is a synchronous pageable copy priced by the host link's curves.
#include <cstdint>
#include <string>
#include <vector>

#include "hardware/profile.hpp"
#include "pipeline/comfy_stage.hpp"

namespace tiersim::pipeline {

struct ImageJobSpec {
  double free_bytes = 0;                 // the GPU's memory with nothing loaded (less the profile's reserve)
  double text_encoder_bytes = 0, dit_bytes = 0, vae_bytes = 0;
  double text_seconds = 0;               // the text encoders' forwards (all of them)
  double iteration_seconds = 0;          // one sampler step, as the run places the diffusion model
  std::uint32_t steps = 0;
  double vae_seconds = 0;                // the decode
  double sampling_memory = 0, sampling_minimum = 0;  // model_base.memory_required at batch 2 and at batch 1
  double vae_memory = 0;                 // VAE.memory_used_decode
  // A reference image (FLUX.1 Kontext's ReferenceLatent): its VAEEncode's seconds and VAE.memory_used_encode.
  bool reference = false;
  double encode_seconds = 0, encode_memory = 0;
  std::string text_encoder_name = "text encoders", dit_name = "diffusion model", vae_name = "VAE";
};

struct ImageCost {
  StageCost text, encode, sampler, vae;  // encode: the reference's VAEEncode (ran false without one or cached)
  double seconds() const;
  double h2d_bytes() const { return text.h2d_bytes + encode.h2d_bytes + sampler.h2d_bytes + vae.h2d_bytes; }
  double d2h_bytes() const { return text.d2h_bytes + encode.d2h_bytes + sampler.d2h_bytes + vae.d2h_bytes; }
};

struct ImageJob {
  ImageCost first, same_prompt, new_prompt;
  double dit_loaded = 0;  // the diffusion model's bytes on the GPU during the first image's iterations
};

// `link`: the host link (its pageable curves price the copies).
ImageJob comfy_image_job(const ImageJobSpec& spec, const hw::HostLinkSpec& link);

}  // namespace tiersim::pipeline
