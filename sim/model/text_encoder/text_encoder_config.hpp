#pragma once
// A diffusion model's text encoder as ComfyUI builds it, from the config file ComfyUI ships for it (the Hugging
// Face config as published): T5 v1.1 / umT5 encoders (comfy/text_encoders/t5.py with t5_config_xxl.json,
// umt5_config_xxl.json) and CLIP's text model (comfy/clip_model.py with sd1_clip_config.json). Only what sets the
// weights and the compute is read; unknown fields that would change them are errors, all listed at once.
#include <cstdint>
#include <string>

namespace tiersim::model {

struct TextEncoderConfig {
  enum class Kind { T5, Clip };
  std::string name;
  Kind kind = Kind::T5;
  std::uint64_t layers = 0, width = 0, ff = 0, heads = 0, head_dim = 0, vocab = 0;
  std::uint64_t positions = 0;      // CLIP: its learned position table (and the tokens it encodes)
  bool gated = false;               // T5 v1.1: wi_0 and wi_1 (gated GELU); CLIP: fc1, fc2
  bool bias_every_layer = false;    // umT5: a relative position bias in every block; T5: the first only
  static constexpr std::uint64_t kBuckets = 32;  // T5Attention.relative_attention_num_buckets
  std::uint64_t inner() const { return heads * head_dim; }
  std::uint64_t params() const;     // the encoder's parameters (T5: without the decoder ComfyUI never builds)
};

TextEncoderConfig parse_text_encoder_config(const std::string& text, const std::string& file);
TextEncoderConfig load_text_encoder_config(const std::string& path);

}  // namespace tiersim::model
