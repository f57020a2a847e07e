#include "model/training/training_memory.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tiersim::model {

TrainPrecision parse_train_precision(const std::string& name) {
  if (name == "bf16") return TrainPrecision::Bf16;
  if (name == "fp16") return TrainPrecision::Fp16;
  if (name == "fp32") return TrainPrecision::Fp32;
  if (name == "fp32-autocast") return TrainPrecision::Fp32AutocastBf16;
  throw std::invalid_argument("unknown precision '" + name + "' (bf16, fp16, fp32, fp32-autocast: fp32 weights, bf16 autocast)");
}

TrainOptimizer parse_train_optimizer(const std::string& name) {
  if (name == "adamw") return TrainOptimizer::AdamW;
  if (name == "sgd") return TrainOptimizer::Sgd;
  if (name == "sgd-momentum") return TrainOptimizer::SgdMomentum;
  if (name == "adamw8bit") return TrainOptimizer::AdamW8bit;
  throw std::invalid_argument("unknown optimizer '" + name + "' (adamw, sgd, sgd-momentum, adamw8bit: bitsandbytes' AdamW8bit)");
}

OptimizerOffload parse_optimizer_offload(const std::string& name) {
  if (name == "none") return OptimizerOffload::None;
  if (name == "cpu") return OptimizerOffload::Cpu;
  if (name == "cpu-gradients") return OptimizerOffload::CpuGradients;
  throw std::invalid_argument("unknown optimizer offload '" + name +
                              "' (none, cpu: torchao's CPUOffloadOptimizer, cpu-gradients: with offload_gradients=True)");
}

const char* to_string(OptimizerOffload o) {
  switch (o) {
    case OptimizerOffload::None: return "none";
    case OptimizerOffload::Cpu: return "cpu";
    case OptimizerOffload::CpuGradients: return "cpu-gradients";
  }
  return "?";
}

const char* to_string(TrainPrecision p) {
  switch (p) {
    case TrainPrecision::Bf16: return "bf16";
    case TrainPrecision::Fp16: return "fp16";
    case TrainPrecision::Fp32: return "fp32";
    case TrainPrecision::Fp32AutocastBf16: return "fp32-autocast";
  }
  return "?";
}

const char* to_string(TrainOptimizer o) {
  switch (o) {
    case TrainOptimizer::AdamW: return "adamw";
    case TrainOptimizer::Sgd: return "sgd";
    case TrainOptimizer::SgdMomentum: return "sgd-momentum";
    case TrainOptimizer::AdamW8bit: return "adamw8bit";
  }
  return "?";
}

double TrainingMemory::peak() const { return std::max({forward_peak, backward_start, backward_end, optimizer_peak}); }

const char* TrainingMemory::peak_phase() const {
  const double p = peak();
  if (p == forward_peak) return "forward";
  if (p == optimizer_peak) return "optimizer step";
  return "backward";
}

double parameter_bytes(const TrainingOptions& o) {
  return o.precision == TrainPrecision::Fp32 || o.precision == TrainPrecision::Fp32AutocastBf16 ? 4 : 2;
}

bool LoraOptions::targets_module(LoraModule m) const { return std::find(targets.begin(), targets.end(), m) != targets.end(); }

std::vector<LoraModule> parse_lora_targets(const std::string& list) {
  static const std::pair<const char*, LoraModule> names[] = {
      {"q_proj", LoraModule::Q},       {"k_proj", LoraModule::K},   {"v_proj", LoraModule::V},
      {"o_proj", LoraModule::O},       {"gate_proj", LoraModule::Gate}, {"up_proj", LoraModule::Up},
      {"down_proj", LoraModule::Down}};
  if (list == "all-linear") {
    std::vector<LoraModule> all;
    for (const auto& [name, m] : names) all.push_back(m);
    return all;
  }
  std::vector<bool> chosen(7, false);
  for (std::size_t start = 0; start <= list.size();) {
    const std::size_t comma = list.find(',', start);
    const std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    bool known = false;
    for (const auto& [name, m] : names)
      if (item == name) known = true, chosen[static_cast<int>(m)] = true;
    if (!known)
      throw std::invalid_argument("unknown LoRA target '" + item +
                                  "' (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, or all-linear)");
    start = comma == std::string::npos ? list.size() + 1 : comma + 1;
  }
  std::vector<LoraModule> out;  // the model's own order, whatever the list's
  for (const auto& [name, m] : names)
    if (chosen[static_cast<int>(m)]) out.push_back(m);
  return out;
}

