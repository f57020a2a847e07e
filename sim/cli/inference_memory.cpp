#include "cli/inference_memory.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>

#include "cli/allocator_replay.hpp"
#include "cli/diffusion_memory.hpp"
#include "memory/caching_allocator.hpp"
#include "model/inference/inference_allocations.hpp"
#include "model/model_config.hpp"
#include "model/model_family.hpp"

namespace tiersim::app {

namespace {

// generate()'s allocations replayed without a memory limit, shared by the runs that make the same ones (sim plan's
// points: one model and shape on many machines and knob values). The caching allocator's capacity only decides
// whether a new segment's cudaMalloc succeeds (memory/caching_allocator.cpp alloc_block, the expandable segments'
// map), so where the unlimited run never reserves more than a machine's capacity, the limited run takes every step it
// took: the same phases, byte for byte. A machine with less memory replays under its own limit. Keyed by the model, the
// shape, what accelerate offloads and PYTORCH_CUDA_ALLOC_CONF (and the device's memory under expandable segments).
struct UnlimitedReplay {
  AllocatorReplay replay;
  double max_reserved = 0;  // over the whole run
};

// `events` is filled with the run's allocations when they were generated here (a new key), else left empty.
std::shared_ptr<const UnlimitedReplay> unlimited_replay(const model::ModelConfig& m, const std::string& model_path,
                                                        const model::InferenceShape& shape, double total_memory,
                                                        const std::string& alloc_conf,
                                                        std::vector<model::AllocationEvent>& events) {
  std::string key = model_path + '\n' + std::to_string(shape.batch) + ',' + std::to_string(shape.prompt) + ',' +
                    std::to_string(shape.decode) + ',' + std::to_string(shape.activation_bytes) + ',' +
                    std::to_string(shape.weight_bytes) + ',' + (shape.offloaded.embedding ? 'e' : '-') +
                    (shape.offloaded.norm ? 'n' : '-') + (shape.offloaded.head ? 'h' : '-') + ',';
  for (const bool l : shape.offloaded.layers) key += l ? '1' : '0';
  // The device's memory matters to the allocator only for expandable segments (their reserved address range); without
  // them one replay serves every machine.
  bool expandable = false;
  try {
    expandable = memory::parse_alloc_conf(alloc_conf).expandable_segments;
  } catch (const std::invalid_argument&) {
    expandable = true;  // replay_allocations reports the setting; keyed apart meanwhile
  }
  char memory[40];
  std::snprintf(memory, sizeof memory, ",%.17g\n", expandable ? total_memory : 0.0);
  key += memory + alloc_conf;
  static std::mutex lock;
  static std::map<std::string, std::shared_ptr<const UnlimitedReplay>> cache;
  {
    const std::lock_guard<std::mutex> held(lock);
    const auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  auto r = std::make_shared<UnlimitedReplay>();
  events = model::inference_allocations(m, shape);
  r->replay = replay_allocations(events, HUGE_VAL, total_memory, alloc_conf, "--alloc-conf");
  for (const PhasePeak& p : r->replay.phases) r->max_reserved = std::max(r->max_reserved, p.reserved);
  const std::lock_guard<std::mutex> held(lock);
  if (cache.size() >= 256) cache.clear();  // bounded: a plan's shapes are few
  return cache.emplace(key, std::move(r)).first->second;
}

}  // namespace

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
  else if (model::model_family(trace.model_path) != model::ModelFamily::Decoder) return diffusion_memory(in, trace, sim);
  else if (g.gguf_file || g.dtype == model::WeightDtype::Gguf) a.not_modelled = "a GGUF model";
  else if (g.dtype != model::WeightDtype::Bf16 && g.dtype != model::WeightDtype::Fp16 && g.dtype != model::WeightDtype::Fp32)
    a.not_modelled = "weights that are neither bf16, fp16 nor fp32";
  if (!a.not_modelled.empty()) return a;
  const model::ModelConfig m = model::load_model_config(trace.model_path);
  if (!model::inference_allocations_modelled(m)) {
    a.not_modelled = "a mixture of experts other than qwen3_moe and mixtral (" + m.model_type + ")";
    return a;
  }
  if (m.is_moe() && g.experts != model::GenerationOptions::Experts::GroupedMm) {
    a.not_modelled = "transformers' eager experts loop (modelled: grouped_mm)";
    return a;
  }
  // Weights off the GPU: modelled for accelerate's own offload (its hooks copy each offloaded module's weights in for
  // its forward), whole modules to the CPU, not for the other frameworks' copies, other GPUs or managed memory.
  const bool accelerate = in.strategy.placement.name.rfind("accelerate", 0) == 0;
  model::InferenceShape shape;
  const auto L = static_cast<std::int32_t>(m.num_hidden_layers);
  shape.offloaded.layers.assign(m.num_hidden_layers, false);
  std::vector<int> on_gpu(m.num_hidden_layers + 3, 0), on_cpu(m.num_hidden_layers + 3, 0);  // embedding, layers, norm, head
  for (const auto& t : sim.header.tensors) {
    if (t.kind != trace::TensorKind::Weight) continue;
    const bool local = sim.placement.device[t.id] == placement::kComputeGpu && sim.placement.path[t.id] == placement::Path::Local;
    if (!local && !(accelerate && sim.placement.device[t.id] == placement::kCpu && sim.placement.path[t.id] == placement::Path::Copy)) {
      a.not_modelled = accelerate ? "weights on another GPU, on disk or in managed memory"
                                  : "weights off the compute GPU or in managed memory (modelled for accelerate's offload)";
      return a;
    }
    const std::size_t part = t.layer < 0 ? 0 : t.layer < L ? static_cast<std::size_t>(t.layer) + 1
                                                           : t.name.find("lm_head") != std::string::npos ? L + 2 : L + 1;
    ++(local ? on_gpu : on_cpu)[part];
  }
  for (std::size_t part = 0; part < on_gpu.size(); ++part) {
    if (on_cpu[part] == 0) continue;
    if (on_gpu[part] > 0) {
      a.not_modelled = "a module split between the GPU and the CPU";
      return a;
    }
    if (part == 0) shape.offloaded.embedding = true;
    else if (part <= static_cast<std::size_t>(L)) shape.offloaded.layers[part - 1] = true;
    else if (part == static_cast<std::size_t>(L) + 1) shape.offloaded.norm = true;
    else shape.offloaded.head = true;
  }
  if (m.tie_word_embeddings && shape.offloaded.embedding != shape.offloaded.head) {
    a.not_modelled = "a tied embedding offloaded on one side only";
    return a;
  }
  shape.batch = g.batch;
  shape.prompt = g.prompt_tokens;
  shape.decode = g.decode_tokens;
  shape.activation_bytes = shape.weight_bytes = g.dtype == model::WeightDtype::Fp32 ? 4 : 2;
  const hw::HardwareProfile& hw = in.hw;
  a.capacity = std::max(0.0, hw.gpu.memory - hw.gpu.reserved);
  std::vector<model::AllocationEvent> events;
  const auto unlimited = unlimited_replay(m, trace.model_path, shape, hw.gpu.memory, in.alloc_conf, events);
  if (unlimited->max_reserved > a.capacity && events.empty()) events = model::inference_allocations(m, shape);
  const AllocatorReplay r = unlimited->max_reserved <= a.capacity
                                ? unlimited->replay
                                : replay_allocations(events, a.capacity, hw.gpu.memory, in.alloc_conf, "--alloc-conf");
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
