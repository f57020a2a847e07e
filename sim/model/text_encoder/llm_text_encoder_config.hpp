#pragma once
// A decoder-only language model as ComfyUI's text encoder for a diffusion model, from the config its checkpoint
// publishes: Qwen-Image's Qwen2.5-VL-7B (text_encoder/config.json, model_type qwen2_5_vl), which ComfyUI builds as
// comfy/text_encoders/llama.py Qwen25_7BVLI at a125cd84: the language model (Llama2_: embed_tokens, the decoder
// layers, the final norm; no lm_head) and the vision tower (qwen_vl.py Qwen2VLVisionTransformer), both part of the
// model ComfyUI loads, though a text prompt runs only the first. The language model's fields are read from
// text_config where the config has one (and must agree with their copies at the top level); the vision tower's from
// vision_config. Unknown fields that would change the weights or the compute are errors, listed at once.
#include <cstdint>
#include <string>

namespace tiersim::model {

struct LlmTextEncoderConfig {
  std::string name;
  std::uint64_t layers = 0, hidden = 0, ff = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  bool qkv_bias = false;  // Qwen2.5: q, k and v projections with biases (o_proj and the MLP without)

  // qwen_vl.py Qwen2VLVisionTransformer: a Conv3d patch embedding (no bias), `depth` blocks of two RMSNorms, a fused
  // qkv and a proj with biases and a gated MLP with biases, then the PatchMerger (an RMSNorm and two Linears over
  // merge^2 patches). Required in the config: ComfyUI always builds it.
  struct Vision {
    std::uint64_t depth = 0, hidden = 0, ff = 0, heads = 0, out_hidden = 0, patch = 0, temporal_patch = 0,
                  merge = 0, in_channels = 0;
    std::uint64_t merged() const { return hidden * merge * merge; }
    std::uint64_t params() const;
  } vision;

  std::uint64_t inner() const { return heads * head_dim; }
  std::uint64_t kv_inner() const { return kv_heads * head_dim; }
  std::uint64_t language_params() const;  // embed_tokens, the layers, the final norm
  std::uint64_t params() const { return language_params() + vision.params(); }
};

LlmTextEncoderConfig parse_llm_text_encoder_config(const std::string& text, const std::string& file);
LlmTextEncoderConfig load_llm_text_encoder_config(const std::string& path);

}  // namespace tiersim::model
