#pragma once
// A decoder LLM (dense, or with routed experts) described by the fields of its Hugging Face config.json, plus the weight
// format (dtype). Parameter and byte counts are derived here and nowhere else.
#include <cstdint>
#include <string>
#include <vector>

namespace tiersim::model {

// Weight formats. Bits per parameter of the matrices; norms stay 16-bit (32-bit for fp32).
// Gguf: a llama.cpp file type (GenerationOptions::gguf names it: Q4_K_M, ...), a per-tensor mix.
enum class WeightDtype { Fp32, Bf16, Fp16, Fp8, Int8, Q4, Gguf };

struct ModelConfig {
  std::string name;
  std::string model_type;          // qwen3, qwen2, llama, mistral; qwen3_moe, mixtral
  std::uint64_t hidden_size = 0;
  std::uint64_t intermediate_size = 0;
  std::uint64_t num_hidden_layers = 0;
  std::uint64_t num_attention_heads = 0;
  std::uint64_t num_key_value_heads = 0;
  std::uint64_t head_dim = 0;      // defaults to hidden_size / num_attention_heads
  std::uint64_t vocab_size = 0;
  // The training context (config.json's max_position_embeddings, a GGUF file's {arch}.context_length;
  // 0 when absent): llama.cpp's default context size, which its --fit may reduce.
  std::uint64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  bool mlp_bias = false;
  bool qk_norm = false;            // Qwen3 normalises q and k per head
  // Mixture of experts (qwen3_moe; mixtral, whose num_local_experts and intermediate_size are read into these):
  // every layer's MLP is num_experts routed experts of moe_intermediate_size, num_experts_per_tok of them per
  // token, chosen by a router (hidden x experts).
  std::uint64_t num_experts = 0;   // 0: a dense model
  std::uint64_t num_experts_per_tok = 0;
  std::uint64_t moe_intermediate_size = 0;
  bool is_moe() const { return num_experts > 0; }
  // gpt_oss (transformers' GptOssConfig): biases on every expert matrix and on the router, one learned
  // attention-sink logit per head and layer, layers of layer_types "sliding_attention" attending to the last
  // sliding_window tokens only, and experts stored as published in MXFP4 (4-bit values, one 8-bit scale per
  // 32: 4.25 bits; quantization_config.quant_method "mxfp4") whatever the other tensors' format.
  bool expert_bias = false;
  bool attention_sinks = false;
  std::uint64_t sliding_window = 0;
  std::vector<bool> sliding_layers;  // by layer: attends to the last sliding_window tokens (empty: none)
  double expert_weight_bits = 0;     // 0: the weight format's; 4.25: MXFP4
  bool sliding(std::uint64_t layer) const { return layer < sliding_layers.size() && sliding_layers[layer]; }
  // deepseek_v3 / deepseek_v2 (transformers' DeepseekV3Config / DeepseekV2Config; llama.cpp's LLM_ARCH_DEEPSEEK2):
  // Multi-head Latent Attention -- q through a rank-q_lora_rank bottleneck (q_a_proj, q_a_layernorm, q_b_proj; a
  // plain q_proj when q_lora_rank is null, DeepSeek-V2-Lite), keys and values from one latent of kv_lora_rank plus
  // a shared qk_rope_head_dim rotary key (kv_a_proj_with_mqa, kv_a_layernorm), expanded per head by kv_b_proj
  // (qk_nope_head_dim of key and v_head_dim of value per head; llama.cpp's GGUF splits it into attn_k_b and
  // attn_v_b). The first first_k_dense_replace layers have a dense MLP of intermediate_size; the others
  // num_experts (n_routed_experts) routed experts of moe_intermediate_size, num_experts_per_tok per token, and
  // n_shared_experts always-active ones fused into one MLP n_shared_experts x moe_intermediate_size wide.
  // head_dim is qk_nope_head_dim + qk_rope_head_dim and num_key_value_heads num_attention_heads (every head its
  // own key); num_nextn_predict_layers' multi-token-prediction layer is not part of the model run.
  std::uint64_t q_lora_rank = 0;             // 0: a plain q projection
  std::uint64_t kv_lora_rank = 0;            // > 0: Multi-head Latent Attention
  std::uint64_t qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  std::uint64_t n_shared_experts = 0;
  std::uint64_t first_k_dense_replace = 0;   // leading dense layers (0 for every other family)
  bool expert_score_bias = false;            // topk_method noaux_tc: a per-expert selection bias (e_score_correction_bias)
  bool mla() const { return kv_lora_rank > 0; }
  bool moe_layer(std::uint64_t layer) const { return is_moe() && layer >= first_k_dense_replace; }
  // MLA's matrices (0 where absent): q_a (hidden x q_lora_rank), q_b (q_lora_rank x heads*(nope+rope)) or the
  // plain q (hidden x heads*(nope+rope)), kv_a (hidden x (kv_lora_rank + rope)), k_b (heads x nope x
  // kv_lora_rank), v_b (heads x kv_lora_rank x v_head_dim); o_params() is heads*v_head_dim x hidden.
  std::uint64_t mla_q_a_params() const { return q_lora_rank > 0 ? hidden_size * q_lora_rank : 0; }
  std::uint64_t mla_q_b_params() const {
    return (q_lora_rank > 0 ? q_lora_rank : hidden_size) * num_attention_heads * (qk_nope_head_dim + qk_rope_head_dim);
  }
  std::uint64_t mla_kv_a_params() const { return hidden_size * (kv_lora_rank + qk_rope_head_dim); }
  std::uint64_t mla_k_b_params() const { return num_attention_heads * qk_nope_head_dim * kv_lora_rank; }
  std::uint64_t mla_v_b_params() const { return num_attention_heads * kv_lora_rank * v_head_dim; }
  std::uint64_t shared_expert_matrix_params() const { return hidden_size * n_shared_experts * moe_intermediate_size; }
  // KV cache elements per token and layer: llama.cpp's MLA cache (the latent and the rotary key; V a view of K),
  // or Hugging Face's DynamicCache of the expanded keys and values (heads x (nope + rope + v)).
  std::uint64_t mla_kv_elements(bool llamacpp) const {
    return llamacpp ? kv_lora_rank + qk_rope_head_dim
                    : num_attention_heads * (qk_nope_head_dim + qk_rope_head_dim + v_head_dim);
  }
  std::uint64_t mla_layer_params(std::uint64_t layer) const;  // one layer's parameters, its MLP dense or MoE

