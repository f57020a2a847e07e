#pragma once
// A two-expert video model's sampling in ComfyUI (Wan 2.2 A14B): each expert has its own UNETLoader, and two
// KSamplerAdvanced nodes split the steps, the high-noise expert the first ones (returning its leftover noise), the
// low-noise expert the rest (ComfyUI's Wan 2.2 14B template: 20 steps, 10 each). Each node's prepare_sampling calls
// load_models_gpu for its own expert (comfy/sampler_helpers.py _prepare_sampling), so the second node's load may
// evict the first expert, and the next video's first node the second: ComfyUI's model management
// (comfy_model_management.hpp) decides, and every move is a synchronous pageable copy (comfy_stage.hpp).
// A one-model video (Wan 2.1) is one sampler node. With a VAE (`sim run --video-job`) the video's VAEDecode follows:
// comfy/sd.py VAE.decode loads the VAE with its memory_used_decode as the requirement (which may unload an expert),
// then decodes; before the sampling the text encoder (umT5: CLIPTextEncode, memory_required 0) encodes the prompts for
// the first video only (the next one is the same prompt: ComfyUI's cache skips the node).
#include <cstdint>
#include <functional>
#include <string>

#include "hardware/profile.hpp"
#include "pipeline/comfy_stage.hpp"

namespace tiersim::pipeline {

struct ExpertJobSpec {
  double free_bytes = 0;    // the GPU's memory with nothing loaded (less the profile's reserve)
  double expert_bytes = 0;  // each expert's weights: the two have one shape and format
  std::uint32_t high_steps = 0, low_steps = 0;
  double sampling_memory = 0, sampling_minimum = 0;  // model_base.memory_required at the batch doubled and at the batch
  // One iteration's seconds with the expert loaded from `budget_free` bytes of free memory (StageCost::budget_free):
  // the caller's engine run, placed as ComfyUI's load leaves the expert.
  std::function<double(double budget_free)> iteration_seconds;
  std::string high_name = "high-noise expert", low_name = "low-noise expert";
  bool two_experts = true;  // false: one model (its node is `high`, every step; low_steps 0)
  // The VAE decode after the sampling (0 bytes: none): its weights, VAE.memory_used_decode, and the decode's seconds
  // with the VAE loaded from `budget_free` bytes of free memory.
  double vae_bytes = 0, vae_memory = 0;
  std::function<double(double budget_free)> vae_seconds;
  std::string vae_name = "VAE";
  // The text encoder before the first video's sampling (0 bytes: none), and its encodes' seconds as loaded from
  // `budget_free`.
  double text_encoder_bytes = 0;
  std::function<double(double budget_free)> text_seconds;
  std::string text_encoder_name = "text encoder";
};

struct VideoCost {
  StageCost text;       // CLIPTextEncode (ran false without a text encoder, and for the next video: the same prompt)
  StageCost high, low;  // each sampler node: its expert's load and its steps (low.ran false with one model)
  StageCost vae;        // VAEDecode: the VAE's load and the decode (ran false without a VAE)
  double seconds() const;
  double h2d_bytes() const { return text.h2d_bytes + high.h2d_bytes + low.h2d_bytes + vae.h2d_bytes; }
  double d2h_bytes() const { return text.d2h_bytes + high.d2h_bytes + low.d2h_bytes + vae.d2h_bytes; }
  double transfer_seconds() const {
    return text.transfer_seconds + high.transfer_seconds + low.transfer_seconds + vae.transfer_seconds;
  }
};

struct ExpertJob {
  VideoCost first, next;  // the first video after both loaders; the one after it
  double high_loaded = 0, low_loaded = 0;  // each expert's bytes on the GPU at its iterations (the first video)
};

// `link`: the host link (its pageable curves price the copies).
ExpertJob comfy_expert_job(const ExpertJobSpec& spec, const hw::HostLinkSpec& link);

}  // namespace tiersim::pipeline
