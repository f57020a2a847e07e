#include "cli/diffusion_memory.hpp"

#include <algorithm>

#include "cli/allocator_replay.hpp"
#include "model/allocation_event.hpp"
#include "trace/transient_lifetimes.hpp"

namespace tiersim::app {

namespace {
// Iterations replayed: the caching allocator's pool settles in the first (every iteration is the same forward), and
// the peaks are taken over all of them, as torch.cuda.max_memory_allocated/reserved after a warm-up and two more.
constexpr std::uint32_t kIterations = 3;
}  // namespace

std::optional<report::AllocatorMemory> diffusion_memory(const RunInputs& in, const TraceSpec& trace, const Simulation& sim) {
  report::AllocatorMemory a;
  a.iterations = true;
  const trace::Header& h = sim.header;
  // A VAE's decode: every decoder call, each another size of the growing video (WanVAE.decode).
  const bool vae = h.meta.count("family") && h.meta.at("family") == "wan-vae";
  a.framework = (vae ? "ComfyUI's VAE decode (WanVAE.decode, every decoder call), one GPU"
                     : "ComfyUI's sampler iterations, one GPU") +
                (in.alloc_conf.empty() ? std::string() : ", PYTORCH_CUDA_ALLOC_CONF=" + in.alloc_conf);
  if (vae) a.iteration_label = "decode";
  const std::uint32_t steps = vae ? 0xffffffffu : kIterations;
  const placement::Placement& p = sim.placement;
  bool transients = false;
  for (const auto& t : h.tensors) {
    transients |= t.kind == trace::TensorKind::Transient;
    const bool local = p.device[t.id] == placement::kComputeGpu && p.path[t.id] == placement::Path::Local;
    const bool copied = p.device[t.id] == placement::kCpu && p.path[t.id] == placement::Path::Copy;
    if (!local && !copied) {
      a.not_modelled = "tensors on another GPU, on disk or in managed memory";
      return a;
    }
  }
  if (!transients) {
    a.not_modelled = "a trace without transient activations (kind tmp)";
    return a;
  }
  // The iterations as the run placed them: with the two prompts apart where ComfyUI's rule said so (simulate()); from
  // the generator, not a trace kept in memory (a sweep's), which does not know the modules' parameters.
  TraceSpec spec = trace;
  spec.loaded = nullptr;
  if (h.meta.count("cfg_batch_free")) spec.generation.image.cfg_separate = true;
  const auto source = open_trace(spec);
  model::AllocationSequence seq;
  // The model's parameters on the GPU, each its own allocation (a Linear's matrix and bias apart, where the trace's
  // generator knows them), and the sampler's state.
  for (const auto& t : h.tensors)
    if (t.kind != trace::TensorKind::Transient && p.device[t.id] == placement::kComputeGpu)
      for (const std::uint64_t bytes : source->parameter_bytes(t.id)) seq.alloc(static_cast<double>(bytes), t.name);
  std::vector<std::uint64_t> value(h.tensors.size(), 0), staged;
  trace::Step step;
  trace::TransientLifetimes lifetimes;
  for (std::uint32_t n = 1; n <= steps && source->next(step); ++n) {
    seq.step = n;
    seq.phase = "iteration";
    if (trace::derive_transient_lifetimes(source->header(), step, lifetimes))
      throw std::logic_error("a trace read back uses a transient value before making it");
    std::size_t s = 0, e = 0;
    for (std::size_t i = 0; i < step.ops.size(); ++i) {
      const trace::Op& op = step.ops[i];
      // An offloaded weight is copied in for the op that reads it and freed after (comfy/ops.py cast_bias_weight:
      // a local of the module's forward).
      for (const auto& r : op.reads)
        if (p.path[r.tensor] == placement::Path::Copy &&
            std::none_of(op.reads.begin(), op.reads.begin() + (&r - op.reads.data()),
                         [&](const trace::TensorAccess& x) { return x.tensor == r.tensor; }))
          for (const std::uint64_t bytes : source->parameter_bytes(r.tensor))
            staged.push_back(seq.alloc(static_cast<double>(bytes), "copy of " + h.tensors[r.tensor].name));
      for (; s < lifetimes.starts.size() && lifetimes.starts[s].op == i; ++s) {
        const std::uint32_t t = lifetimes.starts[s].tensor;
        value[t] = seq.alloc(static_cast<double>(h.tensors[t].bytes), h.tensors[t].name);
      }
      for (; e < lifetimes.ends.size() && lifetimes.ends[e].op == i; ++e) seq.free(value[lifetimes.ends[e].tensor]);
      seq.free_all(staged);
    }
  }
  const hw::HardwareProfile& hw = in.hw;
  a.capacity = std::max(0.0, hw.gpu.memory - hw.gpu.reserved);
  const AllocatorReplay r = replay_allocations(seq.events, a.capacity, hw.gpu.memory, in.alloc_conf, "--alloc-conf");
  if (r.oom) {
    a.oom = r.oom;
    return a;
  }
  const PhasePeak it = r.peak("iteration");
  a.iteration_allocated = it.allocated;
  a.iteration_reserved = it.reserved;
  return a;
}

}  // namespace tiersim::app
