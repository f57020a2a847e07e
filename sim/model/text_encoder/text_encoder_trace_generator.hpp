#pragma once
// One forward of a text encoder as ComfyUI runs it for a diffusion model's prompt (comfy/sd1_clip.py
// SDClipModel.forward: the token embeddings taken in float32 and the transformer called with dtype=float32, so
// every activation is fp32 and every Linear casts its stored weight (fp16, or fp8 e4m3fn) to fp32 first:
// comfy/ops.py manual_cast; fp32 matrix products, no TF32: ComfyUI leaves torch's allow_tf32 off). T5 v1.1 /
// umT5 (comfy/text_encoders/t5.py: T5LayerNorm's seven kernels, q/k/v/o, the relative position bias built once
// per forward (umT5: per block) and added as SDPA's mask, k scaled, the gated-GELU FFN) and CLIP's text model
// (comfy/clip_model.py: LayerNorms, biased projections, a causal mask, quick_gelu, the pooled token's
// text_projection). One `prefill` step over the
// prompt's tokens; the weights are the tensors, named as ComfyUI's state dict names them.
#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.hpp"
#include "model/text_encoder/text_encoder_config.hpp"
#include "trace/trace.hpp"

namespace tiersim::model {

class TextEncoderTraceGenerator final : public trace::StepSource {
 public:
  // `tokens`: the prompt as the encoder sees it (FLUX's T5: padded to 256 at least; CLIP: its 77 positions);
  // `weights`: the stored format (fp16, bf16, fp32, fp8). Throws InputError naming `key` for a token count out of
  // range (1 to 4,096; CLIP: at most its positions).
  TextEncoderTraceGenerator(const TextEncoderConfig& model, std::uint64_t tokens, WeightDtype weights,
                            const std::string& key = "--text-tokens");
  const trace::Header& header() const override { return header_; }
  bool next(trace::Step& out) override;

 private:
  std::uint32_t add_weight(std::int32_t layer, const std::string& name, std::uint64_t params);
  // A Linear over `rows` tokens: the stored weight cast to fp32 (unless stored so), then the fp32 product.
  void linear(trace::Step& out, std::int32_t layer, std::uint32_t weight, std::uint64_t in, std::uint64_t out_f,
              bool bias, std::uint64_t rows) const;
  void elementwise(trace::Step& out, std::int32_t layer, std::uint64_t read, std::uint64_t written,
                   std::uint32_t launches) const;

  TextEncoderConfig model_;
  std::uint64_t tokens_;
  WeightDtype weights_;
  trace::Header header_;
  std::vector<std::uint32_t> linears_;  // per layer: q, k, v, o, then the FFN's (T5: wi_0, [wi_1], wo; CLIP: fc1, fc2)
  std::vector<std::uint32_t> norms_;    // per layer: the two norms; then the final one
  std::uint32_t embedding_ = 0, positions_ = 0, projection_ = 0, act_ = 0;
  std::vector<std::uint32_t> bias_tables_;  // T5: the first block's relative bias table; umT5: every block's
  bool done_ = false;
};

}  // namespace tiersim::model
