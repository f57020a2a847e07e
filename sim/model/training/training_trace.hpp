#pragma once
// The ops of a training step of a dense decoder, for the engines to time (its memory is training_memory.hpp's):
// the forward pass over batch x seq tokens (the decoder generator's prompt step, with logits for every token and
// transformers' loss: logits.float(), log_softmax, nll), the backward pass in reverse (every matmul twice, for the
// input's and the weight's gradient; attention's backward at 2.5x its forward FLOPs, as FlashAttention-2's five
// matmuls against two; the other ops reading their saved inputs and the incoming gradient), each checkpointed layer
// recomputed before its backward, and the optimizer's foreach passes over every parameter (AdamW: 20 element
// reads and writes per parameter in torch/optim/adamw.py's _multi_tensor_adamw; SGD 3, with momentum 8; bitsandbytes'
// AdamW8bit one kernel per parameter over the parameter, its gradient and two one-byte states). Under
// fp32 weights with bf16 autocast each layer's matrices are cast once a step, and their bf16 gradients added into
// the fp32 ones. With LoRA (peft) each targeted projection's adapter branch follows its matmul (a cast to fp32, A and
// B as fp32 matmuls, the scaling, the sum, the cast back) and has its own backward; frozen weights get no gradient
// matmuls, and the optimizer passes over the adapters alone. Replayed as `iteration` steps: one repeated unit of work. With the runtime's training host costs
// each op carries its host time: forward (and recomputed) ops their inference price scaled for autograd, backward
// ops the autograd engine's per-op cost, checkpointed layers their wrapper's, the optimizer its foreach dispatch.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "model/model_config.hpp"
#include "model/trace_generator.hpp"
#include "model/training/training_memory.hpp"
#include "runtime/runtime_profile.hpp"
#include "trace/trace.hpp"

namespace tiersim::model {

// What a training step's host time is made of, for reports and for calibrating runtime::TrainingHostCosts: the
// forward ops priced at their inference host cost, the recomputed ops likewise, the counts the other costs
// multiply, and the host seconds each phase gets (all zero where no training costs were given).
struct TrainingHostModel {
  double forward_inference_seconds = 0, recompute_inference_seconds = 0;
  std::uint64_t forward_ops = 0, backward_ops = 0, recompute_ops = 0, parameter_tensors = 0, checkpointed_layers = 0;
  std::uint32_t optimizer_calls = 0;
  std::uint64_t lora_modules = 0;  // adapter branches run forward, recomputed ones included (layers x projections)
  std::uint64_t lora_ops = 0;      // their ops, forward, recomputed and backward (not in the counts above)
  double forward_seconds = 0, backward_seconds = 0, optimizer_seconds = 0;  // priced, with the training costs
};

class TrainingTraceGenerator final : public trace::StepSource {
 public:
  // `inference_host` prices an op's host issue at inference (the runtime's per-op costs); with `host` (the
  // runtime's training costs) every op of the step carries its training host time, else ops keep the engine's
  // inference pricing.
  TrainingTraceGenerator(const ModelConfig& model, const TrainingOptions& options, std::uint32_t steps,
                         const runtime::TrainingHostCosts* host = nullptr,
                         const std::function<double(const trace::Op&)>& inference_host = {});
  const trace::Header& header() const override { return header_; }
  bool next(trace::Step& out) override;
  const TrainingHostModel& host_model() const { return host_model_; }
  // The step's ops (every step is the same) and where its backward pass and its optimizer begin among them.
  const trace::Step& step() const { return step_; }
  std::size_t backward_begin() const { return backward_begin_; }
  std::size_t optimizer_begin() const { return optimizer_begin_; }

 private:
  // Ops of a LoRA adapter branch: 1 at the branch's first op, 2 at the others (by index in the step).
  std::vector<std::uint8_t> lora_op_;
  void price_host(std::size_t forward_end, const std::vector<std::size_t>& recomputed_ops,
                  const std::vector<std::size_t>& recompute_starts, std::size_t optimizer_begin,
                  const std::map<std::int32_t, std::uint64_t>& parameter_tensors, std::uint32_t calls,
                  const runtime::TrainingHostCosts* host, const std::function<double(const trace::Op&)>& inference_host);

  ModelConfig model_;
  TrainingOptions options_;
  std::uint32_t steps_ = 0, done_ = 0;
  std::unique_ptr<LlmTraceGenerator> inference_;
  trace::Header header_;  // the forward pass's tensors and a workspace for the loss's and backward's tensors
  trace::Step step_;      // built once: every step is the same
  TrainingHostModel host_model_;
  std::size_t backward_begin_ = 0, optimizer_begin_ = 0;
};

}  // namespace tiersim::model
