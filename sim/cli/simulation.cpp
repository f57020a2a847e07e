#include "cli/simulation.hpp"

#include <cctype>
#include <filesystem>
#include <optional>

#include "analytic/analytic_model.hpp"
#include "cli/generate_allocator_calls.hpp"
#include "core/error.hpp"
#include "managed/managed_memory.hpp"
#include "model/hf_snapshot.hpp"
#include "model/gguf_file.hpp"
#include "model/model_config.hpp"
#include "model/model_family.hpp"
#include "replay/event_replay.hpp"
#include "trace/trace_reader.hpp"

namespace tiersim::app {

EngineKind parse_engine(const std::string& name) {
  if (name == "event") return EngineKind::Event;
  if (name == "analytic") return EngineKind::Analytic;
  throw InputError("", 0, "--engine", "unknown engine '" + name + "' (event, analytic)");
}

namespace {
class MemoryTrace final : public trace::StepSource {
 public:
  explicit MemoryTrace(std::shared_ptr<const LoadedTrace> loaded) : loaded_(std::move(loaded)) {}
  const trace::Header& header() const override { return loaded_->header; }
  bool next(trace::Step& out) override {
    if (next_ == loaded_->steps.size()) return false;
    out = loaded_->steps[next_++];
    return true;
  }
  const trace::Step* next_view(trace::Step&) override {
    return next_ == loaded_->steps.size() ? nullptr : &loaded_->steps[next_++];
  }

