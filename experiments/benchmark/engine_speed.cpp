// How fast the simulator is: 1,000 decode steps of Qwen3-14B (bf16, batch 1, 512-token prompt) on
// the RTX 4090 preset under `ratio` with a 70/30 split whose offloaded quarter is copied on demand from
// pinned memory (the engines' plainest copy path, as the ratio preset ran before it became DisTorch's
// pageable casts), by each engine, generated in memory and read from a trace file; and under `um`
// (oversubscribed). Reports events per second for the event engine.
//   ./build/bin/tiersim_bench --benchmark_min_time=2
#include <benchmark/benchmark.h>

#include <cstdio>
#include <fstream>

#include "cli/simulation.hpp"
#include "hardware/profile_loader.hpp"
#include "runtime/runtime_loader.hpp"
#include "model/model_config.hpp"
#include "model/trace_generator.hpp"
#include "policies/strategy/presets.hpp"
#include "trace/trace_writer.hpp"

namespace {

using namespace tiersim;

app::TraceSpec qwen_spec() {
  app::TraceSpec spec;
  spec.model_path = std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen3-14b.json";
  spec.generation.prompt_tokens = 512;
  spec.generation.decode_tokens = 1000;
  return spec;
}

void run(benchmark::State& state, app::EngineKind engine, const app::TraceSpec& spec, const std::string& policy,
         const strategy::LegacyFlags& flags) {
  strategy::StrategySpec strategy = strategy::preset_spec(policy);
  if (policy == "ratio") {
    strategy.placement.options["split"] = "cuda:0,70%;cpu,30%";
    strategy.offload.options.clear();  // pinned, on demand (the preset casts from pageable memory)
  }
  strategy::apply_flags(strategy, flags);
  const auto hw = hw::resolve_profile("rtx4090");
  const auto runtime = runtime::resolve_runtime(runtime::kDefaultRuntime);
  std::uint64_t events = 0;
  for (auto _ : state) {
    const auto sim = app::simulate({hw, runtime}, strategy, engine, spec);
    events += sim.result.events;
    benchmark::DoNotOptimize(sim.result.steps.back().seconds);
  }
  state.counters["decode_steps"] = 1000;
  if (events > 0) state.counters["events_per_s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}

void BM_Qwen14B_Ratio_1000Steps_Event_Generated(benchmark::State& state) {
  run(state, app::EngineKind::Event, qwen_spec(), "ratio", {});
}
void BM_Qwen14B_Ratio_1000Steps_Event_FromFile(benchmark::State& state) {
  // The same trace written to a file first: the streaming reader's cost is included.
  const std::string path = "/tmp/tiersim_bench_qwen14b_1000.trace";
  {
    auto source = app::open_trace(qwen_spec());
    std::ofstream out(path);
    trace::write_trace(out, *source);
  }
  app::TraceSpec spec;
  spec.trace_path = path;
  run(state, app::EngineKind::Event, spec, "ratio", {});
  std::remove(path.c_str());
}
void BM_Qwen14B_Ratio_Prefetch2_1000Steps_Event_Generated(benchmark::State& state) {
  strategy::LegacyFlags o;
  o.prefetch = 2;
  run(state, app::EngineKind::Event, qwen_spec(), "ratio", o);
}
void BM_Qwen14B_Ratio_1000Steps_Analytic_Generated(benchmark::State& state) {
  run(state, app::EngineKind::Analytic, qwen_spec(), "ratio", {});
}

void BM_Qwen14B_UM_Oversubscribed_1000Steps_Event_Generated(benchmark::State& state) {
  // Qwen3-14B (27.7 GiB managed) on a 24 GiB GPU: ~13,400 blocks fault and are evicted every step.
  run(state, app::EngineKind::Event, qwen_spec(), "um", {});
}
void BM_Qwen14B_UM_Oversubscribed_1000Steps_Event_Loaded(benchmark::State& state) {
  // The trace generated once and replayed from memory, as sim plan and sweeps share it.
  app::TraceSpec spec = qwen_spec();
  spec.loaded = app::load_trace(spec);
  run(state, app::EngineKind::Event, spec, "um", {});
}
void BM_Qwen14B_UM_Oversubscribed_1000Steps_Analytic_Generated(benchmark::State& state) {
  run(state, app::EngineKind::Analytic, qwen_spec(), "um", {});
}

BENCHMARK(BM_Qwen14B_UM_Oversubscribed_1000Steps_Event_Generated)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Qwen14B_UM_Oversubscribed_1000Steps_Event_Loaded)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Qwen14B_UM_Oversubscribed_1000Steps_Analytic_Generated)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Qwen14B_Ratio_1000Steps_Event_Generated)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Qwen14B_Ratio_1000Steps_Event_FromFile)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Qwen14B_Ratio_Prefetch2_1000Steps_Event_Generated)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Qwen14B_Ratio_1000Steps_Analytic_Generated)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