std::pair<std::uint64_t, std::uint64_t> lora_module_shape(const ModelConfig& m, LoraModule module) {
  const std::uint64_t h = m.hidden_size, qd = m.num_attention_heads * m.head_dim, kvd = m.num_key_value_heads * m.head_dim;
  switch (module) {
    case LoraModule::Q: return {h, qd};
    case LoraModule::K:
    case LoraModule::V: return {h, kvd};
    case LoraModule::O: return {qd, h};
    case LoraModule::Gate:
    case LoraModule::Up: return {h, m.intermediate_size};
    case LoraModule::Down: return {m.intermediate_size, h};
  }
  return {0, 0};
}

std::vector<TrainableTensor> trainable_tensors(const ModelConfig& m, const TrainingOptions& o) {
  std::vector<TrainableTensor> v;
  if (!o.lora_enabled()) {
    for (const auto& [layer, n] : parameter_tensors(m)) v.push_back({layer, n, parameter_bytes(o)});
    return v;
  }
  for (std::uint64_t l = 0; l < m.num_hidden_layers; ++l)
    for (LoraModule module : o.lora.targets) {
      const auto [in, out] = lora_module_shape(m, module);
      v.push_back({static_cast<std::int32_t>(l), o.lora.rank * in, 4});   // lora_A.weight (r x in)
      v.push_back({static_cast<std::int32_t>(l), out * o.lora.rank, 4});  // lora_B.weight (out x r)
    }
  return v;
}

std::vector<double> optimizer_state_tensors(std::uint64_t n, const TrainingOptions& o, double element_bytes) {
  const double N = static_cast<double>(n), wb = element_bytes > 0 ? element_bytes : parameter_bytes(o);
  switch (o.optimizer) {
    case TrainOptimizer::AdamW: return {N * wb, N * wb};  // exp_avg, exp_avg_sq: zeros_like(p)
    case TrainOptimizer::SgdMomentum: return {N * wb};    // momentum_buffer: a clone of the first gradient
    case TrainOptimizer::Sgd: return {};
    case TrainOptimizer::AdamW8bit: {
      if (n < 4096) return {4 * N, 4 * N};  // state1, state2 in fp32 below min_8bit_size
      const double blocks = std::ceil(N / 2048.0);
      return {N, N, 4 * blocks, 4 * blocks};  // uint8 state1, state2; fp32 absmax1, absmax2
    }
  }
  return {};
}

double optimizer_state_bytes(std::uint64_t n, const TrainingOptions& o, double element_bytes) {
  double total = 0;
  for (double b : optimizer_state_tensors(n, o, element_bytes)) total += b;
  return total;
}

// Saved per token by one RMSNorm over `width`: its fp32 input (a copy unless already fp32), y in the activation
// dtype (y itself when that is fp32), and its output as the next projection's input (a bf16 cast under autocast).
static std::vector<SavedTensor> norm_saved(const TrainingOptions& o, double width) {
  const double f = 4;
  if (o.precision == TrainPrecision::Fp32) return {{"norm input", f * width}, {"norm y", f * width}, {"norm output", f * width}};
  if (o.precision == TrainPrecision::Fp32AutocastBf16)
    return {{"norm input", f * width}, {"norm y", f * width}, {"norm output, bf16 cast", 2 * width}};
  return {{"norm input, fp32", f * width}, {"norm y", 2 * width}, {"norm output", 2 * width}};
}

