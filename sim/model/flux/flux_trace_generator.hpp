#pragma once
// Builds the trace of FLUX.1 image generation: one `iteration` step per denoising step, each a forward of
// the diffusion transformer over the image's latent tokens and the prompt's T5 tokens, op by op as
// ComfyUI's Flux forward_orig runs them (comfy/ldm/flux/model.py, layers.py, math.py at Comfy-Org/ComfyUI
// a125cd84). Tensors are its leaf modules, named and ordered as ComfyUI registers them, so DisTorch's
// tail-first walk and a device map read from a real run apply to them unchanged. The text encoders and the
// VAE are not in the trace (they run once per image, before and after the iterations).
#include <cstdint>
#include <vector>

#include "model/flux/flux_config.hpp"
#include "model/gguf_quant.hpp"
#include "model/diffusion/dit_ops.hpp"
#include "model/model_config.hpp"
#include "model/trace_generator.hpp"
#include "trace/trace.hpp"

namespace tiersim::model {

// Latent tokens of an image: (height / 16) x (width / 16).
std::uint64_t flux_image_tokens(const GenerationOptions::Image& image);

class FluxTraceGenerator final : public trace::StepSource {
 public:
  // Throws InputError (key --dtype, --resolution, --steps, --text-tokens) for what is not modelled.
  FluxTraceGenerator(const FluxConfig& model, const GenerationOptions& options);
  const trace::Header& header() const override { return header_; }
  bool next(trace::Step& out) override;
  std::vector<std::uint64_t> parameter_bytes(std::uint32_t tensor) const override {
    return parameters_.of(tensor, header_);
  }

 private:
  struct Stream {  // one stream of a double block: image or text
    std::uint32_t mod, qkv, q_norm, k_norm, proj, mlp_in, mlp_out;
  };
  struct DoubleBlock {
    Stream img, txt;
  };
  struct SingleBlock {
    std::uint32_t linear1, linear2, q_norm, k_norm, modulation;
  };
  std::uint32_t add_tensor(trace::TensorKind kind, std::uint64_t bytes, std::int32_t group, std::string name);
  std::uint32_t add_linear(std::int32_t group, const std::string& name, std::uint64_t in, std::uint64_t out);
  void build_iteration(trace::Step& out);  // the first build declares the values (values_)

  FluxConfig model_;
  GenerationOptions options_;
  trace::Header header_;
  std::uint32_t img_in_ = 0, time_in_[2] = {}, vector_in_[2] = {}, guidance_in_[2] = {}, txt_in_ = 0;
  std::vector<DoubleBlock> double_;
  std::vector<SingleBlock> single_;
  std::uint32_t final_linear_ = 0, final_modulation_ = 0, sampler_ = 0;
  DitValues values_;
  DitParameters parameters_;  // each Linear's matrix and bias
  // GGUF weights: each tensor's stored type (nullptr for all but Linears), and the most bytes one Linear's
  // dequantization holds at once (its fp16 or fp32 result and the bf16 copy).
  std::vector<const gguf::QuantType*> gguf_types_;
  std::uint32_t steps_done_ = 0;
};

}  // namespace tiersim::model
