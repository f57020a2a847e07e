#pragma once
// One simulation from start to end: open the trace (a file, or generated from a model description),
// place it with a strategy, run an engine. Shared by `sim run`, `sim sweep`, the tests and the benchmark.
#include <memory>
#include <string>

#include "hardware/profile.hpp"
#include "model/trace_generator.hpp"
#include "placement/placement.hpp"
#include "replay/run_setup.hpp"
#include "policies/strategy/strategy.hpp"
#include "result/run_result.hpp"
#include "report/timeline.hpp"
#include "trace/trace.hpp"

namespace tiersim::app {

enum class EngineKind { Event, Analytic };
EngineKind parse_engine(const std::string& name);  // throws InputError

// A trace read once and kept in memory, to replay many times (a sweep's points).
struct LoadedTrace {
  trace::Header header;
  std::vector<trace::Step> steps;
};

struct TraceSpec {
  std::string trace_path;   // a trace file, or
  std::string model_path;   // a model description to generate from, with:
  model::GenerationOptions generation;
  std::shared_ptr<const LoadedTrace> loaded;  // when set, replayed from memory instead of opened again
  std::string name() const { return trace_path.empty() ? model_path : trace_path; }
};
std::unique_ptr<trace::StepSource> open_trace(const TraceSpec& spec);
// Whether a --model path names a GGUF file (by its extension, any case).
bool is_gguf_path(const std::string& path);
// Reads the .gguf model's header (never its weights) into the generation options: its tensors' types and
// bytes, and its file type as the dtype (llama.cpp's name for general.file_type, else "GGUF").
void use_gguf_file(TraceSpec& spec);
// Reads the whole trace once (for a sweep: its file is not re-read per point). A trace of more than kMaxHeldOps ops
// is refused (InputError naming --decode or --trace): it would not fit in memory.
inline constexpr std::size_t kMaxHeldOps = 2'000'000;
std::shared_ptr<const LoadedTrace> load_trace(const TraceSpec& spec);

struct Simulation {
  trace::Header header;
  placement::Placement placement;
  result::RunResult result;
};

// Why a run of this trace under this runtime is refused, or "" when it is not: a GGUF model (llama.cpp's format) under a
// PyTorch runtime, whose strategies read a config.json (the reason says which strategies take a GGUF).
std::string gguf_runtime_refusal(const TraceSpec& trace, const runtime::RuntimeProfile& runtime);

// `timeline` (event engine only) receives the spans of the first steps. A GGUF model under a PyTorch runtime is an
// InputError before any work (gguf_runtime_refusal).
Simulation simulate(const replay::RunSetup& setup, const strategy::StrategySpec& strategy, EngineKind engine, const TraceSpec& trace, report::Timeline* timeline = nullptr);

}  // namespace tiersim::app
