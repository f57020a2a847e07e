#include "model/training/training_memory.hpp"

#include <algorithm>
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
  throw std::invalid_argument("unknown optimizer '" + name + "' (adamw, sgd, sgd-momentum)");
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

TrainingMemory training_memory(const ModelConfig& m, const TrainingOptions& o) {
  TrainingMemory r;
  const bool autocast = o.precision == TrainPrecision::Fp32AutocastBf16;
  const bool fp32 = o.precision == TrainPrecision::Fp32;
  const double wb = autocast || fp32 ? 4 : 2;  // bytes per parameter, and per gradient element
  const double act = fp32 ? 4 : 2;             // matmul outputs: bf16 under autocast
  const double f = 4;
  const double P = static_cast<double>(m.total_params());
  const double h = static_cast<double>(m.hidden_size), V = static_cast<double>(m.vocab_size);
  const double qd = static_cast<double>(m.num_attention_heads * m.head_dim);
  const double kvd = static_cast<double>(m.num_key_value_heads * m.head_dim);
  const double inter = static_cast<double>(m.intermediate_size), heads = static_cast<double>(m.num_attention_heads);
  const double L = static_cast<double>(m.num_hidden_layers);
  const double T = static_cast<double>(o.batch) * static_cast<double>(o.seq);

  r.weights = P * wb;
  r.optimizer_state = o.optimizer == TrainOptimizer::AdamW ? 2 * P * wb : o.optimizer == TrainOptimizer::SgdMomentum ? P * wb : 0;
  r.optimizer_temporary = o.optimizer == TrainOptimizer::AdamW ? P * wb : 0;
  r.gradients = P * wb;
  if (autocast) {
    // Every Linear's weight cast once (lm_head reads the embedding table when tied); norms and the embedding
    // lookup run in fp32.
    const double norms = L * (2 * h + (m.qk_norm ? 2 * static_cast<double>(m.head_dim) : 0)) + h;
    const double not_cast = norms + (m.tie_word_embeddings ? 0 : static_cast<double>(m.embedding_params()));
    r.autocast_cache = 2 * (P - not_cast);
  }

  // Saved per token by one RMSNorm over `width`: its fp32 input (a copy unless already fp32), y in the
  // activation dtype (y itself when that is fp32), and its output as the next projection's input (a bf16 cast
  // of it under autocast).
  auto norm = [&](double width) {
    if (fp32) return 3 * f * width;
    if (autocast) return (f + f + 2) * width;
    return (f + act + act) * width;
  };
  // Qwen3's per-head q/k norms: the fp32 input (a copy of the bf16 projection) and y in its dtype.
  auto head_norm = [&](double width) { return fp32 ? 2 * f * width : (f + 2) * width; };
  const double sdpa = act * (qd + kvd + kvd + qd) + f * heads;  // q, k, v, output; log-sum-exp
  const double contiguous = act * qd;                          // o_proj's input
  const double mlp = 4 * act * inter;                          // gate, silu(gate), up, product
  const double per_layer = 2 * norm(h) + (m.qk_norm ? head_norm(qd) + head_norm(kvd) : 0) + sdpa + contiguous + mlp;
  const double residual = fp32 || autocast ? f * h : act * h;  // a decoder layer's input
  if (o.checkpointing) {
    r.saved_activations = T * (L * residual + norm(h));
    r.recompute = T * per_layer;
  } else {
    r.saved_activations = T * (L * per_layer + norm(h));
  }
  const double logits_dtype = fp32 ? f : 2;
  r.logits = T * V * f;                                           // log_softmax's saved fp32 result
  r.loss_transient = T * V * (logits_dtype + (fp32 ? 0 : f));     // the logits, and logits.float(), until the loss
  r.logits_grad = T * V * (f + f);                                // nll_loss's dense gradient and log_softmax's

  const double persistent = r.weights + r.optimizer_state;
  r.forward_peak = persistent + r.autocast_cache + r.saved_activations + r.logits + r.loss_transient;
  r.backward_start = persistent + r.autocast_cache + r.saved_activations + r.logits + r.logits_grad;
  r.backward_end = persistent + r.gradients + r.recompute;
  r.optimizer_peak = persistent + r.gradients + r.optimizer_temporary;
  return r;
}

}  // namespace tiersim::model