 private:
  std::shared_ptr<const LoadedTrace> loaded_;
  std::size_t next_ = 0;
};
}  // namespace

std::shared_ptr<const LoadedTrace> load_trace(const TraceSpec& spec) {
  auto source = open_trace(spec);
  auto loaded = std::make_shared<LoadedTrace>();
  loaded->header = source->header();
  trace::Step step;
  std::size_t ops = 0;
  while (source->next(step)) {
    // A sweep or plan holds the whole trace (issue 41 will stream it): past this many ops (about 1 GB of them, some
    // 1,500 decode steps of a 14B model) it is refused before memory runs out, not ended by bad_alloc.
    ops += step.ops.size();
    if (ops > kMaxHeldOps)
      throw InputError(spec.name(), 0, spec.trace_path.empty() ? "--decode" : "--trace",
                       "a sweep or plan holds the whole trace in memory, and this one passes " +
                           std::to_string(kMaxHeldOps) + " ops by step " + std::to_string(loaded->steps.size() + 1) +
                           "; ask for fewer steps here (--decode, or --steps for a diffusion model), or run it with `sim run`, which "
                           "streams it");
    loaded->steps.push_back(step);
  }
  return loaded;
}

std::unique_ptr<trace::StepSource> open_trace(const TraceSpec& spec) {
  if (spec.loaded) return std::make_unique<MemoryTrace>(spec.loaded);
  std::error_code ec;
  for (const std::string* path : {&spec.trace_path, &spec.model_path})
    if (!path->empty() && std::filesystem::is_directory(*path, ec) &&
        !(path == &spec.model_path && !is_gguf_path(*path) && model::model_config_file(*path) != *path))
      throw InputError(*path, 0, path == &spec.trace_path ? "--trace" : "--model", "is a directory; give a file");
  if (!spec.trace_path.empty()) return std::make_unique<trace::TraceReader>(spec.trace_path);
  if (spec.model_path.empty()) throw InputError("", 0, "--trace", "give a trace (--trace FILE) or a model (--model FILE)");
  if (spec.generation.gguf_file)
    return std::make_unique<model::LlmTraceGenerator>(
        model::gguf::model_config(*spec.generation.gguf_file, spec.model_path), spec.generation);
  return model::generate_trace(spec.model_path, spec.generation);
}

bool is_gguf_path(const std::string& path) {
  if (path.size() < 5) return false;
  std::string ext = path.substr(path.size() - 5);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".gguf";
}

void use_gguf_file(TraceSpec& spec) {
  std::error_code ec;
  if (std::filesystem::is_directory(spec.model_path, ec))
    throw InputError(spec.model_path, 0, "--model", "is a directory; give a file");
  auto header = std::make_shared<model::gguf::FileHeader>(model::gguf::read_header_file(spec.model_path));
  const std::string type = header->has_file_type ? model::gguf::ftype_name(header->file_type) : "";
  spec.generation.dtype = model::WeightDtype::Gguf;
  // Its own types decide every tensor's bytes; the file type names the file (and picks the launch counts).
  spec.generation.gguf = type.empty() ? "GGUF" : type;
  spec.generation.gguf_file = std::move(header);
  spec.generation.gguf_path = spec.model_path;
}

namespace {

// ComfyUI's sampler runs a guided iteration's positive and negative prompt in one batch only when its memory estimate
// for the two, x 1.5, is below the GPU's free memory (comfy/samplers.py _calc_cond_batch at a125cd84:
// model.memory_required(input_shape) * 1.5 < model_management.get_free_memory()); else one after the other. Free
// memory is the GPU's less the profile's reserve and the weights the placement keeps on it: get_free_memory counts
// the caching allocator's free blocks as free, so an earlier iteration's activations do not take any.
bool may_share_batch(const trace::Header& header) {
  const auto& m = header.meta;
  return m.count("cfg") && m.count("comfy_memory_per_cond") && !m.count("cfg_separate") && !m.count("negative_tokens");
}

// The estimate and the free memory when the two prompts must run apart; nothing when they share the batch.
std::optional<std::pair<double, double>> comfy_cond_batch_refused(const trace::Header& header, const hw::HardwareProfile& hw,
                                                                  const placement::Placement& placement) {
  const double estimate = 2 * std::stod(header.meta.at("comfy_memory_per_cond"));
  const double free = hw.gpu.memory - hw.gpu.reserved - (placement::weight_bytes(header) -
                                                         placement::offloaded_weight_bytes(header, placement));
  if (estimate * 1.5 < free) return std::nullopt;
  return std::pair{estimate, free};
}

}  // namespace

std::string gguf_runtime_refusal(const TraceSpec& trace, const runtime::RuntimeProfile& runtime) {
  if (trace.model_path.empty() || !is_gguf_path(trace.model_path) || runtime.name.rfind("pytorch", 0) != 0) return "";
  return "is a GGUF file (llama.cpp's format), and runtime '" + runtime.name +
         "' is PyTorch's, whose strategies (resident, bytes, ratio, fraction, layers, um*, accelerate, comfyui) read a "
         "model's config.json: a GGUF model runs under --policy llamacpp (llama.cpp's runtime; or --runtime llamacpp "
         "with another placement)";
}

Simulation simulate(const replay::RunSetup& setup, const strategy::StrategySpec& strategy, EngineKind engine, const TraceSpec& trace, report::Timeline* timeline) {
  // Before any work: the PyTorch allocator replay after the run would read the GGUF file as a config.json.
  if (const std::string refusal = gguf_runtime_refusal(trace, setup.runtime); !refusal.empty())
    throw InputError(trace.model_path, 0, "--model", refusal);
  if (timeline && engine != EngineKind::Event)
    throw InputError("", 0, "--timeline", "timelines come from the event engine; drop --engine analytic");
  auto source = open_trace(trace);
  Simulation sim;
  sim.header = source->header();
  if (!trace.model_path.empty() && may_share_batch(sim.header)) {
    // Placed first with the two prompts apart (their weights are the batched trace's; only the activations differ,
    // so a batch that would not fit does not refuse the run before the rule is asked); batched again if it fits.
    TraceSpec apart = trace;
    apart.loaded = nullptr;
    apart.generation.image.cfg_separate = true;
    auto apart_source = open_trace(apart);
    trace::Header apart_header = apart_source->header();
    placement::Placement placed = strategy::compose(apart_header, setup.hw, strategy);
    if (const auto refused = comfy_cond_batch_refused(apart_header, setup.hw, placed)) {
      source = std::move(apart_source);
      sim.header = std::move(apart_header);
      sim.header.meta["cfg_batch_estimate"] = std::to_string(static_cast<long long>(refused->first));
      sim.header.meta["cfg_batch_free"] = std::to_string(static_cast<long long>(refused->second));
      sim.placement = std::move(placed);
    } else {
      sim.placement = strategy::compose(sim.header, setup.hw, strategy);
    }
  } else {
    sim.placement = strategy::compose(sim.header, setup.hw, strategy);
  }
  if (sim.placement.managed.enabled && !sim.placement.managed.caching_allocator) {
    // The per-tensor allocator's calls: transformers generate()'s own allocations where they are modelled.
    if (const auto calls = generate_allocator_calls(trace, setup.runtime)) {
      sim.placement.managed.allocations_per_prefill = calls->prefill;
      sim.placement.managed.allocations_per_decode = calls->decode;
      if (setup.hw.managed_memory) {
        // Every call gets the advice the run's later allocations get (seed 000's allocator advises each): the
        // advice of its activations.
        std::uint8_t advice = 0;
        for (const auto& t : sim.header.tensors)
          if (trace::is_activation(t.kind) && sim.placement.managed.managed[t.id]) {
            advice = sim.placement.managed.advice[t.id];
            break;
          }
        auto advised = [&](const std::vector<double>& sizes) {
          double s = 0;
          for (double b : sizes)
            s += managed::advised_cycle_extra(*setup.hw.managed_memory, advice, b, sim.placement.managed.demand_paging);
          return s;
        };
        sim.placement.managed.advised_seconds_per_prefill = advised(calls->prefill_bytes);
        sim.placement.managed.advised_seconds_per_decode = advised(calls->decode_bytes);
      }
      sim.placement.resolved.emplace_back(
          "allocator calls", std::to_string(static_cast<long long>(calls->prefill)) + " in the prefill, " +
                                 std::to_string(static_cast<long long>(calls->decode)) +
                                 " per decode token (transformers generate's tensors, modelled; its own bookkeeping, "
                                 "about 10 per token, not)");
    } else {
      sim.placement.resolved.emplace_back("allocator calls", "one cudaMallocManaged and one cudaFree per trace op (assumed)");
    }
  }
  sim.result = engine == EngineKind::Event ? replay::run_event_engine(setup, sim.placement, *source, timeline)
                                           : analytic::run_analytic(setup, sim.placement, *source);
  if (sim.result.steps.empty()) throw InputError(trace.name(), 0, "step", "the trace has no steps");
  return sim;
}

}  // namespace tiersim::app