std::vector<SavedTensor> saved_per_layer(const ModelConfig& m, const TrainingOptions& o) {
  const bool fp32 = o.precision == TrainPrecision::Fp32;
  const double act = fp32 ? 4 : 2, f = 4;
  const double h = static_cast<double>(m.hidden_size);
  const double qd = static_cast<double>(m.num_attention_heads * m.head_dim);
  const double kvd = static_cast<double>(m.num_key_value_heads * m.head_dim);
  const double inter = static_cast<double>(m.intermediate_size), heads = static_cast<double>(m.num_attention_heads);
  if (o.lora_enabled()) {
    // Frozen weights: autograd saves an op's input only for the gradients it must compute. A frozen Linear keeps
    // nothing (its input's gradient needs only the weight); a frozen norm weight's product keeps nothing either, so
    // an RMSNorm keeps its fp32 input alone. Each LoRA module keeps its input cast to fp32 (for A's gradient) and
    // A's output (for B's). Layer 0's first norm, before any trainable op, keeps nothing in reality: not modelled.
    std::vector<SavedTensor> v{{"norm input, fp32", f * h}};
    if (m.qk_norm) v.insert(v.end(), {{"q_norm input", f * qd}, {"k_norm input", f * kvd}});
    v.insert(v.end(), {{"sdpa q", act * qd}, {"sdpa k", act * kvd}, {"sdpa v", act * kvd}, {"sdpa output", act * qd},
                       {"sdpa log-sum-exp", f * heads}, {"norm input, fp32", f * h}, {"gate", act * inter},
                       {"silu(gate)", act * inter}, {"up", act * inter}});
    for (LoraModule module : o.lora.targets) {
      const auto [in, out] = lora_module_shape(m, module);
      v.push_back({"LoRA input, fp32", f * static_cast<double>(in)});
      v.push_back({"LoRA A output", f * static_cast<double>(o.lora.rank)});
    }
    return v;
  }
  std::vector<SavedTensor> v = norm_saved(o, h);
  if (m.qk_norm) {  // Qwen3's per-head q/k norms: the fp32 input (a copy of the bf16 projection) and y in its dtype
    const double y = fp32 ? f : 2;
    v.insert(v.end(), {{"q_norm input", f * qd}, {"q_norm y", y * qd}, {"k_norm input", f * kvd}, {"k_norm y", y * kvd}});
  }
  v.insert(v.end(), {{"sdpa q", act * qd}, {"sdpa k", act * kvd}, {"sdpa v", act * kvd}, {"sdpa output", act * qd},
                     {"sdpa log-sum-exp", f * heads}, {"o_proj input (contiguous)", act * qd}});
  for (const auto& t : norm_saved(o, h)) v.push_back(t);
  v.insert(v.end(), {{"gate", act * inter}, {"silu(gate)", act * inter}, {"up", act * inter}, {"down_proj input", act * inter}});
  return v;
}

std::vector<SavedTensor> saved_final_norm(const ModelConfig& m, const TrainingOptions& o) {
  if (o.lora_enabled()) return {{"norm input, fp32", 4.0 * static_cast<double>(m.hidden_size)}};  // frozen norm and head
  return norm_saved(o, static_cast<double>(m.hidden_size));
}

std::vector<std::pair<std::int32_t, std::uint64_t>> parameter_tensors(const ModelConfig& m) {
  std::vector<std::pair<std::int32_t, std::uint64_t>> v{{-1, m.embedding_params()}};
  for (std::uint64_t l = 0; l < m.num_hidden_layers; ++l) {
    const auto layer = static_cast<std::int32_t>(l);
    v.emplace_back(layer, m.hidden_size);  // input_layernorm
    v.emplace_back(layer, m.q_params());
    v.emplace_back(layer, m.kv_params());
    v.emplace_back(layer, m.kv_params());
    if (m.qk_norm) v.emplace_back(layer, m.head_dim), v.emplace_back(layer, m.head_dim);
    v.emplace_back(layer, m.o_params());
    v.emplace_back(layer, m.hidden_size);  // post_attention_layernorm
    if (m.moe_layer(l)) {
      // transformers 5's experts, two parameters (tests/fixtures/hf_moe_parameters.jsonl), and the router.
      v.emplace_back(layer, m.num_experts * 2 * (m.expert_matrix_params() + m.expert_in_bias()));  // experts.gate_up_proj
      v.emplace_back(layer, m.num_experts * (m.expert_matrix_params() + m.expert_out_bias()));     // experts.down_proj
      v.emplace_back(layer, m.router_params());                                                     // gate
    } else {
      for (int k = 0; k < 3; ++k) v.emplace_back(layer, m.mlp_matrix_params());
    }
  }
  const auto L = static_cast<std::int32_t>(m.num_hidden_layers);
  v.emplace_back(L, m.hidden_size);
  if (!m.tie_word_embeddings) v.emplace_back(L, m.embedding_params());
  return v;
}

