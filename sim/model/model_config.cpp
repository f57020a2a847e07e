#include "model/model_config.hpp"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>

#include "core/error.hpp"

namespace tiersim::model {

std::uint64_t ModelConfig::q_params() const {
  return hidden_size * num_attention_heads * head_dim + (attention_bias ? num_attention_heads * head_dim : 0);
}
std::uint64_t ModelConfig::kv_params() const {
  return hidden_size * num_key_value_heads * head_dim + (attention_bias ? num_key_value_heads * head_dim : 0);
}
std::uint64_t ModelConfig::o_params() const {
  // Qwen2 puts biases on q, k, v only; Llama's attention_bias also covers o_proj.
  const bool o_bias = attention_bias && model_type != "qwen2";
  return num_attention_heads * head_dim * hidden_size + (o_bias ? hidden_size : 0);
}
std::uint64_t ModelConfig::mlp_matrix_params() const {
  return hidden_size * intermediate_size + (mlp_bias ? intermediate_size : 0);
}
std::uint64_t ModelConfig::layer_params() const {
  // gate and up carry an intermediate-size bias, down a hidden-size one; counted approximately the
  // same via mlp_matrix_params (mlp_bias is false for every shipped model).
  return q_params() + 2 * kv_params() + o_params() + 3 * mlp_matrix_params() + 2 * hidden_size +
         (qk_norm ? 2 * head_dim : 0);
}
std::uint64_t ModelConfig::embedding_params() const { return vocab_size * hidden_size; }
std::uint64_t ModelConfig::total_params() const {
  return embedding_params() * (tie_word_embeddings ? 1 : 2) + num_hidden_layers * layer_params() + hidden_size;
}

namespace {

// HF config fields that affect neither weight sizes nor compute in our model; accepted and ignored.
const std::set<std::string>& ignored_hf_fields() {
  static const std::set<std::string> fields{
      "_name_or_path", "architectures", "attention_dropout", "bos_token_id", "eos_token_id", "pad_token_id",
      "hidden_act", "initializer_range", "max_position_embeddings", "max_window_layers", "rms_norm_eps",
      "rope_scaling", "rope_theta", "sliding_window", "use_sliding_window", "torch_dtype", "dtype",
      "transformers_version", "use_cache", "pretraining_tp", "layer_types", "description", "source"};
  return fields;
}

std::uint64_t require_uint(const nlohmann::json& j, const std::string& key, const std::string& file) {
  if (!j.contains(key)) throw InputError(file, 0, key, "missing required field");
  const auto& v = j.at(key);
  if (!v.is_number_integer() || v.get<std::int64_t>() <= 0)
    throw InputError(file, 0, key, "must be a positive integer");
  return v.get<std::uint64_t>();
}

bool optional_bool(const nlohmann::json& j, const std::string& key, const std::string& file, bool fallback) {
  if (!j.contains(key)) return fallback;
  if (!j.at(key).is_boolean()) throw InputError(file, 0, key, "must be true or false");
  return j.at(key).get<bool>();
}

}  // namespace

ModelConfig parse_model_config(const std::string& text, const std::string& file) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(file, 0, "", std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw InputError(file, 0, "", "expected a JSON object of config.json fields");
  static const std::set<std::string> known{
      "name", "model_type", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
      "num_key_value_heads", "head_dim", "vocab_size", "tie_word_embeddings", "attention_bias", "mlp_bias"};
  for (const auto& [key, value] : j.items()) {
    (void)value;
    if (!known.count(key) && !ignored_hf_fields().count(key))
      throw InputError(file, 0, key, "unknown model field (not a config.json field tiersim reads or ignores)");
  }
  ModelConfig m;
  if (!j.contains("model_type") || !j["model_type"].is_string())
    throw InputError(file, 0, "model_type", "missing: one of qwen3, qwen2, llama, mistral");
  m.model_type = j["model_type"].get<std::string>();
  if (m.model_type != "qwen3" && m.model_type != "qwen2" && m.model_type != "llama" && m.model_type != "mistral")
    throw InputError(file, 0, "model_type",
                     "unsupported '" + m.model_type + "': dense decoders qwen3, qwen2, llama, mistral are modelled");
  if (j.contains("hidden_act") && j["hidden_act"] != "silu")
    throw InputError(file, 0, "hidden_act", "only gated SiLU MLPs (hidden_act \"silu\") are modelled");
  m.name = j.value("name", j.value("_name_or_path", m.model_type));
  m.hidden_size = require_uint(j, "hidden_size", file);
  m.intermediate_size = require_uint(j, "intermediate_size", file);
  m.num_hidden_layers = require_uint(j, "num_hidden_layers", file);
  m.num_attention_heads = require_uint(j, "num_attention_heads", file);
  m.num_key_value_heads =
      j.contains("num_key_value_heads") ? require_uint(j, "num_key_value_heads", file) : m.num_attention_heads;
  m.vocab_size = require_uint(j, "vocab_size", file);
  if (j.contains("head_dim")) {
    m.head_dim = require_uint(j, "head_dim", file);
  } else {
    if (m.hidden_size % m.num_attention_heads != 0)
      throw InputError(file, 0, "head_dim", "missing, and hidden_size is not divisible by num_attention_heads");
    m.head_dim = m.hidden_size / m.num_attention_heads;
  }
  if (m.num_attention_heads % m.num_key_value_heads != 0)
    throw InputError(file, 0, "num_key_value_heads", "must divide num_attention_heads");
  m.tie_word_embeddings = optional_bool(j, "tie_word_embeddings", file, false);
  m.attention_bias = optional_bool(j, "attention_bias", file, m.model_type == "qwen2");
  m.mlp_bias = optional_bool(j, "mlp_bias", file, false);
  m.qk_norm = m.model_type == "qwen3";
  return m;
}

ModelConfig load_model_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path, 0, "", "cannot open model description");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_model_config(ss.str(), path);
}

