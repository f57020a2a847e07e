#pragma once
// An image VAE (diffusers AutoencoderKL, the config as published: FLUX.1's ae) as ComfyUI builds it
// (comfy/ldm/modules/diffusionmodules/model.py Encoder and Decoder with the ddconfig comfy/sd.py derives: ch =
// block_out_channels[0], ch_mult = block_out_channels / ch, num_res_blocks = layers_per_block, z_channels =
// latent_channels; attention in the mid block only). Unknown fields that would change the weights or the compute
// are errors, all listed at once.
#include <cstdint>
#include <string>
#include <vector>

namespace tiersim::model {

struct VaeConfig {
  std::string name;
  std::vector<std::uint64_t> channels;  // block_out_channels: one level each, the first at full resolution
  std::uint64_t res_blocks = 2;          // layers_per_block (the decoder runs one more per level)
  std::uint64_t latent_channels = 16, in_channels = 3, out_channels = 3, groups = 32;
  bool quant_convs = false;              // quant_conv / post_quant_conv (1x1 over 2z and z channels)
  std::uint64_t downscale() const { return std::uint64_t{1} << (channels.size() - 1); }  // 8 for four levels
  std::uint64_t decoder_params() const;
  std::uint64_t params() const;          // encoder + decoder (+ quant convs): what ComfyUI loads
};

VaeConfig parse_vae_config(const std::string& text, const std::string& file);
VaeConfig load_vae_config(const std::string& path);

}  // namespace tiersim::model