TrainingMemory training_memory(const ModelConfig& m, const TrainingOptions& o) {
  TrainingMemory r;
  const bool autocast = o.precision == TrainPrecision::Fp32AutocastBf16;
  const bool fp32 = o.precision == TrainPrecision::Fp32;
  const double wb = autocast || fp32 ? 4 : 2;  // bytes per parameter, and per gradient element
  const double act = fp32 ? 4 : 2;             // matmul outputs: bf16 under autocast
  const double f = 4;
  const double P = static_cast<double>(m.total_params());
  const double h = static_cast<double>(m.hidden_size), V = static_cast<double>(m.vocab_size);
  const double L = static_cast<double>(m.num_hidden_layers);
  const double T = static_cast<double>(o.batch) * static_cast<double>(o.seq);

  r.weights = P * wb;
  for (const TrainableTensor& t : trainable_tensors(m, o)) {
    const double bytes = static_cast<double>(t.n) * t.element_bytes;
    if (o.lora_enabled()) r.weights += bytes, r.adapters += bytes;  // the adapters, beside the frozen weights
    if (o.offloaded(t.n)) {
      // torch.empty_like(..., pin_memory=True) twice (the copy and its gradient): the pinned host allocator's
      // blocks are powers of two (aten/src/ATen/core/CachingHostAllocator.h, allocate: PowerOf2Ceil).
      r.host_pinned += 2 * std::exp2(std::ceil(std::log2(bytes)));
      r.host_optimizer_state += optimizer_state_bytes(t.n, o, t.element_bytes);
    } else {
      r.optimizer_state += optimizer_state_bytes(t.n, o, t.element_bytes);
      // the offloading optimizer's on-GPU AdamW for the small ones is fused: no foreach temporaries
      r.optimizer_temporary += o.optimizer == TrainOptimizer::AdamW && o.offload == OptimizerOffload::None ? bytes : 0;
    }
    if (!o.gradient_offloaded(t.n)) r.gradients += bytes;
  }
  if (autocast) {
    // Every Linear's weight cast once (lm_head reads the embedding table when tied); norms and the embedding
    // lookup run in fp32.
    const double norms = L * (2 * h + (m.qk_norm ? 2 * static_cast<double>(m.head_dim) : 0)) + h;
    const double not_cast = norms + (m.tie_word_embeddings ? 0 : static_cast<double>(m.embedding_params()));
    r.autocast_cache = 2 * (P - not_cast);
  }

  double per_layer = 0, final_norm = 0;
  for (const auto& t : saved_per_layer(m, o)) per_layer += t.bytes_per_token;
  for (const auto& t : saved_final_norm(m, o)) final_norm += t.bytes_per_token;
  const double residual = fp32 || autocast ? f * h : act * h;  // a decoder layer's input
  if (o.checkpointing) {
    r.saved_activations = T * (L * residual + final_norm);
    r.recompute = T * per_layer;
  } else {
    r.saved_activations = T * (L * per_layer + final_norm);
  }
  const double logits_dtype = fp32 ? f : 2;
  r.logits = T * V * f;                                           // log_softmax's saved fp32 result
  r.loss_transient = T * V * (logits_dtype + (fp32 ? 0 : f));     // the logits, and logits.float(), until the loss
  r.logits_grad = T * V * (f + f);                                // nll_loss's dense gradient and log_softmax's

  const double persistent = r.weights + r.optimizer_state;
  r.forward_peak = persistent + r.autocast_cache + r.saved_activations + r.logits + r.loss_transient;
  r.backward_start = persistent + r.autocast_cache + r.saved_activations + r.logits + r.logits_grad;
  r.backward_end = persistent + r.gradients + r.recompute;
  // offload_gradients frees a tied output matrix's gradient only after the embedding's share is added into it
  if (m.tie_word_embeddings && !o.lora_enabled() && o.gradient_offloaded(m.embedding_params()))
    r.backward_end += static_cast<double>(m.embedding_params()) * wb;
  r.optimizer_peak = persistent + r.gradients + r.optimizer_temporary;
  return r;
}

}  // namespace tiersim::model
