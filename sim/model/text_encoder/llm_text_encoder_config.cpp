#include "model/text_encoder/llm_text_encoder_config.hpp"

#include <set>

#include "core/error.hpp"
#include "model/config_json.hpp"

namespace tiersim::model {

std::uint64_t LlmTextEncoderConfig::language_params() const {
  // Per layer: q, k, v (biased where qkv_bias), o; gate, up, down; two RMSNorm scales. embed_tokens; the final norm.
  const std::uint64_t d = hidden, b = qkv_bias ? 1 : 0;
  const std::uint64_t attn = d * inner() + 2 * d * kv_inner() + b * (inner() + 2 * kv_inner()) + inner() * d;
  return vocab * d + layers * (attn + 3 * d * ff + 2 * d) + d;
}

std::uint64_t LlmTextEncoderConfig::Vision::params() const {
  if (depth == 0) return 0;
  const std::uint64_t d = hidden;
  const std::uint64_t patch_embed = in_channels * temporal_patch * patch * patch * d;
  const std::uint64_t block = 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + 2 * (d * ff + ff) + (ff * d + d);
  const std::uint64_t merger = d + (merged() * merged() + merged()) + (merged() * out_hidden + out_hidden);
  return patch_embed + depth * block + merger;
}

namespace {

constexpr Bound kLayers{"num_hidden_layers", 1000, "1,000"};
constexpr Bound kHidden{"hidden_size", 65536, "65,536"};
constexpr Bound kFf{"intermediate_size", 1 << 20, "1,048,576"};
constexpr Bound kHeads{"num_attention_heads", 1024, "1,024"};
constexpr Bound kKvHeads{"num_key_value_heads", 1024, "1,024"};
constexpr Bound kHeadDim{"head_dim", 4096, "4,096"};
constexpr Bound kVocab{"vocab_size", 1 << 24, "16,777,216"};
constexpr Bound kDepth{"depth", 1000, "1,000"};
constexpr Bound kVisionHidden{"hidden_size", 65536, "65,536"};
constexpr Bound kVisionFf{"intermediate_size", 1 << 20, "1,048,576"};
constexpr Bound kVisionHeads{"num_heads", 1024, "1,024"};
constexpr Bound kOutHidden{"out_hidden_size", 65536, "65,536"};
constexpr Bound kPatch{"patch_size", 1024, "1,024"};
constexpr Bound kTemporalPatch{"temporal_patch_size", 64, "64"};
constexpr Bound kMerge{"spatial_merge_size", 64, "64"};
constexpr Bound kChannels{"in_channels", 64, "64"};

// The language model's fields of a published Qwen2.5-VL config that change neither ComfyUI's weights nor its
// compute of a text prompt: provenance, token ids, dropout, initialisation, positions (ComfyUI's rotary embedding
// takes its own theta and sections; a text prompt's positions are one arange), generation and sliding-window
// settings (Llama2_ attends over every earlier token), the lm_head ComfyUI never builds.
const std::set<std::string> kHarmlessLanguage{
    "_name_or_path", "architectures", "transformers_version", "torch_dtype", "dtype", "initializer_range",
    "attention_dropout", "bos_token_id", "eos_token_id", "pad_token_id", "image_token_id", "video_token_id",
    "vision_start_token_id", "vision_end_token_id", "vision_token_id", "max_position_embeddings", "max_window_layers",
    "rms_norm_eps", "rope_scaling", "rope_theta", "rope_parameters", "sliding_window", "use_sliding_window",
    "use_cache", "tie_word_embeddings", "layer_types"};
// The vision tower's: it is loaded with the model but a text prompt never runs it, so only its weights count.
const std::set<std::string> kHarmlessVision{"fullatt_block_indexes", "initializer_range", "model_type",
                                            "spatial_patch_size", "tokens_per_second", "torch_dtype", "dtype",
                                            "window_size", "in_chans"};

void check_silu(const ConfigReader& r, const nlohmann::json& j) {
  if (j.contains("hidden_act") && j["hidden_act"] != "silu")
    r.fail("hidden_act", "must be silu (ComfyUI's Qwen2.5 layers run SiLU), got " + j["hidden_act"].dump());
}

LlmTextEncoderConfig read_llm(const ConfigJson& doc) {
  const nlohmann::json& j = doc.json;
  if (!j.is_object()) throw InputError(doc.file, 1, "", "expected a JSON object of text encoder config fields");
  const ConfigReader top(doc);
  const auto type = top.optional_string("model_type");
  if (!type) top.fail("model_type", "missing: qwen2_5_vl");
  if (*type != "qwen2_5_vl")
    top.fail("model_type", "'" + *type + "' is not a language-model text encoder tiersim models (qwen2_5_vl: "
                           "Qwen-Image's Qwen2.5-VL-7B, comfy/text_encoders/qwen_image.py)");
  static const std::set<std::string> language{"model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
                                              "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size",
                                              "hidden_act"};
  std::set<std::string> known_top = language;
  known_top.insert({"text_config", "vision_config", "name", "source", "description"});
  top.refuse_unknown(known_top, kHarmlessLanguage, "Qwen2.5-VL config");

  // transformers reads the language model from text_config; the top level's copies must say the same.
  const bool nested = top.has("text_config");
  const ConfigReader text = nested ? top.child("text_config") : top;
  const nlohmann::json& tj = nested ? j["text_config"] : j;
  if (nested) {
    text.refuse_unknown(language, kHarmlessLanguage, "Qwen2.5-VL text_config");
    if (tj.contains("model_type") && tj["model_type"] != "qwen2_5_vl_text")
      text.fail("model_type", "must be qwen2_5_vl_text, got " + tj["model_type"].dump());
    for (const auto& key : language)
      if (key != "model_type" && j.contains(key) && tj.contains(key) && j[key] != tj[key])
        top.fail(key, "says " + j[key].dump() + " but text_config." + key + " says " + tj[key].dump() +
                          " (transformers reads text_config)");
  }
  LlmTextEncoderConfig c;
  c.name = "Qwen2.5-VL";
  c.layers = text.count(kLayers);
  c.hidden = text.count(kHidden);
  c.ff = text.count(kFf);
  c.heads = text.count(kHeads);
  c.kv_heads = text.count(kKvHeads);
  c.vocab = text.count(kVocab);
  check_silu(text, tj);
  if (c.heads % c.kv_heads != 0) text.fail("num_key_value_heads", "must divide num_attention_heads");
  if (tj.contains("head_dim")) {
    c.head_dim = text.count(kHeadDim);
  } else {
    if (c.hidden % c.heads != 0) text.fail("num_attention_heads", "must divide hidden_size (no head_dim given)");
    c.head_dim = c.hidden / c.heads;
  }
  c.qkv_bias = true;  // Qwen2.5's attention (llama.py Qwen25_7BVLI_Config.qkv_bias)

  // Qwen25_7BVLI always builds the vision tower, and ComfyUI loads it with the language model.
  if (!top.has("vision_config"))
    top.fail("vision_config", "missing: ComfyUI's Qwen2.5-VL text encoder builds and loads the vision tower (qwen_vl.py)");
  {
    const ConfigReader v = top.child("vision_config");
    const nlohmann::json& vj = j["vision_config"];
    static const std::set<std::string> vision{"depth", "hidden_size", "intermediate_size", "num_heads",
                                              "out_hidden_size", "patch_size", "temporal_patch_size",
                                              "spatial_merge_size", "in_channels", "hidden_act"};
    v.refuse_unknown(vision, kHarmlessVision, "Qwen2.5-VL vision_config");
    check_silu(v, vj);
    c.vision.depth = v.count(kDepth);
    c.vision.hidden = v.count(kVisionHidden);
    c.vision.ff = v.count(kVisionFf);
    c.vision.heads = v.count(kVisionHeads);
    c.vision.out_hidden = v.count(kOutHidden);
    c.vision.patch = v.count(kPatch);
    c.vision.temporal_patch = v.count(kTemporalPatch);
    c.vision.merge = v.count(kMerge);
    c.vision.in_channels = v.count(kChannels);
    if (c.vision.hidden % c.vision.heads != 0) v.fail("num_heads", "must divide hidden_size");
    if (c.vision.out_hidden != c.hidden)
      v.fail("out_hidden_size", "must be the language model's hidden_size (" + std::to_string(c.hidden) +
                                    "): the merger's output is the prompt's embedding");
  }
  if (const auto name = top.optional_string("name")) c.name = *name;
  return c;
}

}  // namespace

LlmTextEncoderConfig parse_llm_text_encoder_config(const std::string& text, const std::string& file) {
  return read_config_with(parse_config_json(text, file), read_llm);
}

LlmTextEncoderConfig load_llm_text_encoder_config(const std::string& path) {
  return read_config_with(load_config_json(path, "text encoder config"), read_llm);
}

}  // namespace tiersim::model
