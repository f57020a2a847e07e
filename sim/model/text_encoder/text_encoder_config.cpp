#include "model/text_encoder/text_encoder_config.hpp"

#include <set>

#include "core/error.hpp"
#include "model/config_json.hpp"

namespace tiersim::model {

std::uint64_t TextEncoderConfig::params() const {
  const std::uint64_t d = width, in = inner();
  if (kind == Kind::T5) {
    // shared embedding; per block q, k, v, o (no biases), two T5LayerNorm scales, wi_0 (and wi_1), wo, the
    // relative bias table where a block has one; the final norm.
    const std::uint64_t ffn = (gated ? 2 : 1) * d * ff + ff * d;
    const std::uint64_t bias_tables = (bias_every_layer ? layers : 1) * kBuckets * heads;
    return vocab * d + layers * (4 * d * in + 2 * d + ffn) + bias_tables + d;
  }
  // CLIPTextModel: token and position embeddings; per layer two LayerNorms (weight and bias), q, k, v,
  // out_proj with biases, fc1, fc2 with biases; the final LayerNorm; text_projection, hidden x hidden without a
  // bias whatever projection_dim says (comfy/clip_model.py CLIPTextModel).
  const std::uint64_t attn = 3 * (d * in + in) + in * d + d;
  const std::uint64_t mlp = d * ff + ff + ff * d + d;
  return vocab * d + positions * d + layers * (4 * d + attn + mlp) + 2 * d + d * d;
}

namespace {

constexpr Bound kLayers{"num_layers", 1000, "1,000"};
constexpr Bound kWidth{"d_model", 65536, "65,536"};
constexpr Bound kFf{"d_ff", 1 << 20, "1,048,576"};
constexpr Bound kKv{"d_kv", 4096, "4,096"};
constexpr Bound kHeads{"num_heads", 1024, "1,024"};
constexpr Bound kVocab{"vocab_size", 1 << 24, "16,777,216"};
constexpr Bound kClipLayers{"num_hidden_layers", 1000, "1,000"};
constexpr Bound kClipWidth{"hidden_size", 65536, "65,536"};
constexpr Bound kClipFf{"intermediate_size", 1 << 20, "1,048,576"};
constexpr Bound kClipHeads{"num_attention_heads", 1024, "1,024"};
constexpr Bound kClipPositions{"max_position_embeddings", 1 << 16, "65,536"};

// Fields of a published config that neither ComfyUI's T5 nor tiersim's model reads and that change neither
// the weights nor the compute: provenance, tokens, dropout, initialisation, generation settings of the decoder
// ComfyUI does not build.
const std::set<std::string> kHarmless{
    "_name_or_path", "architectures", "transformers_version", "torch_dtype", "initializer_factor", "initializer_range",
    "dropout_rate", "dropout", "attention_dropout", "pad_token_id", "eos_token_id", "bos_token_id",
    "decoder_start_token_id", "is_encoder_decoder", "output_past", "tie_word_embeddings", "num_decoder_layers",
    "layer_norm_epsilon", "layer_norm_eps", "feed_forward_proj", "relative_attention_max_distance",
    "tokenizer_class", "use_cache", "projection_dim", "gradient_checkpointing", "source", "description", "name"};

TextEncoderConfig read_t5(const ConfigReader& r, const nlohmann::json& j, const std::string& type) {
  static const std::set<std::string> known{"model_type", "d_model", "d_ff", "d_kv", "num_heads", "num_layers",
                                           "vocab_size", "is_gated_act", "dense_act_fn", "relative_attention_num_buckets"};
  r.refuse_unknown(known, kHarmless, "T5 encoder config");
  TextEncoderConfig c;
  c.kind = TextEncoderConfig::Kind::T5;
  c.layers = r.count(kLayers);
  c.width = r.count(kWidth);
  c.ff = r.count(kFf);
  c.head_dim = r.count(kKv);
  c.heads = r.count(kHeads);
  c.vocab = r.count(kVocab);
  c.gated = r.optional_bool("is_gated_act", false);
  c.bias_every_layer = type == "umt5";  // t5.py: relative_attention = model_type != "umt5"
  if (r.has("dense_act_fn")) {
    const std::string act = j["dense_act_fn"].get<std::string>();
    if (act != "gelu_pytorch_tanh" && act != "relu")
      r.fail("dense_act_fn", "'" + act + "' is not one of ComfyUI's T5 activations (gelu_pytorch_tanh, relu)");
  }
  if (r.has("relative_attention_num_buckets") &&
      (!j["relative_attention_num_buckets"].is_number_integer() ||
       j["relative_attention_num_buckets"].get<std::int64_t>() != static_cast<std::int64_t>(TextEncoderConfig::kBuckets)))
    r.fail("relative_attention_num_buckets", "must be 32 (ComfyUI's T5Attention builds 32 buckets)");
  c.name = type == "umt5" ? "umT5 encoder" : "T5 encoder";
  return c;
}

TextEncoderConfig read_clip(const ConfigReader& r, const nlohmann::json& j) {
  static const std::set<std::string> known{"model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
                                           "num_attention_heads", "max_position_embeddings", "vocab_size", "hidden_act"};
  r.refuse_unknown(known, kHarmless, "CLIP text model config");
  TextEncoderConfig c;
  c.kind = TextEncoderConfig::Kind::Clip;
  c.layers = r.count(kClipLayers);
  c.width = r.count(kClipWidth);
  c.ff = r.count(kClipFf);
  c.heads = r.count(kClipHeads);
  c.positions = r.count(kClipPositions);
  c.vocab = r.count(kVocab);
  if (c.width % c.heads != 0) r.fail("num_attention_heads", "must divide hidden_size");
  c.head_dim = c.width / c.heads;
  if (r.has("hidden_act")) {
    const std::string act = j["hidden_act"].get<std::string>();
    if (act != "quick_gelu" && act != "gelu")
      r.fail("hidden_act", "'" + act + "' is not one of ComfyUI's CLIP activations (quick_gelu, gelu)");
  }
  c.name = "CLIP text model";
  return c;
}

TextEncoderConfig read_text_encoder(const ConfigJson& doc) {
  const nlohmann::json& j = doc.json;
  if (!j.is_object()) throw InputError(doc.file, 1, "", "expected a JSON object of text encoder config fields");
  const ConfigReader r(doc);
  const auto type = r.optional_string("model_type");
  if (!type) r.fail("model_type", "missing: t5, umt5 or clip_text_model");
  TextEncoderConfig c;
  if (*type == "t5" || *type == "umt5") c = read_t5(r, j, *type);
  else if (*type == "clip_text_model") c = read_clip(r, j);
  else r.fail("model_type", "'" + *type + "' is not a text encoder tiersim models (t5, umt5, clip_text_model)");
  if (const auto name = r.optional_string("name")) c.name = *name;
  else if (const auto path = r.optional_string("_name_or_path")) c.name = *path;
  return c;
}

}  // namespace

TextEncoderConfig parse_text_encoder_config(const std::string& text, const std::string& file) {
  return read_config_with(parse_config_json(text, file), read_text_encoder);
}

TextEncoderConfig load_text_encoder_config(const std::string& path) {
  return read_config_with(load_config_json(path, "text encoder config"), read_text_encoder);
}

}  // namespace tiersim::model
