// The screening bound (analytic/step_bound.hpp) is never above the event engine: every step of a run takes at
// least its bound, and the run's summary is inside bound_run's. Checked over a fixed spread of models (dense,
// MoE, a DiT), machines (one and two GPUs, NVLink and PCIe peers, narrow links) and strategies (resident,
// DisTorch, layers on the CPU or streamed, ComfyUI, accelerate, llama.cpp, pipelines, managed memory).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analytic/step_bound.hpp"
#include "cli/simulation.hpp"
#include "core/error.hpp"
#include "hardware/profile_loader.hpp"
#include "model/model_config.hpp"
#include "policies/strategy/presets.hpp"
#include "runtime/runtime_loader.hpp"
#include "result/run_result.hpp"

namespace tiersim {
namespace {

struct Model {
  std::string file, dtype;
};
struct Strategy {
  std::string policy;
  strategy::LegacyFlags flags;
};

std::vector<Strategy> strategies() {
  std::vector<Strategy> s;
  auto add = [&](const std::string& policy, auto&& set) {
    Strategy x{policy, {}};
    set(x.flags);
    s.push_back(x);
  };
  add("resident", [](auto&) {});
  add("ratio", [](auto& f) { f.split = "cuda:0,60%;cpu,40%"; });
  add("ratio", [](auto& f) { f.split = "cuda:0,60%;cpu,40%"; f.prefetch = 2; f.host_memory = "pinned"; });
  add("layers", [](auto& f) { f.layers = 10; f.offload_exec = "cpu"; });
  add("layers", [](auto& f) { f.layers = 12; f.prefetch = 1; });
  add("bytes", [](auto& f) { f.offload_bytes = 4e9; f.donor = "cpu"; });
  add("bytes", [](auto& f) { f.offload_bytes = 6e9; f.donor = "cuda:1"; });
  add("comfyui", [](auto&) {});
  add("accelerate", [](auto&) {});
  add("llamacpp", [](auto&) {});
  add("ratio", [](auto& f) { f.split = "cuda:0,50%;cuda:1,50%"; f.offload_exec = "execute"; });
  add("um", [](auto&) {});
  add("um-cpu", [](auto&) {});
  return s;
}

TEST(StepBound, NeverAboveTheEventEngine) {
  const std::vector<Model> models{{"qwen3-4b", "bf16"}, {"qwen3-8b", "Q4_K_M"}, {"qwen3-30b-a3b", "Q4_K_M"},
                                  {"flux.1-schnell", "bf16"}};
  const std::vector<std::string> machines{"rtx4090", "rtx3060-12gb", "2xrtx3090+nvlink", "2xrtx4060ti-16gb+pcie3-x8",
                                          "2xrtx6000-ada", "h100-sxm"};
  const auto runtime = runtime::resolve_runtime(runtime::kDefaultRuntime);
  const auto all = strategies();
  int checked = 0, steps = 0;
  std::uint32_t pick = 12345;  // a fixed walk over the grid: every model and machine, a spread of strategies
  for (const auto& m : models)
    for (const auto& machine : machines) {
      const auto hw = hw::resolve_profile(machine);
      const replay::RunSetup setup{hw, runtime};
      app::TraceSpec spec;
      spec.model_path = std::string(TIERSIM_SOURCE_DIR) + "/traces/models/" + m.file + ".json";
      spec.generation.prompt_tokens = 48;
      spec.generation.decode_tokens = 3;
      spec.generation.image.width = spec.generation.image.height = 256;
      spec.generation.image.steps = 2;
      model::set_dtype(spec.generation, m.dtype);
      spec.loaded = app::load_trace(spec);
      for (int k = 0; k < 5; ++k) {
        pick = pick * 1103515245u + 12345u;
        const Strategy& s = all[(pick >> 8) % all.size()];
        SCOPED_TRACE(m.file + " " + m.dtype + " on " + machine + " under " + s.policy);
        strategy::StrategySpec strategy;
        app::Simulation sim;
        try {
          strategy = strategy::preset_spec(s.policy);
          strategy::apply_flags(strategy, s.flags);
          sim = app::simulate(setup, strategy, app::EngineKind::Event, spec);
        } catch (const CapacityError&) {
          continue;  // does not fit this machine
        } catch (const InputError&) {
          continue;  // does not apply (a second GPU on one, llama.cpp on a DiT)
        }
        analytic::StepBounder bounder(setup, spec.loaded->header, sim.placement);
        ASSERT_EQ(sim.result.steps.size(), spec.loaded->steps.size());
        for (std::size_t i = 0; i < sim.result.steps.size(); ++i) {
          const double bound = bounder.bound(spec.loaded->steps[i]).seconds();
          EXPECT_GT(bound, 0);
          EXPECT_LE(bound, sim.result.steps[i].seconds * (1 + 1e-9)) << "step " << i;
          ++steps;
        }
        const auto run = analytic::bound_run(setup, spec.loaded->header, sim.placement, spec.loaded->steps);
        const auto summary = result::summarize(sim.result);
        EXPECT_LE(summary.tps, run.decode_tps * (1 + 1e-9));
        EXPECT_GE(summary.prefill_seconds, run.prefill_seconds * (1 - 1e-9));
        EXPECT_GE(summary.iteration_median, run.iteration_seconds * (1 - 1e-9));
        ++checked;
      }
    }
  EXPECT_GE(checked, 40);  // enough of the grid applies and fits to mean something
  RecordProperty("runs_checked", checked);
  RecordProperty("steps_checked", steps);
}

// The bound is not vacuous: within a factor of the event engine where one resource dominates.
TEST(StepBound, TightWhereOneResourceDominates) {
  const auto runtime = runtime::resolve_runtime(runtime::kDefaultRuntime);
  app::TraceSpec spec;
  spec.model_path = std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen3-14b.json";
  spec.generation.prompt_tokens = 128;
  spec.generation.decode_tokens = 4;
  spec.loaded = app::load_trace(spec);
  const auto hw = hw::resolve_profile("rtx4090");
  for (const auto& [policy, split] : {std::pair{"ratio", "cuda:0,60%;cpu,40%"}, std::pair{"resident", ""}}) {
    const auto resident_hw = hw::resolve_profile("h100-sxm");
    const replay::RunSetup s2{std::string(policy) == "resident" ? resident_hw : hw, runtime};
    strategy::StrategySpec strategy = strategy::preset_spec(policy);
    strategy::LegacyFlags f;
    if (*split) f.split = split;
    strategy::apply_flags(strategy, f);
    const auto sim = app::simulate(s2, strategy, app::EngineKind::Event, spec);
    const auto run = analytic::bound_run(s2, spec.loaded->header, sim.placement, spec.loaded->steps);
    const double tps = result::summarize(sim.result).tps;
    EXPECT_GT(tps, 0.85 * run.decode_tps) << policy;  // link-bound copies; HBM-bound decode
    EXPECT_LE(tps, run.decode_tps * (1 + 1e-9)) << policy;
  }
}

}  // namespace
}  // namespace tiersim
