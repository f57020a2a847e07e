#pragma once
// One VAE encode of an image as ComfyUI runs it for a reference image (comfy/sd.py VAE.encode: in one piece, tiling
// only after an out-of-memory error; comfy/ldm/models/autoencoder.py AutoencodingEngine.encode: the Encoder of
// comfy/ldm/modules/diffusionmodules/model.py, then DiagonalGaussianRegularizer's mode()). In the VAE's dtype, bf16 on
// GPUs that have it: conv_in, per level res_blocks ResnetBlocks (GroupNorm, in-place SiLU, 3x3 conv, twice; a 1x1
// shortcut where the channels change; the sum) and, but for the last level, a Downsample (F.pad's zero row and column,
// a 3x3 convolution of stride 2); the mid block's two ResnetBlocks around a one-head AttnBlock over every latent pixel;
// norm_out, SiLU, conv_out to the mean and the log-variance (2 x latent channels); a quant_conv where the VAE has one;
// then DiagonalGaussianDistribution's clamp and two exp of the log-variance (computed, unused by mode()). One
// `prefill` step (tokens: the latent's pixels); the encoder's convolutions are its weights' tensors. Not in it:
// ComfyUI's pixels' copy to the GPU and the latent's back (a few MB).
#include <cstdint>
#include <vector>

#include "model/model_config.hpp"
#include "model/vae/vae_config.hpp"
#include "trace/trace.hpp"

namespace tiersim::model {

class VaeEncoderTraceGenerator final : public trace::StepSource {
 public:
  // width x height pixels (multiples of the VAE's downscale), `images` in the batch; `dtype` bf16, fp16 or fp32.
  // Throws InputError naming `key` (the size's option) or --batch out of range.
  VaeEncoderTraceGenerator(const VaeConfig& model, std::uint32_t width, std::uint32_t height, std::uint32_t images,
                           WeightDtype dtype, const std::string& key = "--reference");
  const trace::Header& header() const override { return header_; }
  bool next(trace::Step& out) override;

 private:
  VaeConfig model_;
  std::uint64_t width_, height_, images_;
  WeightDtype dtype_;
  trace::Header header_;
  std::vector<std::uint32_t> convs_;  // in the order the encoder runs them
  std::vector<std::uint32_t> norms_;  // GroupNorms, in order
  std::uint32_t act_ = 0;
  bool done_ = false;
};

}  // namespace tiersim::model
