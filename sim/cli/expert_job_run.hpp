#pragma once
// `sim run --sampler-job`: a two-expert model's sampling as ComfyUI runs it (Wan 2.2 A14B: two UNETLoaders, two
// KSamplerAdvanced nodes splitting the steps at --switch-step). ComfyUI's loads and unloads between the nodes come
// from pipeline/expert_job; each node's iterations run its expert placed as ComfyUI's own load leaves it
// (cli/comfy_job_load.hpp), whatever --policy placed the run above with. `sim run --video-job`: a Wan video's sampler
// node (one model) or nodes (two experts), then VAEDecode: the Wan 2.1 VAE (wan2.1-vae.json beside the model's config)
// loaded by ComfyUI's rule and its decode (model/vae/wan_vae_decoder_trace_generator.hpp) placed as the load leaves
// it, with umT5 (umt5-xxl.json) encoding the prompts before the first video's sampling.
#include "cli/run_inputs.hpp"
#include "cli/simulation.hpp"
#include "pipeline/expert_job.hpp"

namespace tiersim::app {

struct ExpertJobResult {
  pipeline::ExpertJobSpec spec;
  std::string vae_file, text_encoder_file;  // --video-job: the VAE's and the text encoder's configs read
  pipeline::ExpertJob job;
};

// Throws InputError naming --sampler-job for a model with one transformer, --video-job for a model that is not Wan's.
ExpertJobResult run_expert_job(const RunInputs& in, const Simulation& sim);

}  // namespace tiersim::app
