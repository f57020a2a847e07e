// How fast `sim plan` screens candidates (issue 15's goal: at least 10,000 in at most 2 s on one core): every
// catalogue GPU, one and two of them, x four searched strategies (layers run by the CPU, layers streamed one
// ahead, DisTorch virtual VRAM to the CPU and to cuda:1) x every value of their knob (layers 0..40, GB 0..29.5 in
// 0.25 GB steps), for Qwen3-14B bf16 (512-token prompt, 128 decoded, the trace read once and shared): each
// candidate's placement (does it fit?) and its speed bound (analytic/step_bound.hpp). One thread.
//   ./build/bin/tiersim_bench --benchmark_filter=Plan
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "analytic/step_bound.hpp"
#include "cli/simulation.hpp"
#include "core/error.hpp"
#include "hardware/catalogue.hpp"
#include "hardware/profile_loader.hpp"
#include "placement/placement.hpp"
#include "policies/strategy/strategy.hpp"
#include "policies/strategy/presets.hpp"
#include "runtime/runtime_loader.hpp"

namespace {

using namespace tiersim;

struct Candidate {
  std::size_t machine;
  strategy::StrategySpec strategy;
};

void BM_Plan_Screen_Qwen14B_Catalogue(benchmark::State& state) {
  app::TraceSpec spec;
  spec.model_path = std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen3-14b.json";
  spec.generation.prompt_tokens = 512;
  spec.generation.decode_tokens = 128;
  const auto trace = app::load_trace(spec);
  std::vector<hw::HardwareProfile> machines;
  for (const auto& g : hw::catalogue_gpus())
    for (const std::string count : {"", "2x"}) machines.push_back(hw::resolve_profile(count + g.id));
  const auto runtime = runtime::resolve_runtime(runtime::kDefaultRuntime);
  std::vector<Candidate> candidates;
  for (std::size_t m = 0; m < machines.size(); ++m) {
    for (int layers = 0; layers <= 40; ++layers)
      for (const bool cpu : {true, false}) {
        strategy::StrategySpec s = strategy::preset_spec("layers");
        strategy::LegacyFlags f;
        f.layers = layers;
        if (cpu) f.offload_exec = "cpu";
        else f.prefetch = 1;
        strategy::apply_flags(s, f);
        candidates.push_back({m, s});
      }
    for (int quarter = 0; quarter <= 118; ++quarter)
      for (const char* donor : {"cpu", "cuda:1"}) {
        if (machines[m].gpu.count < 2 && std::string(donor) == "cuda:1") continue;
        strategy::StrategySpec s = strategy::preset_spec("bytes");
        strategy::LegacyFlags f;
        f.offload_bytes = 0.25e9 * quarter;
        f.donor = donor;
        strategy::apply_flags(s, f);
        candidates.push_back({m, s});
      }
  }
  std::size_t fits = 0;
  for (auto _ : state) {
    fits = 0;
    double best = 0;
    for (const Candidate& c : candidates) {
      const replay::RunSetup setup{machines[c.machine], runtime};
      try {
        const placement::Placement p = strategy::compose(trace->header, machines[c.machine], c.strategy);
        best = std::max(best, analytic::bound_run(setup, trace->header, p, trace->steps).decode_tps);
        ++fits;
      } catch (const CapacityError&) {
      }
    }
    benchmark::DoNotOptimize(best);
  }
  state.counters["candidates"] = static_cast<double>(candidates.size());
  state.counters["fitting"] = static_cast<double>(fits);
  state.counters["candidates_per_s"] =
      benchmark::Counter(static_cast<double>(candidates.size()), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Plan_Screen_Qwen14B_Catalogue)->Unit(benchmark::kMillisecond);

}  // namespace
