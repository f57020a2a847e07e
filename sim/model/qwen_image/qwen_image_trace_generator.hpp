#pragma once
// Builds the trace of Qwen-Image generation: one `iteration` step per denoising step, each holding the transformer's
// forward passes over the image's latent tokens and the prompt's Qwen2.5-VL tokens, op by op as ComfyUI's
// QwenImageTransformer2DModel._forward runs them (comfy/ldm/qwen_image/model.py at Comfy-Org/ComfyUI a125cd84).
// Tensors are its leaf modules, named and ordered as ComfyUI registers them, so DisTorch's walk and ComfyUI's
// partial load apply to them unchanged. The text encoder and the VAE are not in the trace.
//
// Classifier-free guidance: ComfyUI wraps Qwen-Image's text as a CONDRegular (model_base.py QwenImage.extra_conds),
// which concatenates with another cond only of the same shape (conds.py can_concat); its text encoder does not pad
// (text_encoders/qwen_image.py: pad_to_max_length False, the chat template cut off), so a negative prompt of another
// length than the positive one runs as a second forward of the whole transformer (samplers.py _calc_cond_batch):
// every offloaded weight is moved twice per iteration. Equal lengths share one batch.
#include <cstdint>
#include <vector>

#include "model/diffusion/dit_ops.hpp"
#include "model/model_config.hpp"
#include "model/qwen_image/qwen_image_config.hpp"
#include "model/trace_generator.hpp"
#include "trace/trace.hpp"

namespace tiersim::model {

// Latent tokens of an image: (height / 16) x (width / 16) (the VAE's /8, then 2x2 patches).
std::uint64_t qwen_image_tokens(const GenerationOptions::Image& image);

class QwenImageTraceGenerator final : public trace::StepSource {
 public:
  // Throws InputError (key --dtype, --resolution, --steps, --text-tokens, --negative-tokens, --frames, --batch).
  QwenImageTraceGenerator(const QwenImageConfig& model, const GenerationOptions& options);
  const trace::Header& header() const override { return header_; }
  bool next(trace::Step& out) override;
  std::vector<std::uint64_t> parameter_bytes(std::uint32_t tensor) const override {
    return parameters_.of(tensor, header_);
  }

  struct Pass {  // one forward of the transformer
    std::uint64_t batch = 0;        // images in it
    std::uint64_t text_tokens = 0;  // per image
  };
  // The forwards of one iteration (see the header comment).
  static std::vector<Pass> passes(const GenerationOptions& options);

 private:
  struct Stream {  // the image or the text side of a block
    std::uint32_t mod, q, k, v, q_norm, k_norm, out, mlp_in, mlp_out;
  };
  struct Block {
    Stream img, txt;
  };
  std::uint32_t add_tensor(trace::TensorKind kind, std::uint64_t bytes, std::int32_t group, std::string name);
  std::uint32_t add_linear(std::int32_t group, const std::string& name, std::uint64_t in, std::uint64_t out);
  void build_iteration(trace::Step& out);  // the first build declares the values (values_)
  void build_pass(trace::Step& out, const Pass& pass, std::size_t index);

  QwenImageConfig model_;
  GenerationOptions options_;
  trace::Header header_;
  std::uint32_t time_[2] = {}, txt_norm_ = 0, img_in_ = 0, txt_in_ = 0;
  std::vector<Block> blocks_;
  std::uint32_t final_modulation_ = 0, proj_out_ = 0, sampler_ = 0;
  DitValues values_;
  DitParameters parameters_;  // each Linear's matrix and bias
  std::uint32_t steps_done_ = 0;
};

}  // namespace tiersim::model
