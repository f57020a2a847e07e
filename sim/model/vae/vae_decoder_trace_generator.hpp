#pragma once
// One VAE decode of the sampled latent as ComfyUI runs it (comfy/sd.py VAE.decode: in one piece, tiling only
// after an out-of-memory error; comfy/ldm/modules/diffusionmodules/model.py Decoder in the VAE's dtype, bf16 on
// GPUs that have it: conv_in, the mid block's two ResnetBlocks around a one-head AttnBlock over every latent
// pixel, per level res_blocks + 1 ResnetBlocks (GroupNorm, in-place SiLU, 3x3 conv, twice; a 1x1 shortcut where
// the channels change; the sum) and a nearest 2x Upsample with its 3x3 conv, then norm_out, SiLU, conv_out). One
// `prefill` step (tokens: the image's pixels / 64); the decoder's convolutions are its weights' tensors. Not in it:
// ComfyUI's post-processing after the image is copied to the CPU.
#include <cstdint>
#include <vector>

#include "model/model_config.hpp"
#include "model/vae/vae_config.hpp"
#include "trace/trace.hpp"

namespace tiersim::model {

class VaeDecoderTraceGenerator final : public trace::StepSource {
 public:
  // width x height pixels (multiples of the VAE's downscale), `images` in the batch; `dtype` bf16, fp16 or fp32.
  // Throws InputError (key --resolution or --batch) out of range.
  VaeDecoderTraceGenerator(const VaeConfig& model, std::uint32_t width, std::uint32_t height, std::uint32_t images,
                           WeightDtype dtype);
  const trace::Header& header() const override { return header_; }
  bool next(trace::Step& out) override;

 private:
  VaeConfig model_;
  std::uint64_t width_, height_, images_;
  WeightDtype dtype_;
  trace::Header header_;
  std::vector<std::uint32_t> convs_;  // in the order the decoder runs them
  std::vector<std::uint32_t> norms_;  // GroupNorms, in order
  std::uint32_t act_ = 0;
  bool done_ = false;
};

}  // namespace tiersim::model