  // Parameter counts by module. Sums give the published totals (Qwen3-14B: 14.77 B).
  std::uint64_t q_params() const;
  std::uint64_t kv_params() const;   // one of k or v
  std::uint64_t o_params() const;
  std::uint64_t mlp_matrix_params() const;  // one of gate, up, down (with its bias if any)
  std::uint64_t expert_matrix_params() const;  // MoE: one of an expert's gate, up, down (the matrix alone)
  std::uint64_t expert_in_bias() const;        // MoE: the bias of an expert's gate or up (0 without)
  std::uint64_t expert_out_bias() const;       // MoE: the bias of an expert's down (0 without)
  std::uint64_t router_params() const;         // MoE: the router (hidden x experts, and its bias)
  std::uint64_t routed_expert_params() const;  // MoE: every routed expert of a layer, matrices and biases
  std::uint64_t layer_params() const;
  std::uint64_t embedding_params() const;
  std::uint64_t total_params() const;
};

// Reads a JSON model description (HF config.json fields). Unknown keys are errors, except the HF
// fields listed in the source that change neither the weights nor the compute.
ModelConfig load_model_config(const std::string& path);
ModelConfig parse_model_config(const std::string& json_text, const std::string& source_name);

WeightDtype parse_weight_dtype(const std::string& s);  // throws std::invalid_argument
const char* to_string(WeightDtype d);
double weight_bits(WeightDtype d);         // bits per matrix parameter, scales included
std::uint64_t norm_bytes_per_param(WeightDtype d);
std::uint64_t activation_bytes(WeightDtype d);  // bytes per activation / KV element
const char* compute_dtype(WeightDtype d);  // the dtype matrix kernels compute in
std::uint64_t matrix_bytes(std::uint64_t params, WeightDtype d);

}  // namespace tiersim::model
