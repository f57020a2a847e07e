#pragma once
// The Wan 2.1 video VAE (diffusers AutoencoderKLWan, the config as published: Wan-AI's Wan2.1 and Wan2.2 A14B
// repositories' vae/config.json) and Qwen-Image's VAE (AutoencoderKLQwenImage: the same network and weights' shapes),
// as ComfyUI builds it: comfy/sd.py VAE.__init__'s "Wan 2.1 VAE" branch makes comfy/ldm/wan/vae.py WanVAE(dim=96,
// z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[], temperal_downsample=[False, True, True]) from
// the checkpoint. Wan 2.2's 5B VAE (z_dim 48, is_residual) is another network (vae2_2.py) and is refused. Unknown fields
// that would change the weights or the compute are errors, all listed at once.
#include <cstdint>
#include <string>
#include <vector>

namespace tiersim::model {

struct WanVaeConfig {
  std::string name;
  std::uint64_t dim = 96;                       // base_dim
  std::uint64_t z_dim = 16;                     // latent channels
  std::vector<std::uint64_t> dim_mult{1, 2, 4, 4};
  std::uint64_t res_blocks = 2;                 // num_res_blocks (the decoder runs one more per level)
  std::vector<bool> temporal_downsample{false, true, true};
  bool image_only = false;  // AutoencoderKLQwenImage: the same network, published for Qwen-Image's single images
  // The decoder's levels from the latent up: level i's ResidualBlocks' input and output channels (Decoder3d: dims =
  // dim x [dim_mult[-1]] + reversed(dim_mult); levels 1-3 start from half the channels the upsample before them gave).
  std::uint64_t level_in(std::size_t level) const;
  std::uint64_t level_out(std::size_t level) const;
  // Whether level `level` (0-2) ends in a temporal upsample (upsample3d: temperal_upsample = reversed downsample).
  bool temporal_upsample(std::size_t level) const { return temporal_downsample[temporal_downsample.size() - 1 - level]; }
  std::uint64_t decoder_params() const;         // Decoder3d and WanVAE.conv2 (what a decode reads)
  std::uint64_t params() const;                 // the whole WanVAE (encoder, conv1, conv2, decoder): what ComfyUI loads
  // Frames of video a latent of `latent_frames` decodes to (WanVAE.decode: the first latent frame one, each next four).
  static std::uint64_t video_frames(std::uint64_t latent_frames) { return 1 + 4 * (latent_frames - 1); }
};

WanVaeConfig parse_wan_vae_config(const std::string& text, const std::string& file);
WanVaeConfig load_wan_vae_config(const std::string& path);
// Whether the JSON model description at `path` is a Wan-family VAE config (its _class_name).
bool is_wan_vae_config(const std::string& path);

}  // namespace tiersim::model
