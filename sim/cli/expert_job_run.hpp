#pragma once
// `sim run --sampler-job`: a two-expert model's sampling as ComfyUI runs it (Wan 2.2 A14B: two UNETLoaders, two
// KSamplerAdvanced nodes splitting the steps at --switch-step). ComfyUI's loads and unloads between the nodes come
// from pipeline/expert_job; each node's iterations run its expert placed as ComfyUI's own load leaves it
// (cli/comfy_job_load.hpp), whatever --policy placed the run above with. The text encoder and the VAE are not in it.
#include "cli/run_inputs.hpp"
#include "cli/simulation.hpp"
#include "pipeline/expert_job.hpp"

namespace tiersim::app {

struct ExpertJobResult {
  pipeline::ExpertJobSpec spec;
  pipeline::ExpertJob job;
};

// Throws InputError naming --sampler-job for a model with one transformer.
ExpertJobResult run_expert_job(const RunInputs& in, const Simulation& sim);

}  // namespace tiersim::app
