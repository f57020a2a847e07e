#pragma once
// The model families tiersim generates traces for, keyed as their published configs name them: a
// diffusers config by its class (_class_name), a Hugging Face config.json by its model_type. One place
// decides which reader and generator a model description gets.
#include <memory>
#include <string>

#include "model/trace_generator.hpp"
#include "trace/trace.hpp"

namespace tiersim::model {

enum class ModelFamily {
  Decoder,  // config.json model_type qwen3, qwen2, llama, mistral, qwen3_moe, mixtral, gpt_oss (model_config.hpp)
  Flux,     // diffusers FluxTransformer2DModel (flux/flux_config.hpp)
  Wan,      // diffusers WanTransformer3DModel, text-to-video (wan/wan_config.hpp)
  QwenImage,  // diffusers QwenImageTransformer2DModel (qwen_image/qwen_image_config.hpp)
  WanVae,     // diffusers AutoencoderKLWan or AutoencoderKLQwenImage: the video VAE's decode (vae/wan_vae_config.hpp)
};
inline bool is_diffusion(ModelFamily f) { return f != ModelFamily::Decoder; }
const char* to_string(ModelFamily f);

// The family of the JSON model description at `path` (errors name the file and the key: an unknown
// diffusers class is refused here, an unknown model_type by the decoder reader).
ModelFamily model_family(const std::string& path);

// A diffusion family's usual run, as its reference workflows set it: FLUX.1-dev 1024x1024, 28 steps, cfg 1
// (guidance-distilled), 256 T5 tokens (ComfyUI pads shorter prompts to 256); Wan 2.1 832x480, 81 frames, 30 steps, cfg 6, 512 umT5 tokens
// (Wan-AI's generate.py defaults for t2v at 480p: sample_steps 50 for its own sampler, 30 in ComfyUI's example);
// Qwen-Image 1328x1328, 20 steps, cfg 2.5 (ComfyUI's example workflow), a 100-token prompt and the empty negative
// prompt's 5 template tokens; the Wan VAE Wan 2.1's video, 832x480 and 81 frames (its steps, prompt and cfg unused;
// Qwen-Image's copy of it, AutoencoderKLQwenImage, one 1328x1328 image: set where the config is read, sim/cli).
GenerationOptions::Image default_image(ModelFamily f);

// The trace of the model at `path` (a JSON description) with these options, generated step by step.
std::unique_ptr<trace::StepSource> generate_trace(const std::string& path, const GenerationOptions& options);

}  // namespace tiersim::model
