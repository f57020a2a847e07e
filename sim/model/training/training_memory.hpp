#pragma once
// GPU memory of one training step of a dense decoder (Qwen3, Llama) in PyTorch + Hugging Face transformers, as
// the tensors its code keeps alive: weights, optimizer state, gradients, the autocast weight cache, the
// activations autograd saves for backward, the logits and the loss's fp32 copies, and the optimizer's own
// temporaries. Peak allocated bytes (torch.cuda.max_memory_allocated) are taken at the three moments that can
// set them: the end of the forward pass (the loss computed, every saved activation alive), the start of the
// backward pass (the logits' gradients on top) and its end (every gradient), and the optimizer step.
//
// Where each term comes from (read in transformers 5's modeling_qwen3.py / modeling_llama.py and PyTorch 2.x's
// autograd formulas and torch/optim):
//  - RMSNorm upcasts to fp32: pow saves the fp32 input, rsqrt its output, weight * y.to(dtype) saves y in the
//    activation dtype; the normalised output is saved by the projections that read it.
//  - q_norm / k_norm (Qwen3) the same per head; RoPE's multiplies by cos and sin save only cos and sin.
//  - SDPA (flash / memory-efficient) saves q, k, v (no repeat of k, v: enable_gqa), its output and one fp32
//    log-sum-exp per head and token; the output is made contiguous for o_proj, which saves that copy.
//  - The MLP saves gate, silu(gate), up and their product (down_proj's input).
//  - The loss (transformers' ForCausalLMLoss): logits.float() then cross_entropy, whose log_softmax saves its
//    fp32 output; the model's output (its logits) is dropped once the loss is taken from it, as the Trainer's
//    compute_loss does; backward makes nll_loss's dense fp32 gradient and log_softmax's.
//  - AdamW (foreach, the default): two states like the parameter, and torch._foreach_sqrt of the second-moment
//    state as one state-sized temporary during the step; SGD with momentum one buffer, without none.
//  - fp32 weights under bf16 autocast: bf16 copies of every matrix are cached for the forward and kept by
//    autograd for backward; the residual stream and the norms stay fp32.
//  - Gradient checkpointing (per decoder layer, use_reentrant=False): each layer keeps only its input; backward
//    recomputes one layer's activations at a time.
// Not modelled yet: the caching allocator's reserved memory (sim/memory models it, not yet fed this sequence),
// fragmentation, CUDA/cuBLAS workspaces, attention without flash/memory-efficient kernels.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/model_config.hpp"

