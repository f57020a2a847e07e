#pragma once
// Wan 2.1's text-to-video diffusion transformer (Wan-AI Wan2.1-T2V-14B / -1.3B), described by its published
// diffusers config (transformer/config.json, class WanTransformer3DModel), with the module structure ComfyUI
// builds for it (comfy/ldm/wan/model.py WanModel, WanAttentionBlock, Head at Comfy-Org/ComfyUI a125cd84).
#include <cstdint>
#include <string>

namespace tiersim::model {

struct WanConfig {
  std::string name;
  std::uint64_t heads = 0, head_dim = 0;  // num_attention_heads, attention_head_dim
  std::uint64_t ffn_dim = 0;
  std::uint64_t layers = 0;               // num_layers: WanAttentionBlocks
  std::uint64_t in_channels = 0, out_channels = 0;  // latent channels (16)
  std::uint64_t text_dim = 0;             // umT5's width (4096)
  std::uint64_t freq_dim = 0;             // the timestep's sinusoidal width (256)
  std::uint64_t patch[3] = {1, 2, 2};     // frames, height, width of a latent patch
  bool cross_attn_norm = true;            // norm3: a LayerNorm with weights before the cross-attention
  // The VAE's spatial downscale, which ComfyUI takes from the latent channels: a 48-channel model is Wan 2.2's TI2V-5B
  // (comfy/supported_models.py WAN22_T2V: out_dim 48, latent_formats.Wan22), whose latent is (H/16, W/16)
  // (comfy_extras/nodes_wan.py Wan22ImageToVideoLatent); Wan 2.1's 16 channels are (H/8, W/8). 4x in time for both.
  std::uint64_t vae_spatial = 8;
  // Wan 2.2 A14B: two transformers of this one shape, a high-noise expert for the first steps and a low-noise expert
  // for the rest (the Diffusers pipeline's transformer and transformer_2; model_index.json's boundary_ratio, the
  // fraction of the timesteps below which transformer_2 takes over: pipeline_wan.py). 0: one transformer.
  double boundary_ratio = 0;
  bool two_experts() const { return boundary_ratio > 0; }

  std::uint64_t dim() const { return heads * head_dim; }
  std::uint64_t patch_volume() const { return patch[0] * patch[1] * patch[2]; }
  // Parameters by module (ComfyUI's WanModel): the Conv3d patch embedding (kept in fp32 by ComfyUI), the
  // text and time embeddings and the time projection, each block, the head.
  std::uint64_t patch_embedding_params() const { return in_channels * patch_volume() * dim() + dim(); }
  std::uint64_t block_params() const;
  std::uint64_t total_params() const;
};

inline constexpr const char* kWanClass = "WanTransformer3DModel";

WanConfig load_wan_config(const std::string& path);
WanConfig parse_wan_config(const std::string& json_text, const std::string& source_name);

}  // namespace tiersim::model
