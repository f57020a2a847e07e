#pragma once
// The order in which a training loop allocates and frees GPU tensors (model load, then steps: forward, loss,
// backward, optimizer step, zero_grad(set_to_none=True)), for PyTorch's caching allocator model
// (memory/caching_allocator.hpp) to turn into reserved memory and to name the allocation that would not fit.
// The tensors are training_memory.hpp's (one declaration of what is saved and what is a parameter); their order is
// the code's: each layer's saved tensors as its forward makes them, its residual output replacing the last, the
// logits and the loss's fp32 copies, backward layer by layer in reverse (the incoming gradient and the outgoing one
// alive together, the layer's parameter gradients allocated, its saved tensors and autocast copies freed), the
// embedding's dense gradient last; the optimizer's state at its first step, AdamW's foreach temporaries (one per
// parameter, all at once) for each step.
#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.hpp"
#include "model/training/training_memory.hpp"

namespace tiersim::model {

struct AllocationEvent {
  bool allocate = true;      // else free
  std::uint64_t tensor = 0;  // the tensor's number: a free names an earlier allocation
  std::uint64_t bytes = 0;   // allocations only
  std::uint32_t step = 0;    // 0: loading the model; then 1..
  const char* phase = "";    // load, forward, loss, backward, optimizer step, zero_grad
  std::string what;          // the tensor ("layer 3 sdpa q", "gradient of layer 7's parameter 2")
};

std::vector<AllocationEvent> training_allocations(const ModelConfig& m, const TrainingOptions& o, std::uint32_t steps);

}  // namespace tiersim::model
