#pragma once
// The ops of a training step of a dense decoder, for the engines to time (its memory is training_memory.hpp's):
// the forward pass over batch x seq tokens (the decoder generator's prompt step, with logits for every token and
// transformers' loss: logits.float(), log_softmax, nll), the backward pass in reverse (every matmul twice, for the
// input's and the weight's gradient; attention's backward at 2.5x its forward FLOPs, as FlashAttention-2's five
// matmuls against two; the other ops reading their saved inputs and the incoming gradient), each checkpointed layer
// recomputed before its backward, and the optimizer's foreach passes over every parameter (AdamW: 20 element
// reads and writes per parameter in torch/optim/adamw.py's _multi_tensor_adamw; SGD 3, with momentum 8). Under
// fp32 weights with bf16 autocast each layer's matrices are cast once a step, and their bf16 gradients added into
// the fp32 ones. Replayed as `iteration` steps: one repeated unit of work.
#include <cstdint>
#include <memory>

#include "model/model_config.hpp"
#include "model/trace_generator.hpp"
#include "model/training/training_memory.hpp"
#include "trace/trace.hpp"

namespace tiersim::model {

class TrainingTraceGenerator final : public trace::StepSource {
 public:
  TrainingTraceGenerator(const ModelConfig& model, const TrainingOptions& options, std::uint32_t steps);
  const trace::Header& header() const override { return header_; }
  bool next(trace::Step& out) override;

 private:
  ModelConfig model_;
  TrainingOptions options_;
  std::uint32_t steps_ = 0, done_ = 0;
  std::unique_ptr<LlmTraceGenerator> inference_;
  trace::Header header_;  // the forward pass's tensors and a workspace for the loss's and backward's tensors
  trace::Step step_;      // built once: every step is the same
};

}  // namespace tiersim::model