WeightDtype parse_weight_dtype(const std::string& s) {
  if (s == "fp32") return WeightDtype::Fp32;
  if (s == "bf16") return WeightDtype::Bf16;
  if (s == "fp16") return WeightDtype::Fp16;
  if (s == "fp8") return WeightDtype::Fp8;
  if (s == "int8") return WeightDtype::Int8;
  if (s == "q4" || s == "4bit") return WeightDtype::Q4;
  throw std::invalid_argument("unknown dtype '" + s + "' (fp32, bf16, fp16, fp8, int8, q4)");
}

const char* to_string(WeightDtype d) {
  switch (d) {
    case WeightDtype::Fp32: return "fp32";
    case WeightDtype::Bf16: return "bf16";
    case WeightDtype::Fp16: return "fp16";
    case WeightDtype::Fp8: return "fp8";
    case WeightDtype::Int8: return "int8";
    case WeightDtype::Q4: return "q4";
  }
  return "?";
}

double weight_bits(WeightDtype d) {
  switch (d) {
    case WeightDtype::Fp32: return 32.0;
    case WeightDtype::Bf16:
    case WeightDtype::Fp16: return 16.0;
    case WeightDtype::Fp8:
    case WeightDtype::Int8: return 8.0;
    case WeightDtype::Q4: return 4.5;  // 4-bit values + one fp16 scale per 32 (GGUF Q4_0 layout)
  }
  return 16.0;
}

std::uint64_t norm_bytes_per_param(WeightDtype d) { return d == WeightDtype::Fp32 ? 4 : 2; }
std::uint64_t activation_bytes(WeightDtype d) { return d == WeightDtype::Fp32 ? 4 : 2; }

const char* compute_dtype(WeightDtype d) {
  switch (d) {
    case WeightDtype::Fp32: return "fp32";
    case WeightDtype::Fp16: return "fp16";
    case WeightDtype::Fp8: return "fp8";
    default: return "bf16";  // bf16 itself, and int8/q4 dequantised to bf16 inside the kernel
  }
}

std::uint64_t matrix_bytes(std::uint64_t params, WeightDtype d) {
  const double bits = weight_bits(d);
  return static_cast<std::uint64_t>(std::ceil(static_cast<double>(params) * bits / 8.0));
}

}  // namespace tiersim::model
