#pragma once
// One prompt's encode by a language-model text encoder as ComfyUI a125cd84 runs it for Qwen-Image
// (comfy/text_encoders/qwen_image.py QwenImageTEModel -> sd1_clip.py SDClipModel.forward -> llama.py Llama2_.forward):
// the prompt in the chat template (no padding), the token rows looked up in the stored dtype and made float32
// (manual_cast's Embedding, out_dtype=float32), the transformer called with dtype=float32, so every activation is
// fp32 and every Linear casts its stored weight (and bias) to fp32 on each forward (comfy/ops.py manual_cast; a
// scaled fp8 checkpoint's scaled_fp8_ops Linear casts its fp8 weight and multiplies the input, or the weight where it
// is the smaller, by its scale); fp32 products with TF32 off. Llama2_.forward: the rotary table (precompute_freqs_cis),
// the padding mask made an fp32 S x S mask plus the causal one (enable_attention_masks), then per layer RMSNorm
// (comfy/rmsnorm.py: the weight cast to fp32, F.rms_norm), q/k/v with biases, apply_rope on q and k (five kernels
// each), k and v repeat_interleave'd to every head, SDPA with the mask (attention_pytorch), o_proj, the residual add,
// RMSNorm, the gated SiLU MLP, the residual add; the final norm ("last" layer). The vision tower is loaded but a text
// prompt does not run it. One `prefill` step; the weights are the tensors, named as the checkpoint names them.
#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.hpp"
#include "model/text_encoder/llm_text_encoder_config.hpp"
#include "trace/trace.hpp"

namespace tiersim::model {

class LlmTextEncoderTraceGenerator final : public trace::StepSource {
 public:
  // `tokens`: the sequence the encoder runs, template included (1 to 32,768); `weights`: the checkpoint's format,
  // bf16, fp16 or fp32 (every tensor so) or fp8 with `scaled` (ComfyUI's *_fp8_scaled files: the Linears' weights
  // and biases fp8 with a per-Linear scale, the embedding, norms and patch convolution bf16). Throws InputError
  // naming `key` for a token count out of range and --text-encoder-dtype for another format.
  LlmTextEncoderTraceGenerator(const LlmTextEncoderConfig& model, std::uint64_t tokens, WeightDtype weights,
                               bool scaled, const std::string& key = "--text-tokens");
  const trace::Header& header() const override { return header_; }
  bool next(trace::Step& out) override;

 private:
  struct Linear {
    std::uint32_t tensor = 0;
    std::uint64_t in = 0, out = 0;
    bool bias = false;
  };
  Linear add_linear(std::int32_t layer, const std::string& name, std::uint64_t in, std::uint64_t out, bool bias);
  std::uint32_t add_plain(std::int32_t layer, const std::string& name, std::uint64_t params);
  void linear(trace::Step& out, std::int32_t layer, const Linear& l) const;
  void norm(trace::Step& out, std::int32_t layer, std::uint32_t weight) const;

  LlmTextEncoderConfig model_;
  std::uint64_t tokens_;
  WeightDtype weights_;
  bool scaled_;
  trace::Header header_;
  std::uint32_t embedding_ = 0, final_norm_ = 0, act_ = 0;
  std::vector<Linear> linears_;       // per layer: q, k, v, o, gate, up, down
  std::vector<std::uint32_t> norms_;  // per layer: input_layernorm, post_attention_layernorm
  bool done_ = false;
};

}  // namespace tiersim::model
