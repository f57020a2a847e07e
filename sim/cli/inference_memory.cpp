#include "cli/inference_memory.hpp"

#include <algorithm>
#include <cstdio>

#include "cli/allocator_replay.hpp"
#include "model/inference/inference_allocations.hpp"
#include "model/model_config.hpp"
#include "model/model_family.hpp"

namespace tiersim::app {

std::optional<report::AllocatorMemory> inference_memory(const RunInputs& in, const Simulation& sim) {
  return inference_memory(in, in.trace, sim);
}

std::optional<report::AllocatorMemory> inference_memory(const RunInputs& in, const TraceSpec& trace, const Simulation& sim) {
  if (in.runtime.name.rfind("pytorch", 0) != 0) return std::nullopt;
  report::AllocatorMemory a;
  a.framework = "transformers generate, DynamicCache, one GPU" +
                (in.alloc_conf.empty() ? std::string() : ", PYTORCH_CUDA_ALLOC_CONF=" + in.alloc_conf);
  const auto& g = trace.generation;
  if (trace.model_path.empty()) a.not_modelled = "a recorded trace (the allocations come from a model's config)";
  else if (g.gguf_file || g.dtype == model::WeightDtype::Gguf) a.not_modelled = "a GGUF model";
  else if (model::model_family(trace.model_path) != model::ModelFamily::Decoder) a.not_modelled = "a diffusion model";
  else if (g.dtype != model::WeightDtype::Bf16 && g.dtype != model::WeightDtype::Fp16 && g.dtype != model::WeightDtype::Fp32)
    a.not_modelled = "weights that are neither bf16, fp16 nor fp32";
  if (!a.not_modelled.empty()) return a;
  const model::ModelConfig m = model::load_model_config(trace.model_path);
  if (m.is_moe()) {
    a.not_modelled = "a mixture of experts";
    return a;
  }
  for (const auto& t : sim.header.tensors)
    if (t.kind == trace::TensorKind::Weight &&
        (sim.placement.device[t.id] != placement::kComputeGpu || sim.placement.path[t.id] != placement::Path::Local)) {
      a.not_modelled = "weights off the compute GPU or in managed memory";
      return a;
    }
  model::InferenceShape shape;
  shape.batch = g.batch;
  shape.prompt = g.prompt_tokens;
  shape.decode = g.decode_tokens;
  shape.activation_bytes = shape.weight_bytes = g.dtype == model::WeightDtype::Fp32 ? 4 : 2;
  const hw::HardwareProfile& hw = in.hw;
  a.capacity = std::max(0.0, hw.gpu.memory - hw.gpu.reserved);
  const AllocatorReplay r =
      replay_allocations(model::inference_allocations(m, shape), a.capacity, hw.gpu.memory, in.alloc_conf, "--alloc-conf");
  if (r.oom) {
    a.oom = r.oom;
    return a;
  }
  const PhasePeak prefill = r.peak("prefill"), decode = r.peak("decode");
  a.prefill_allocated = prefill.allocated;
  a.prefill_reserved = prefill.reserved;
  a.decode_allocated = decode.allocated;
  a.decode_reserved = decode.reserved;
  return a;
}

std::optional<std::string> allocator_out_of_memory(const RunInputs& machine, const TraceSpec& spec, const Simulation& sim) {
  const std::optional<report::AllocatorMemory> a = inference_memory(machine, spec, sim);
  if (!a || !a->oom) return std::nullopt;
  const report::AllocationFailure& f = *a->oom;
  char text[320];
  std::snprintf(text, sizeof text,
                "PyTorch's caching allocator runs out of memory in step %u's %s, allocating %s (%.2f GiB) with %.2f GiB "
                "reserved of %.2f GiB",
                f.step, f.phase.c_str(), f.tensor.c_str(), f.requested / 1073741824.0, f.reserved / 1073741824.0,
                a->capacity / 1073741824.0);
  return std::string(text);
}

}  // namespace tiersim::app
