#include "cli/generate_allocator_calls.hpp"

#include <algorithm>

#include "model/inference/inference_allocations.hpp"
#include "model/model_config.hpp"
#include "model/model_family.hpp"

namespace tiersim::app {

std::optional<GenerateAllocatorCalls> generate_allocator_calls(const TraceSpec& trace, const runtime::RuntimeProfile& runtime) {
  if (runtime.name.rfind("pytorch", 0) != 0 || trace.model_path.empty()) return std::nullopt;
  if (model::model_family(trace.model_path) != model::ModelFamily::Decoder) return std::nullopt;
  const auto& g = trace.generation;
  if (g.gguf_file || (g.dtype != model::WeightDtype::Bf16 && g.dtype != model::WeightDtype::Fp16 &&
                      g.dtype != model::WeightDtype::Fp32))
    return std::nullopt;
  const model::ModelConfig m = model::load_model_config(trace.model_path);
  if (!model::inference_allocations_modelled(m)) return std::nullopt;
  if (m.is_moe() && g.experts != model::GenerationOptions::Experts::GroupedMm) return std::nullopt;
  model::InferenceShape shape;
  shape.batch = g.batch;
  shape.prompt = g.prompt_tokens;
  // Every decode step makes the same calls (each layer's cache concatenated one token longer): two tokens give one.
  shape.decode = std::min<std::uint32_t>(g.decode_tokens, 2);
  shape.activation_bytes = shape.weight_bytes = g.dtype == model::WeightDtype::Fp32 ? 4 : 2;
  shape.offloaded.layers.assign(m.num_hidden_layers, false);
  GenerateAllocatorCalls calls;
  for (const model::AllocationEvent& e : model::inference_allocations(m, shape)) {
    if (!e.allocates()) continue;
    if (e.step == 1) {
      calls.prefill += 1;
      calls.prefill_bytes.push_back(static_cast<double>(e.bytes));
    } else if (e.step == shape.decode + 1 && e.step > 1) {
      calls.decode += 1;
      calls.decode_bytes.push_back(static_cast<double>(e.bytes));
    }
  }
  return calls;
}

}  // namespace tiersim::app
