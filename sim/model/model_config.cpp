#include "model/model_config.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <vector>
#include <sstream>
#include <stdexcept>

#include "core/error.hpp"
#include "model/config_json.hpp"

namespace tiersim::model {

std::uint64_t ModelConfig::q_params() const {
  return hidden_size * num_attention_heads * head_dim + (attention_bias ? num_attention_heads * head_dim : 0);
}
std::uint64_t ModelConfig::kv_params() const {
  return hidden_size * num_key_value_heads * head_dim + (attention_bias ? num_key_value_heads * head_dim : 0);
}
std::uint64_t ModelConfig::o_params() const {
  if (mla()) return num_attention_heads * v_head_dim * hidden_size;  // MLA: heads x v_head_dim in, no bias
  // Qwen2 puts biases on q, k, v only; Llama's attention_bias also covers o_proj.
  const bool o_bias = attention_bias && model_type != "qwen2";
  return num_attention_heads * head_dim * hidden_size + (o_bias ? hidden_size : 0);
}
std::uint64_t ModelConfig::mlp_matrix_params() const {
  return hidden_size * intermediate_size + (mlp_bias ? intermediate_size : 0);
}
std::uint64_t ModelConfig::expert_matrix_params() const { return hidden_size * moe_intermediate_size; }
std::uint64_t ModelConfig::expert_in_bias() const { return expert_bias ? moe_intermediate_size : 0; }
std::uint64_t ModelConfig::expert_out_bias() const { return expert_bias ? hidden_size : 0; }
std::uint64_t ModelConfig::router_params() const { return hidden_size * num_experts + (expert_bias ? num_experts : 0); }
std::uint64_t ModelConfig::routed_expert_params() const {
  return num_experts * (3 * expert_matrix_params() + 2 * expert_in_bias() + expert_out_bias());
}
std::uint64_t ModelConfig::mla_layer_params(std::uint64_t layer) const {
  const std::uint64_t attention = mla_q_a_params() + q_lora_rank + mla_q_b_params() + mla_kv_a_params() + kv_lora_rank +
                                  mla_k_b_params() + mla_v_b_params() + o_params();
  const std::uint64_t mlp = moe_layer(layer) ? router_params() + (expert_score_bias ? num_experts : 0) +
                                                   num_experts * 3 * expert_matrix_params() + 3 * shared_expert_matrix_params()
                                             : 3 * mlp_matrix_params();
  return attention + mlp + 2 * hidden_size;
}
std::uint64_t ModelConfig::layer_params() const {
  if (mla()) return mla_layer_params(first_k_dense_replace);  // a mixture-of-experts layer
  // gate and up carry an intermediate-size bias, down a hidden-size one; counted approximately the
  // same via mlp_matrix_params (mlp_bias is false for every shipped model).
  const std::uint64_t mlp =
      is_moe() ? router_params() + routed_expert_params() : 3 * mlp_matrix_params();
  return q_params() + 2 * kv_params() + o_params() + mlp + 2 * hidden_size + (qk_norm ? 2 * head_dim : 0) +
         (attention_sinks ? num_attention_heads : 0);
}
std::uint64_t ModelConfig::embedding_params() const { return vocab_size * hidden_size; }
std::uint64_t ModelConfig::total_params() const {
  if (mla()) {
    std::uint64_t layers = 0;
    for (std::uint64_t l = 0; l < num_hidden_layers; ++l) layers += mla_layer_params(l);
    return embedding_params() * (tie_word_embeddings ? 1 : 2) + layers + hidden_size;
  }
  return embedding_params() * (tie_word_embeddings ? 1 : 2) + num_hidden_layers * layer_params() + hidden_size;
}

namespace {

// HF config fields that affect neither weight sizes nor compute in our model; accepted and ignored.
const std::set<std::string>& ignored_hf_fields() {
  static const std::set<std::string> fields{
      "_name_or_path", "architectures", "attention_dropout", "bos_token_id", "eos_token_id", "pad_token_id",
      "hidden_act", "initializer_range", "max_window_layers", "rms_norm_eps",
      "rope_scaling", "rope_theta", "sliding_window", "use_sliding_window", "torch_dtype", "dtype",
      "transformers_version", "use_cache", "pretraining_tp", "layer_types", "description", "source",
      // qwen3_moe: the routing weights' normalisation and the training loss change neither sizes nor compute
      "norm_topk_prob", "router_aux_loss_coef", "output_router_logits",
      // mixtral: noise added to the router's logits in training only (MixtralSparseMoeBlock.forward)
      "router_jitter_noise"};
  return fields;
}

// Bounds on what a config may say: far above any published dense decoder (Llama-3.1-405B: 126 layers,
// hidden 16384, vocab 128256), low enough that every product the simulator forms fits 64 bits.
constexpr Bound kHiddenSize{"hidden_size", 1u << 20, "1,048,576"};
constexpr Bound kIntermediateSize{"intermediate_size", 1u << 22, "4,194,304"};
constexpr Bound kLayers{"num_hidden_layers", 10'000, "10,000"};
constexpr Bound kHeads{"num_attention_heads", 4096, "4,096"};
constexpr Bound kKvHeads{"num_key_value_heads", 4096, "4,096"};
constexpr Bound kHeadDim{"head_dim", 16384, "16,384"};
constexpr Bound kVocab{"vocab_size", 1u << 24, "16,777,216"};
constexpr Bound kContext{"max_position_embeddings", 1u << 24, "16,777,216"};
constexpr Bound kExperts{"num_experts", 4096, "4,096"};
constexpr Bound kExpertsPerToken{"num_experts_per_tok", 4096, "4,096"};
constexpr Bound kMoeIntermediate{"moe_intermediate_size", 1u << 22, "4,194,304"};
constexpr std::uint64_t kMaxParams = 10'000'000'000'000u;  // 10^13: ten trillion parameters

// a * b and a + b, or nullopt when they overflow 64 bits.
std::optional<std::uint64_t> mul(std::optional<std::uint64_t> a, std::optional<std::uint64_t> b) {
  std::uint64_t r = 0;
  if (!a || !b || __builtin_mul_overflow(*a, *b, &r)) return std::nullopt;
  return r;
}
std::optional<std::uint64_t> add(std::optional<std::uint64_t> a, std::optional<std::uint64_t> b) {
  std::uint64_t r = 0;
  if (!a || !b || __builtin_add_overflow(*a, *b, &r)) return std::nullopt;
  return r;
}

// total_params() recomputed with every product and sum checked, so that the unchecked accessors
// are known to be exact for any config that passes.
std::optional<std::uint64_t> checked_total_params(const ModelConfig& m) {
  using U = std::optional<std::uint64_t>;
  const U h = m.hidden_size, heads = m.num_attention_heads, kv = m.num_key_value_heads, hd = m.head_dim;
  const U q = add(mul(mul(h, heads), hd), m.attention_bias ? mul(heads, hd) : U{0});
  const U kvp = add(mul(mul(h, kv), hd), m.attention_bias ? mul(kv, hd) : U{0});
  const U o = add(mul(mul(heads, hd), h), h);
  const U dense_mlp = mul(U{3}, add(mul(h, U{m.intermediate_size}), U{m.intermediate_size}));
  const U ie = m.moe_intermediate_size, biases = m.expert_bias ? add(mul(U{2}, ie), h) : U{0};
  const U moe_mlp = add(add(mul(h, U{m.num_experts}), m.expert_bias ? U{m.num_experts} : U{0}),
                        mul(U{m.num_experts}, add(mul(U{3}, mul(h, ie)), biases)));
  const U mlp = m.is_moe() ? moe_mlp : dense_mlp;
  const U layer = add(add(add(add(add(q, mul(U{2}, kvp)), o), mlp), add(mul(U{2}, h), mul(U{2}, hd))),
                      m.attention_sinks ? U{m.num_attention_heads} : U{0});
  const U embed = mul(U{m.vocab_size}, h);
  if (m.mla()) {
    // deepseek: mla_layer_params() with every product checked, the dense and the MoE layers apart.
    const U heads_qk = mul(heads, U{m.qk_nope_head_dim + m.qk_rope_head_dim});
    const U attention = add(
        add(add(mul(h, U{m.q_lora_rank}), U{m.q_lora_rank}), mul(U{m.q_lora_rank > 0 ? m.q_lora_rank : m.hidden_size}, heads_qk)),
        add(add(add(mul(h, U{m.kv_lora_rank + m.qk_rope_head_dim}), U{m.kv_lora_rank}),
                mul(mul(heads, U{m.kv_lora_rank}), U{m.qk_nope_head_dim + m.v_head_dim})),
            mul(mul(heads, U{m.v_head_dim}), h)));
    const U routed = add(add(mul(h, U{m.num_experts}), U{m.expert_score_bias ? m.num_experts : 0}),
                         mul(U{m.num_experts}, mul(U{3}, mul(h, ie))));
    const U moe = add(routed, mul(U{3}, mul(mul(h, U{m.n_shared_experts}), ie)));
    const U dense = mul(U{3}, mul(h, U{m.intermediate_size}));
    const U k = m.first_k_dense_replace, rest = m.num_hidden_layers - m.first_k_dense_replace;
    const U layers = add(add(mul(U{m.num_hidden_layers}, add(attention, mul(U{2}, h))), mul(k, dense)), mul(rest, moe));
    return add(add(mul(embed, U{m.tie_word_embeddings ? 1u : 2u}), layers), h);
  }
  return add(add(mul(embed, U{2}), mul(U{m.num_hidden_layers}, layer)), h);
}

// gpt_oss's own fields (transformers' GptOssConfig and modeling_gpt_oss.py): biases on the experts and the router,
// attention sinks, sliding-window layers, and the experts' published MXFP4 format.
// A mixture of experts' counts under the family's own key for the experts (num_experts, num_local_experts,
// n_routed_experts): experts, experts per token (no more than the experts), and, where the family has its own expert
// width, moe_intermediate_size (else intermediate_size, as Mixtral's); each expert's three matrices are tensors of their
// own in a trace, so their number is bounded.
void read_experts(const ConfigReader& r, ModelConfig& m, const char* experts_key, bool own_width) {
  m.num_experts = r.count(Bound{experts_key, kExperts.max, kExperts.max_text});
  m.num_experts_per_tok = r.count(kExpertsPerToken);
  if (m.num_experts_per_tok > m.num_experts) r.fail("num_experts_per_tok", std::string("is more than ") + experts_key);
  m.moe_intermediate_size = own_width ? r.count(kMoeIntermediate) : m.intermediate_size;
  if (m.num_experts * m.num_hidden_layers > (1u << 17))
    r.fail(experts_key, std::string(experts_key) + " x num_hidden_layers is " +
                            std::to_string(m.num_experts * m.num_hidden_layers) +
                            "; at most 131,072 (experts are traced one by one)");
}

void read_gpt_oss(const ConfigReader& r, const nlohmann::json& j, ModelConfig& m) {
  m.expert_bias = true;
  m.attention_sinks = true;
  if (r.has("experts_per_token") && j["experts_per_token"] != m.num_experts_per_tok)
    r.fail("experts_per_token", "differs from num_experts_per_tok (" + std::to_string(m.num_experts_per_tok) + ")");
  if (!r.has("layer_types"))
    r.fail("layer_types", "missing: a gpt_oss config lists each layer's attention (sliding_attention or full_attention)");
  {
    const auto& types = j["layer_types"];
    if (!types.is_array() || types.size() != m.num_hidden_layers)
      r.fail("layer_types", "must list one type per layer (" + std::to_string(m.num_hidden_layers) + ")");
    for (const auto& t : types) {
      if (t != "sliding_attention" && t != "full_attention")
        r.fail("layer_types", "each is \"sliding_attention\" or \"full_attention\", not " + t.dump());
      m.sliding_layers.push_back(t == "sliding_attention");
    }
  }
  const bool any_sliding = std::find(m.sliding_layers.begin(), m.sliding_layers.end(), true) != m.sliding_layers.end();
  if (any_sliding) {
    if (!r.has("sliding_window") || !j["sliding_window"].is_number_unsigned() || j["sliding_window"] == 0)
      r.fail("sliding_window", "layer_types has sliding layers: give their window in tokens (gpt-oss: 128)");
    m.sliding_window = r.count(Bound{"sliding_window", 1u << 24, "16,777,216"});
  }
  if (r.has("quantization_config")) {
    const auto& q = j["quantization_config"];
    if (!q.is_object() || !q.contains("quant_method") || q["quant_method"] != "mxfp4")
      r.fail("quantization_config", "only the published MXFP4 experts (quant_method \"mxfp4\") are modelled");
    m.expert_weight_bits = 4.25;  // ggml/transformers MXFP4: 32 4-bit values and one E8M0 scale byte per block
  }
}

// deepseek_v3's and deepseek_v2's own fields (transformers' DeepseekV3Config / DeepseekV2Config, DeepSeek's
// configuration_deepseek.py), as llama.cpp reads them (convert_hf_to_gguf.py DeepseekV2Model.set_gguf_parameters,
// which converts both; src/llama-model.cpp LLM_ARCH_DEEPSEEK2; src/models/deepseek2.cpp llm_build_deepseek2).
const std::set<std::string>& deepseek_fields() {
  static const std::set<std::string> fields{
      "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "qk_head_dim",
      "n_routed_experts", "n_shared_experts", "first_k_dense_replace", "moe_layer_freq", "topk_method", "n_group",
      "topk_group", "routed_scaling_factor", "scoring_func", "num_nextn_predict_layers", "ep_size", "aux_loss_alpha",
      "seq_aux", "auto_map", "rope_interleave"};
  return fields;
}

void read_deepseek(const ConfigReader& r, const nlohmann::json& j, ModelConfig& m) {
  // A count that may be 0 (first_k_dense_replace, n_shared_experts, num_nextn_predict_layers).
  auto count0 = [&](const char* key, std::uint64_t max, std::uint64_t fallback) -> std::uint64_t {
    if (!r.has(key)) return fallback;
    if (!j[key].is_number_unsigned() || j[key].get<std::uint64_t>() > max)
      r.fail(key, "must be an integer from 0 to " + std::to_string(max) + ", got " + j[key].dump());
    return j[key].get<std::uint64_t>();
  };
  // q_lora_rank null (DeepSeek-V2-Lite): a plain q_proj (llama.cpp's attn_q, "is_lite" in llm_build_deepseek2).
  if (r.has("q_lora_rank") && !j["q_lora_rank"].is_null()) m.q_lora_rank = r.count(Bound{"q_lora_rank", 1u << 20, "1,048,576"});
  m.kv_lora_rank = r.count(Bound{"kv_lora_rank", 1u << 20, "1,048,576"});
  m.qk_nope_head_dim = r.count(Bound{"qk_nope_head_dim", 16384, "16,384"});
  m.qk_rope_head_dim = r.count(Bound{"qk_rope_head_dim", 16384, "16,384"});
  m.v_head_dim = r.count(Bound{"v_head_dim", 16384, "16,384"});
  // Newer transformers write the derived qk_head_dim, and head_dim as the rotary part (DeepseekV3Config: head_dim =
  // qk_rope_head_dim, what its rotary embedding reads): both must agree with the fields they come from.
  if (r.has("qk_head_dim") && j["qk_head_dim"] != m.qk_nope_head_dim + m.qk_rope_head_dim)
    r.fail("qk_head_dim", "must be qk_nope_head_dim + qk_rope_head_dim (" +
                              std::to_string(m.qk_nope_head_dim + m.qk_rope_head_dim) + ")");
  if (r.has("head_dim") && j["head_dim"] != m.qk_rope_head_dim)
    r.fail("head_dim", "a deepseek config's head_dim is its rotary width, qk_rope_head_dim (" +
                           std::to_string(m.qk_rope_head_dim) + ")");
  m.head_dim = m.qk_nope_head_dim + m.qk_rope_head_dim;
  // MLA gives every head its own key from the latent: num_key_value_heads (128 in DeepSeek-V3's config) is the head
  // count, not a grouping (llama.cpp's converter writes head_count_kv 1 for its MQA form of the same cache).
  if (r.has("num_key_value_heads") && j["num_key_value_heads"] != m.num_attention_heads)
    r.fail("num_key_value_heads", "must equal num_attention_heads (" + std::to_string(m.num_attention_heads) +
                                      "): MLA's keys are per head");
  m.num_key_value_heads = m.num_attention_heads;
  if (m.attention_bias) r.fail("attention_bias", "deepseek attention without biases is modelled (llama.cpp loads none)");
  if (m.mlp_bias) r.fail("mlp_bias", "deepseek MLPs without biases are modelled (llama.cpp loads none)");
  m.first_k_dense_replace = count0("first_k_dense_replace", m.num_hidden_layers, 0);
  if (r.has("n_routed_experts") && !j["n_routed_experts"].is_null()) {
    read_experts(r, m, "n_routed_experts", true);
    m.n_shared_experts = count0("n_shared_experts", 64, 0);
    // transformers: a layer is MoE when layer_idx >= first_k_dense_replace and layer_idx % moe_layer_freq == 0;
    // llama.cpp reads no moe_layer_freq (every layer from n_layer_dense_lead on is MoE): only 1 means both alike.
    if (r.has("moe_layer_freq") && j["moe_layer_freq"] != 1)
      r.fail("moe_layer_freq", "only 1 (every layer after the dense ones a mixture of experts) is modelled, got " +
                                   j["moe_layer_freq"].dump());
    // noaux_tc (DeepSeek-V3): the router's e_score_correction_bias, n_routed_experts values added to the scores for
    // the top-k choice (llama.cpp's exp_probs_b); greedy and group_limited_greedy (DeepSeek-V2) have none.
    const auto method = r.optional_string("topk_method");
    if (method && *method != "noaux_tc" && *method != "greedy" && *method != "group_limited_greedy")
      r.fail("topk_method", "one of noaux_tc, greedy, group_limited_greedy, not '" + *method + "'");
    m.expert_score_bias = method && *method == "noaux_tc";
    const auto scoring = r.optional_string("scoring_func");
    if (scoring && *scoring != "sigmoid" && *scoring != "softmax")
      r.fail("scoring_func", "sigmoid or softmax (llama.cpp's expert_gating_func), not '" + *scoring + "'");
  } else {
    for (const char* key : {"n_shared_experts", "num_experts_per_tok", "moe_intermediate_size"})
      if (r.has(key) && !j[key].is_null() && j[key] != 0)
        r.fail(key, "a mixture-of-experts field without n_routed_experts");
    m.first_k_dense_replace = m.num_hidden_layers;  // every layer dense, as convert_hf_to_gguf.py then writes
  }
  // num_nextn_predict_layers: DeepSeek-V3's multi-token-prediction module (layer 61, README_WEIGHTS.md: 11.5 B unique
  // parameters) serves speculative decoding only; convert_hf_to_gguf.py DeepseekV2Model.modify_tensors skips every
  // model.layers.N with N >= num_hidden_layers, so llama.cpp neither loads nor runs it. Read, bounded, and left out.
  count0("num_nextn_predict_layers", 16, 0);
  if (r.has("quantization_config")) {
    // The published FP8 checkpoint (128x128 blocks, fp32 scales): its format is --dtype's here (fp8 for the
    // checkpoint as published); llama.cpp's GGUFs are converted from a bf16 copy and quantised anew.
    const auto& q = j["quantization_config"];
    if (!q.is_object() || !q.contains("quant_method") || q["quant_method"] != "fp8")
      r.fail("quantization_config", "only the published FP8 checkpoint (quant_method \"fp8\") is accepted; give the "
                                    "weight format with --dtype");
  }
  // Read and ignored, as they change neither the weights' sizes nor the work per token:
  //  n_group, topk_group: group-limited expert choice (which experts, not how many: routing is --routing's);
  //  routed_scaling_factor, norm_topk_prob, scoring_func: how the chosen experts' weights are formed (a few
  //    operations on num_experts logits per token);
  //  ep_size: DeepSeek's own code's expert-parallel degree (a distribution, not the model);
  //  aux_loss_alpha, seq_aux: training losses; auto_map: where DeepSeek's remote code lives;
  //  rope_interleave: the rotary layout of q and k (the same work).
}

ModelConfig read_config(const ConfigJson& doc) {
  const nlohmann::json& j = doc.json;
  if (!j.is_object()) throw InputError(doc.file, 1, "", "expected a JSON object of config.json fields");
  const ConfigReader r(doc);
  static const std::set<std::string> known{
      "name", "model_type", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
      "num_key_value_heads", "head_dim", "vocab_size", "tie_word_embeddings", "attention_bias", "mlp_bias",
      "max_position_embeddings", "num_experts", "num_experts_per_tok", "moe_intermediate_size", "decoder_sparse_step",
      "mlp_only_layers", "num_local_experts", "experts_per_token", "quantization_config", "swiglu_limit",
      "initial_context_length"};
  // The family first: another family's config (gemma2, phi3) has fields of its own, and "unknown fields" would hide
  // that its model_type is the reason.
  ModelConfig m;
  const auto model_type = r.optional_string("model_type");
  if (!model_type)
    r.fail("model_type", "missing: one of qwen3, qwen2, llama, mistral, qwen3_moe, mixtral, gpt_oss, deepseek_v3, deepseek_v2");
  m.model_type = *model_type;
  if (m.model_type != "qwen3" && m.model_type != "qwen2" && m.model_type != "llama" && m.model_type != "mistral" &&
      m.model_type != "qwen3_moe" && m.model_type != "mixtral" && m.model_type != "gpt_oss" &&
      m.model_type != "deepseek_v3" && m.model_type != "deepseek_v2")
    r.fail("model_type", "unsupported model_type '" + m.model_type +
                             "': dense decoders qwen3, qwen2, llama, mistral and the qwen3_moe, mixtral, gpt_oss, "
                             "deepseek_v3 and deepseek_v2 mixtures of experts are modelled");
  std::set<std::string> all_known = known;
  all_known.insert(deepseek_fields().begin(), deepseek_fields().end());
  r.refuse_unknown(all_known, ignored_hf_fields(), "config.json");
  const bool qwen_moe = m.model_type == "qwen3_moe", gpt_oss = m.model_type == "gpt_oss";
  const bool mixtral = m.model_type == "mixtral" || gpt_oss;  // gpt_oss names its experts as Mixtral does
  const bool moe = qwen_moe || mixtral;
  const bool deepseek = m.model_type == "deepseek_v3" || m.model_type == "deepseek_v2";
  for (const char* key : {"experts_per_token", "quantization_config", "swiglu_limit", "initial_context_length"})
    if (!gpt_oss && !(deepseek && std::string(key) == "quantization_config") && r.has(key))
      r.fail(key, "is a gpt_oss field; model_type is '" + m.model_type + "'");
  if (!deepseek)
    for (const auto& key : deepseek_fields())
      if (r.has(key)) r.fail(key, "is a deepseek_v3 / deepseek_v2 field; model_type is '" + m.model_type + "'");
  // Each family's own expert fields (transformers' Qwen3MoeConfig, MixtralConfig); another's is an error.
  for (const char* key : {"num_experts", "moe_intermediate_size", "decoder_sparse_step", "mlp_only_layers"})
    if (!qwen_moe && !(deepseek && std::string(key) == "moe_intermediate_size") && r.has(key))
      r.fail(key, moe ? "is a qwen3_moe field; mixtral names its experts num_local_experts"
                      : "is a mixture-of-experts field; model_type '" + m.model_type + "' is dense");
  if (!mixtral && r.has("num_local_experts"))
    r.fail("num_local_experts", moe ? "is a mixtral field; qwen3_moe names its experts num_experts"
                                    : "is a mixture-of-experts field; model_type '" + m.model_type + "' is dense");
  if (!moe && !deepseek && r.has("num_experts_per_tok"))
    r.fail("num_experts_per_tok", "is a mixture-of-experts field; model_type '" + m.model_type + "' is dense");
  if (j.contains("hidden_act") && j["hidden_act"] != "silu")
    r.fail("hidden_act", "only gated SiLU MLPs (hidden_act \"silu\") are modelled");
  const auto name = r.optional_string("name");
  const auto name_or_path = r.optional_string("_name_or_path");
  m.name = name ? *name : name_or_path ? *name_or_path : m.model_type;
  m.hidden_size = r.count(kHiddenSize);
  m.intermediate_size = r.count(kIntermediateSize);
  m.num_hidden_layers = r.count(kLayers);
  m.num_attention_heads = r.count(kHeads);
  m.num_key_value_heads = r.has("num_key_value_heads") && !deepseek ? r.count(kKvHeads) : m.num_attention_heads;
  m.vocab_size = r.count(kVocab);
  if (r.has(kContext.key)) m.max_position_embeddings = r.count(kContext);
  if (deepseek) {
    // read_deepseek: qk_nope_head_dim + qk_rope_head_dim
  } else if (r.has("head_dim")) {
    m.head_dim = r.count(kHeadDim);
  } else {
    if (m.hidden_size % m.num_attention_heads != 0)
      r.fail("head_dim", "missing, and hidden_size is not divisible by num_attention_heads");
    m.head_dim = m.hidden_size / m.num_attention_heads;
  }
  if (m.num_attention_heads % m.num_key_value_heads != 0)
    r.fail("num_key_value_heads", "must divide num_attention_heads");
  m.tie_word_embeddings = r.optional_bool("tie_word_embeddings", false);
  m.attention_bias = r.optional_bool("attention_bias", m.model_type == "qwen2");
  m.mlp_bias = r.optional_bool("mlp_bias", false);
  m.qk_norm = m.model_type == "qwen3" || qwen_moe;
  if (moe) {
    // transformers' Qwen3MoeSparseMoeBlock in every layer (decoder_sparse_step 1, no mlp_only_layers), or
    // MixtralSparseMoeBlock in every layer: its experts are intermediate_size wide (w1, w3, w2).
    read_experts(r, m, mixtral ? "num_local_experts" : "num_experts", !mixtral);
    if (m.mlp_bias) r.fail("mlp_bias", "experts with biases are modelled for gpt_oss only (its own, always on)");
    if (r.has("decoder_sparse_step") && j["decoder_sparse_step"] != 1)
      r.fail("decoder_sparse_step", "only 1 (every layer a mixture of experts) is modelled, got " + j["decoder_sparse_step"].dump());
    if (r.has("mlp_only_layers") && !(j["mlp_only_layers"].is_array() && j["mlp_only_layers"].empty()))
      r.fail("mlp_only_layers", "only [] (no dense layers) is modelled, got " + j["mlp_only_layers"].dump());
  }
  if (gpt_oss) read_gpt_oss(r, j, m);
  if (deepseek) read_deepseek(r, j, m);
  const auto params = checked_total_params(m);
  if (!params || *params > kMaxParams)
    r.fail("hidden_size",
           "the model's sizes give " + (params ? std::to_string(*params) : std::string("more than 2^64")) +
               " parameters; at most 10^13 (ten trillion) are modelled");
  return m;
}

}  // namespace

ModelConfig parse_model_config(const std::string& text, const std::string& file) {
  return read_config_with(parse_config_json(text, file), read_config);
}

ModelConfig load_model_config(const std::string& path) { return read_config_with(load_config_json(path), read_config); }

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
    case WeightDtype::Gguf: return "gguf";
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
    case WeightDtype::Gguf: return 4.5;  // per tensor in the generator (gguf_quant.hpp); not used for sizes
  }
  return 16.0;
}

std::uint64_t norm_bytes_per_param(WeightDtype d) { return d == WeightDtype::Fp32 || d == WeightDtype::Gguf ? 4 : 2; }
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
