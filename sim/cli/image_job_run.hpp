#pragma once
// `sim run --image-job`: a FLUX run's whole ComfyUI text-to-image job. Its text encoders (T5-XXL and CLIP-L) and
// its VAE are read from the config files beside the model's (t5-v1_1-xxl.json, clip-vit-large-patch14.json,
// flux.1-vae.json), their forwards generated (model/text_encoder, model/vae) and run by the event engine on the same
// machine; ComfyUI's loads and unloads between the stages come from pipeline/image_job, and every stage (the
// diffusion model's iterations too, whatever --policy placed the run above with) runs its model placed as ComfyUI's
// own load leaves it (comfy.lowvram of that era, the rest cast per call from pageable memory on the compute stream).
#include <optional>
#include <string>

#include "cli/run_inputs.hpp"
#include "cli/simulation.hpp"
#include "pipeline/image_job.hpp"

namespace tiersim::app {

struct ImageJobResult {
  pipeline::ImageJobSpec spec;
  pipeline::ImageJob job;
  double t5_seconds = 0, clip_seconds = 0;
  std::string t5_file, clip_file, vae_file;
  strategy::StrategySpec dit_strategy;  // how the job places the diffusion model (ComfyUI's own load, not --policy)
};

// Throws InputError naming --image-job for a model other than FLUX or a missing component file.
ImageJobResult run_image_job(const RunInputs& in, const Simulation& sim);

}  // namespace tiersim::app
