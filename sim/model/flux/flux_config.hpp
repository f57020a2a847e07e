#pragma once
// FLUX.1's diffusion transformer (black-forest-labs FLUX.1-dev / -schnell / Kontext), described by its
// published diffusers config (transformer/config.json, class FluxTransformer2DModel), with the module
// structure ComfyUI builds for it (comfy/ldm/flux/model.py Flux, layers.py DoubleStreamBlock,
// SingleStreamBlock at Comfy-Org/ComfyUI a125cd84): that structure decides which leaf modules exist,
// their sizes and their order, which is what DisTorch and ComfyUI's loader place.
#include <cstdint>
#include <string>
#include <vector>

namespace tiersim::model {

struct FluxConfig {
  std::string name;
  std::uint64_t heads = 0, head_dim = 0;   // num_attention_heads, attention_head_dim
  std::uint64_t double_blocks = 0;         // num_layers: joint image + text blocks
  std::uint64_t single_blocks = 0;         // num_single_layers: blocks over the concatenated sequence
  std::uint64_t in_channels = 0;           // packed latent channels (16 latent channels x 2 x 2 patch)
  std::uint64_t out_channels = 0;          // = in_channels unless given
  std::uint64_t context_dim = 0;           // joint_attention_dim: T5's width
  std::uint64_t pooled_dim = 0;            // pooled_projection_dim: CLIP's pooled width
  bool guidance_embeds = false;            // FLUX.1-dev's distilled guidance embedder (schnell has none)
  static constexpr std::uint64_t kMlpRatio = 4;           // FluxTransformer2DModel: mlp_ratio 4.0
  static constexpr std::uint64_t kTimestepChannels = 256;  // timestep_embedding(t, 256)

  std::uint64_t hidden() const { return heads * head_dim; }
  std::uint64_t mlp_hidden() const { return kMlpRatio * hidden(); }
  std::uint64_t double_block_params() const;
  std::uint64_t single_block_params() const;
  std::uint64_t input_params() const;   // img_in, time_in, vector_in, guidance_in, txt_in
  std::uint64_t final_params() const;   // final_layer
  std::uint64_t total_params() const;
};

// A Linear(in, out) with its bias: the only weighted module kind besides the q/k RMSNorm scales.
inline std::uint64_t linear_params(std::uint64_t in, std::uint64_t out) { return in * out + out; }

// Whether a parsed config is a diffusers FLUX transformer (its _class_name).
inline constexpr const char* kFluxClass = "FluxTransformer2DModel";

FluxConfig load_flux_config(const std::string& path);
FluxConfig parse_flux_config(const std::string& json_text, const std::string& source_name);

}  // namespace tiersim::model