namespace tiersim::model {

enum class TrainPrecision { Bf16, Fp16, Fp32, Fp32AutocastBf16 };
// AdamW8bit: bitsandbytes' bnb.optim.AdamW8bit with its defaults (bitsandbytes/optim/optimizer.py,
// Optimizer2State.init_state and update_step): a parameter of fewer than min_8bit_size = 4096 elements keeps two fp32
// states; a larger one two uint8 states and, block-wise, two fp32 absmax vectors of one value per 2048 elements;
// one fused kernel per parameter (optimizer_update_8bit_blockwise), no foreach temporaries.
enum class TrainOptimizer { AdamW, Sgd, SgdMomentum, AdamW8bit };

// LoRA as peft applies it (peft/tuners/lora/layer.py, Linear.forward; LoraConfig defaults: lora_dropout 0, so
// dropout is nn.Identity): every targeted Linear keeps its frozen weight and gains A (r x in) and B (out x r), in
// fp32 (get_peft_model's autocast_adapter_dtype=True upcasts bf16 adapters); its forward casts the input to fp32
// (_cast_input_dtype), result + B(A(x)) * scaling, back to the input's dtype. Only the adapters train.
enum class LoraModule { Q, K, V, O, Gate, Up, Down };
struct LoraOptions {
  std::uint32_t rank = 0;  // 0: no LoRA, every parameter trains
  std::vector<LoraModule> targets;
  bool targets_module(LoraModule m) const;
};
// "q_proj,v_proj", "all-linear" (every projection, not the head); std::invalid_argument naming the bad name.
std::vector<LoraModule> parse_lora_targets(const std::string& list);

// The optimizer offloaded to the CPU as torchao's CPUOffloadOptimizer does it (torchao/optim/cpu_offload.py,
// pytorch/ao 36027d82d; the whole model in optimizer_offload.hpp): every trainable tensor of at least 4,096
// elements (minimal_size) keeps a pinned host copy and a pinned host gradient, its optimizer state on the host, and
// its update there; smaller ones (norm weights) stay with a fused AdamW on the GPU. CpuGradients is
// offload_gradients=True: each offloaded gradient is freed on the GPU once its copy to the host is queued.
enum class OptimizerOffload { None, Cpu, CpuGradients };
inline constexpr std::uint64_t kOffloadMinimalSize = 4096;

struct TrainingOptions {
  TrainPrecision precision = TrainPrecision::Bf16;
  TrainOptimizer optimizer = TrainOptimizer::AdamW;
  bool checkpointing = false;
  std::uint32_t batch = 1;
  std::uint32_t seq = 1024;
  LoraOptions lora;
  OptimizerOffload offload = OptimizerOffload::None;
  bool lora_enabled() const { return lora.rank > 0; }
  // Whether a trainable tensor of `n` elements has its optimizer on the host, and its gradient freed on the GPU
  // once copied there.
  bool offloaded(std::uint64_t n) const { return offload != OptimizerOffload::None && n >= kOffloadMinimalSize; }
  bool gradient_offloaded(std::uint64_t n) const { return offload == OptimizerOffload::CpuGradients && offloaded(n); }
};
TrainPrecision parse_train_precision(const std::string& name);  // bf16, fp16, fp32, fp32-autocast; std::invalid_argument
TrainOptimizer parse_train_optimizer(const std::string& name);  // adamw, sgd, sgd-momentum, adamw8bit
OptimizerOffload parse_optimizer_offload(const std::string& name);  // none, cpu, cpu-gradients; std::invalid_argument
const char* to_string(TrainPrecision p);
const char* to_string(TrainOptimizer o);
const char* to_string(OptimizerOffload o);

struct TrainingMemory {
  // Persistent between steps (weights include the LoRA adapters, `adapters` of them).
  double weights = 0, optimizer_state = 0, adapters = 0;
  // Live during a step.
  double autocast_cache = 0;       // bf16 copies of fp32 matrices (forward through backward)
  double saved_activations = 0;    // every layer's, at the end of the forward pass
  double recompute = 0;            // checkpointing: one layer's activations rebuilt in backward
  double logits = 0;               // the loss's saved fp32 log-softmax (forward into backward)
  double loss_transient = 0;       // the logits and their fp32 copy while the loss is computed
  double logits_grad = 0;          // backward's dense fp32 gradients: nll_loss's and log_softmax's
  double gradients = 0;
  double optimizer_temporary = 0;  // AdamW's foreach sqrt of the second moments
  // With the optimizer offloaded: the host's share (pinned copies of the parameters and their gradients, by the
  // pinned allocator's power-of-two blocks; the optimizer state in ordinary memory). GPU terms above exclude them.
  double host_pinned = 0, host_optimizer_state = 0;
  // Peak allocated at each moment, and the step's.
  double forward_peak = 0, backward_start = 0, backward_end = 0, optimizer_peak = 0;
  double peak() const;
  const char* peak_phase() const;  // "forward", "backward", "optimizer step"
};

TrainingMemory training_memory(const ModelConfig& m, const TrainingOptions& o);

// The tensors behind the totals, for the caching allocator's replay (training_allocations.hpp) and the sums above:
// what autograd saves in one decoder layer, and in the final norm, in bytes per token (in the order the forward
// pass makes them); and every parameter tensor as (layer group, parameters), in the model's order (-1 the
// embedding, 0..L-1 the layers, L the final norm and an untied lm_head).
struct SavedTensor {
  const char* what;
  double bytes_per_token;
};
std::vector<SavedTensor> saved_per_layer(const ModelConfig& m, const TrainingOptions& o);
std::vector<SavedTensor> saved_final_norm(const ModelConfig& m, const TrainingOptions& o);
std::vector<std::pair<std::int32_t, std::uint64_t>> parameter_tensors(const ModelConfig& m);
double parameter_bytes(const TrainingOptions& o);  // per parameter (and gradient, optimizer state element)
// The optimizer's state for one parameter tensor of `n` elements (bytes), and how it is allocated: tensors of
// `sizes` bytes (torch's states are one tensor each; bitsandbytes' 8-bit ones come with their absmax vectors).
// `element_bytes`: the parameter's own (its state follows it; 0: the set-up's parameter bytes).
std::vector<double> optimizer_state_tensors(std::uint64_t n, const TrainingOptions& o, double element_bytes = 0);
double optimizer_state_bytes(std::uint64_t n, const TrainingOptions& o, double element_bytes = 0);
// The parameters that train, by layer group: every parameter, or with LoRA each targeted Linear's A and B (fp32),
// in the order peft creates them.
struct TrainableTensor {
  std::int32_t layer = 0;
  std::uint64_t n = 0;
  double element_bytes = 0;
};
std::vector<TrainableTensor> trainable_tensors(const ModelConfig& m, const TrainingOptions& o);
// A projection's (in, out) features.
std::pair<std::uint64_t, std::uint64_t> lora_module_shape(const ModelConfig& m, LoraModule module);

}  // namespace tiersim::model
