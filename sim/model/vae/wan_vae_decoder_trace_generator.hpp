#pragma once
// One VAE decode of a Wan (or Qwen-Image) latent as ComfyUI runs it: comfy/sd.py VAE.decode (in one piece; tiling only
// after an out-of-memory error) calls comfy/ldm/wan/vae.py WanVAE.decode at a125cd84, in the VAE's dtype (bf16 on GPUs
// that have it): conv2 over the whole latent, then Decoder3d once per latent frame, a causal 3D decoder that keeps the
// last two frames of every CausalConv3d's input between calls (feat_cache) and grows the video by torch.cat of all it
// has so far. The first call makes one frame, every next one four (two temporal upsamples: Resample's time_conv then
// a stack of its two halves).
//
// One `prefill` step per decoder call (tokens: the latent frame's pixels), every PyTorch op of the forward in order
// with its bytes (comfy/ldm/wan/vae.py: RMS_norm is F.normalize's norm, clamp and division, then two multiplies and the
// `+ 0` of bias=False, each a new tensor; nn.SiLU out of place; a CausalConv3d's torch.cat with the cache and F.pad,
// whose constant_pad_nd fills the padded tensor and copies the input in, a clone even with no padding; the cache's
// clone of the input's last frames; the Conv's bias added in place after cuDNN's kernel), each convolution a `gemm`
// with `conv=` (the profile's measured cuDNN rate for its kernel and channels). Activations are transient values
// (trace kind `tmp`) with the lifetimes Python's references give them (a block's input until its residual sum, a
// module's input until it returns); the feature cache, the latent and the growing video are workspaces alive the
// whole decode. The encoder's weights are loaded with the VAE (ComfyUI loads the whole model) and never read.
// Not in it: the latent's copy to the GPU and the video's to the CPU (VAE.decode's .to(output_device).float()).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/diffusion/dit_ops.hpp"
#include "model/model_config.hpp"
#include "model/vae/wan_vae_config.hpp"
#include "trace/trace.hpp"

namespace tiersim::model {

class WanVaeDecoderTraceGenerator final : public trace::StepSource {
 public:
  // width x height pixels (multiples of 8), `frames` of video (1 + 4k: 1 for an image); `dtype` bf16, fp16 or fp32.
  // Throws InputError (key --resolution, --frames or --vae-dtype) out of range.
  WanVaeDecoderTraceGenerator(const WanVaeConfig& model, std::uint32_t width, std::uint32_t height, std::uint32_t frames,
                              WeightDtype dtype);
  const trace::Header& header() const override { return header_; }
  bool next(trace::Step& out) override;
  std::vector<std::uint64_t> parameter_bytes(std::uint32_t tensor) const override {
    return parameters_.of(tensor, header_);
  }
  std::uint32_t latent_frames() const { return static_cast<std::uint32_t>(latent_frames_); }

 private:
  // The decoder call for latent frame `index` (0: no cache yet; 1: the cache holds one frame; later: two).
  void forward(std::uint64_t index, trace::Step& out);

  WanVaeConfig model_;
  std::uint64_t width_, height_, latent_frames_;
  WeightDtype dtype_;
  trace::Header header_;
  DitValues values_;
  DitParameters parameters_;
  bool building_ = true;  // the constructor's builds: weights, caches and values may be declared
  std::map<std::string, std::uint32_t> weights_;  // module name -> tensor (found by name after the first build)
  std::map<std::string, std::uint32_t> caches_;   // CausalConv3d slot -> its feat_cache workspace
  std::uint32_t latent_ = 0, latent_conv_ = 0, video_ = 0;
  std::uint64_t next_ = 0;  // the next decoder call
};

}  // namespace tiersim::model
