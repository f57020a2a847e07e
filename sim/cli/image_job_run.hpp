#pragma once
// `sim run --image-job`: a FLUX or Qwen-Image run's whole ComfyUI text-to-image job (FLUX.1 Kontext's with its reference
// image's VAE encode). Its text encoders and its VAE are
// read from the config files beside the model's (FLUX: t5-v1_1-xxl.json, clip-vit-large-patch14.json, flux.1-vae.json;
// Qwen-Image: qwen2.5-vl-7b.json, qwen-image-vae.json), their forwards generated (model/text_encoder, model/vae) and
// run by the event engine on the same machine; ComfyUI's loads and unloads between the stages come from
// pipeline/image_job, and every stage (the diffusion model's iterations too, whatever --policy placed the run above
// with) runs its model placed as ComfyUI's own load leaves it (comfy.lowvram of that era, the rest cast per call from
// pageable memory on the compute stream).
#include <string>
#include <utility>
#include <vector>

#include "cli/run_inputs.hpp"
#include "cli/simulation.hpp"
#include "pipeline/image_job.hpp"

namespace tiersim::app {

struct ImageJobResult {
  pipeline::ImageJobSpec spec;
  pipeline::ImageJob job;
  // Each text encoder's forwards (every prompt it encodes) as the first image's load places it: ("T5", s), ("CLIP",
  // s) for FLUX; ("Qwen2.5-VL", s) for Qwen-Image.
  std::vector<std::pair<std::string, double>> text_seconds;
  strategy::StrategySpec dit_strategy;  // how the job places the diffusion model (ComfyUI's own load, not --policy)
};

// Throws InputError naming --image-job for a model other than FLUX or Qwen-Image, a job the model does not run this
// way (Qwen-Image-Edit's reference image, Qwen-Image's batch) or a missing component file, and --text-encoder-dtype for a format its
// encoder is not published in.
ImageJobResult run_image_job(const RunInputs& in, const Simulation& sim);

}  // namespace tiersim::app
