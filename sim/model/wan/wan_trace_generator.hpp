#pragma once
// Builds the trace of Wan 2.1 text-to-video generation: one `iteration` step per denoising step, each a
// forward of the diffusion transformer over the video's latent tokens (cond and uncond in one batch under
// classifier-free guidance), op by op as ComfyUI's WanModel.forward_orig runs it (comfy/ldm/wan/model.py at
// Comfy-Org/ComfyUI a125cd84). Tensors are its leaf modules, named and ordered as ComfyUI registers them, and
// the blocks' and head's `modulation` parameters (not in ComfyUI's load list: they stay on the compute GPU).
// The umT5 text encoder and the VAE are not in the trace.
#include <cstdint>
#include <vector>

#include "model/diffusion/dit_ops.hpp"
#include "model/model_config.hpp"
#include "model/trace_generator.hpp"
#include "model/wan/wan_config.hpp"
#include "trace/trace.hpp"

namespace tiersim::model {

// Latent tokens of a video: (frames - 1) / 4 + 1 latent frames (Wan's VAE: 4x in time, 8x in space),
// divided by the patch, times (height / 8 / patch) x (width / 8 / patch).
std::uint64_t wan_video_tokens(const WanConfig& model, const GenerationOptions::Image& image);

class WanTraceGenerator final : public trace::StepSource {
 public:
  // Throws InputError (key --dtype, --resolution, --frames, --steps, --text-tokens) for what is not modelled.
  WanTraceGenerator(const WanConfig& model, const GenerationOptions& options);
  const trace::Header& header() const override { return header_; }
  bool next(trace::Step& out) override;
  std::vector<std::uint64_t> parameter_bytes(std::uint32_t tensor) const override {
    return parameters_.of(tensor, header_);
  }

 private:
  struct Attention {
    std::uint32_t q, k, v, o, norm_q, norm_k;
  };
  struct Block {
    std::uint32_t modulation = 0, norm3 = 0, ffn_in = 0, ffn_out = 0;
    Attention self{}, cross{};
  };
  std::uint32_t add_tensor(trace::TensorKind kind, std::uint64_t bytes, std::int32_t group, std::string name);
  std::uint32_t add_linear(std::int32_t group, const std::string& name, std::uint64_t in, std::uint64_t out);
  void build_iteration(trace::Step& out);  // the first build declares the values (values_)

  WanConfig model_;
  GenerationOptions options_;
  std::uint32_t switch_step_ = 0;  // a two-expert model's: the low-noise expert's first step
  trace::Header header_;
  std::uint32_t patch_embedding_ = 0, text_embedding_[2] = {}, time_embedding_[2] = {}, time_projection_ = 0;
  std::vector<Block> blocks_;
  std::uint32_t head_ = 0, head_modulation_ = 0, sampler_ = 0;
  DitValues values_;
  DitParameters parameters_;  // each Linear's matrix and bias
  std::uint32_t steps_done_ = 0;
};

}  // namespace tiersim::model
