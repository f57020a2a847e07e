// Platforms (policies/platforms/): the Windows/WSL2 driver's sysmem fallback and managed memory without
// demand paging, against the Linux driver's behaviour.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "hardware/profile_loader.hpp"
#include "policies/strategy/parts.hpp"
#include "policies/strategy/presets.hpp"
#include "policies/strategy/strategy.hpp"
#include "model/model_config.hpp"
#include "model/trace_generator.hpp"
#include "support/model_headers.hpp"

#include <cmath>
#include <functional>

namespace tiersim::strategy {
namespace {

StrategySpec on(const std::string& preset, const std::string& platform) {
  StrategySpec spec = preset_spec(preset);
  spec.platform = PartSpec::parse(platform, "--platform");
  return spec;
}

bool in_sysmem(const placement::Placement& p, std::uint32_t t) {
  return p.managed.enabled && p.managed.managed[t] && (p.managed.advice[t] & placement::kSysmemFallback);
}

TEST(SysmemFallback, LinuxRefusesWhatWindowsSpillsToSystemMemoryFirstFitInAllocationOrder) {
  const auto& h = testing::model_header("qwen3-14b");
  const auto hw = hw::resolve_profile("rtx4090");
  EXPECT_THROW(compose(h, hw, preset_spec("resident")), CapacityError);
  EXPECT_THROW(compose(h, hw, on("resident", "windows:sysmem-fallback=off")), CapacityError);
  for (const std::string platform : {"windows", "wsl2"}) {
    const auto p = compose(h, hw, on("resident", platform));
    // Replay the allocations: weights in trace order, then KV cache, then activations; each stays in
    // VRAM if it fits what is left, else lives in system memory.
    const double free_vram = hw.gpu.memory - hw.gpu.reserved;
    double used = 0, spilled = 0;
    std::size_t spilled_weights = 0;
    for (const auto kind : {trace::TensorKind::Weight, trace::TensorKind::KvCache, trace::TensorKind::Activation})
      for (const auto& t : h.tensors) {
        if (t.kind != kind) continue;
        const double b = static_cast<double>(t.bytes);
        const bool fits = used + b <= free_vram;
        EXPECT_EQ(in_sysmem(p, t.id), !fits) << t.name;
        if (fits) {
          used += b;
          EXPECT_EQ(p.device[t.id], placement::kComputeGpu) << t.name;
        } else {
          spilled += b;
          spilled_weights += kind == trace::TensorKind::Weight;
          EXPECT_EQ(p.device[t.id], placement::kCpu) << t.name;
          EXPECT_EQ(p.path[t.id], placement::Path::Managed) << t.name;
          // Mapped and remote, never migrated: what the managed model does with these two hints.
          EXPECT_TRUE(p.managed.advice[t.id] & placement::kPreferCpu);
          EXPECT_TRUE(p.managed.advice[t.id] & placement::kAccessedByGpu);
        }
      }
    EXPECT_GT(spilled_weights, 0u);
    // 28.28 GiB needed, 24 GiB on the card: a few GiB spill (27.51 GiB of weights, 0.6 GiB reserve).
    EXPECT_GT(spilled / (1 << 30), 4.0);
    EXPECT_LT(spilled / (1 << 30), 5.0);
    EXPECT_NEAR(placement::sysmem_usage(h, p).total(), spilled, 1.0);
    EXPECT_LE(placement::usage_on(h, p, placement::kComputeGpu).total(), free_vram);
  }
}

TEST(SysmemFallback, APlacementThatFitsIsUntouchedAndFitTestsStillSeeOnlyVram) {
  const auto& h = testing::model_header("qwen3-8b");
  const auto hw = hw::resolve_profile("rtx4090");
  const auto linux_p = compose(h, hw, preset_spec("resident"));
  const auto windows_p = compose(h, hw, on("resident", "windows"));
  EXPECT_FALSE(windows_p.managed.enabled);
  EXPECT_EQ(linux_p.device, windows_p.device);
  // accelerate sizes its map by the free VRAM the driver reports: the same map on Windows, nothing spilled.
  const auto& h14 = testing::model_header("qwen3-14b");
  const auto a_linux = compose(h14, hw, preset_spec("accelerate"));
  const auto a_windows = compose(h14, hw, on("accelerate", "windows"));
  EXPECT_EQ(a_linux.device, a_windows.device);
  EXPECT_EQ(placement::sysmem_usage(h14, a_windows).total(), 0.0);
}

TEST(WindowsManaged, NoDemandPagingNoOversubscriptionAndOnlyTheAdviceThatExistsThere) {
  const auto& h8 = testing::model_header("qwen3-8b");
  const auto& h14 = testing::model_header("qwen3-14b");
  const auto hw = hw::resolve_profile("rtx4090");
  const auto linux_um = compose(h8, hw, preset_spec("um"));
  EXPECT_TRUE(linux_um.managed.demand_paging);
  const auto windows_um = compose(h8, hw, on("um", "windows"));
  EXPECT_FALSE(windows_um.managed.demand_paging);
  // Oversubscription is allowed on Linux, refused on Windows and WSL2.
  EXPECT_NO_THROW(compose(h14, hw, preset_spec("um")));
  EXPECT_THROW(compose(h14, hw, on("um", "windows")), CapacityError);
  EXPECT_THROW(compose(h14, hw, on("um", "wsl2")), CapacityError);
  // Prefetch and AccessedBy need concurrentManagedAccess; PreferredLocation=CPU there is not modelled.
  for (const std::string preset : {"um-prefetch", "um-accessedby", "um-cpu"}) {
    try {
      compose(h8, hw, on(preset, "windows"));
      ADD_FAILURE() << preset;
    } catch (const InputError& e) {
      EXPECT_EQ(e.key(), "--policy") << preset;
    }
  }
  // ReadMostly is accepted and does nothing.
  const auto rm = compose(h8, hw, on("um-readmostly", "windows"));
  for (const auto& t : h8.tensors) {
    if (!rm.managed.managed[t.id]) continue;
    EXPECT_EQ(rm.managed.advice[t.id] & placement::kReadMostly, 0) << t.name;
  }
}

TEST(Platforms, OptionsAreCheckedByName) {
  const auto& h = testing::model_header("qwen3-8b");
  const auto hw = hw::resolve_profile("rtx4090");
  EXPECT_THROW(compose(h, hw, on("resident", "macos")), InputError);
  EXPECT_THROW(compose(h, hw, on("resident", "linux:sysmem-fallback=prefer")), InputError);
  EXPECT_THROW(compose(h, hw, on("resident", "windows:sysmem-fallback=maybe")), InputError);
  EXPECT_EQ(on("resident", "windows").label(), "resident on windows");
  EXPECT_EQ(preset_spec("resident").label(), "resident");
}

}  // namespace
}  // namespace tiersim::strategy

namespace tiersim::strategy {
namespace {

TEST(ManagedAdvice, TheSeedsAllocatorAdvisesEveryAllocationNotOnlyTheWeights) {
  const auto& h = testing::model_header("qwen3-8b");
  const auto hw = hw::resolve_profile("h100-measured");
  StrategySpec weights = preset_spec("um-cpu");
  StrategySpec all = preset_spec("um-cpu");
  all.memory.set("advise", "all", "--memory");
  const auto pw = compose(h, hw, weights);
  const auto pa = compose(h, hw, all);
  for (const auto& t : h.tensors) {
    if (!pa.managed.managed[t.id]) continue;
    EXPECT_TRUE(pa.managed.advice[t.id] & placement::kPreferCpu) << t.name;
    const bool weight = t.kind == trace::TensorKind::Weight;
    EXPECT_EQ((pw.managed.advice[t.id] & placement::kPreferCpu) != 0, weight) << t.name;
  }
  all.memory.set("advise", "some", "--memory");
  EXPECT_THROW(compose(h, hw, all), InputError);
}

}  // namespace
}  // namespace tiersim::strategy

namespace tiersim::strategy {
namespace {

TEST(SysmemFallback, TheActivationsKeepTheWholeBlocksOfVramStillFreeAtTheirStart) {
  const auto config = model::load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen3-14b.json");
  model::GenerationOptions g;
  g.prompt_tokens = 512;  // sim's defaults: with them one 2 MiB block of VRAM is left for activations
  g.decode_tokens = 128;
  model::LlmTraceGenerator gen(config, g);
  const auto& h = gen.header();
  const auto hw = hw::resolve_profile("rtx4090");
  const auto p = compose(h, hw, on("resident", "windows"));
  std::uint32_t act = 0;
  for (const auto& t : h.tensors)
    if (t.kind == trace::TensorKind::Activation) act = t.id;
  ASSERT_TRUE(in_sysmem(p, act));
  const double prefix = placement::vram_prefix_of(p, act);
  const double block = hw.managed_memory->va_block;
  EXPECT_GT(prefix, 0);
  EXPECT_EQ(std::fmod(prefix, block), 0.0);
  // On cuda:0 it is device memory; what spilled is the rest; VRAM is not overfilled.
  EXPECT_NEAR(placement::sysmem_usage(h, p).activations, static_cast<double>(h.tensors[act].bytes) - prefix, 1.0);
  EXPECT_NEAR(placement::usage_on(h, p, placement::kComputeGpu).activations, prefix, 1.0);
  EXPECT_LE(placement::usage_on(h, p, placement::kComputeGpu).total(), hw.gpu.memory - hw.gpu.reserved);
}

}  // namespace
}  // namespace tiersim::strategy

namespace tiersim::strategy {
namespace {

std::string key_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.key();
  }
  return "(no error)";
}

TEST(NewErrorPaths, EachNamesTheFlagOrOptionAtFault) {
  const auto hw = hw::resolve_profile("rtx4090");
  // Weights on disk cannot execute there.
  StrategySpec disk_exec = preset_spec("accelerate");
  disk_exec.offload = PartSpec::parse("execute", "--offload");
  EXPECT_EQ(key_of([&] { compose(testing::model_header("llama-3.1-70b"), hw, disk_exec); }), "--offload");
  // The sysmem fallback with layers executed on another GPU is not modelled.
  StrategySpec pipe;
  pipe.placement = PartSpec::parse("layers:layers=30,donor=cuda:1", "--placement");
  pipe.offload = PartSpec::parse("execute", "--offload");
  pipe.platform = PartSpec::parse("windows", "--platform");
  pipe.custom = true;
  auto two = hw::resolve_profile("rtx3090x2-pcie");
  two.gpu.memory = 12.0 * (1 << 30);  // the first GPU overflows
  EXPECT_EQ(key_of([&] { compose(testing::model_header("qwen3-14b"), two, pipe); }), "--platform");
  // accelerate's max_memory has no disk budget.
  StrategySpec acc = preset_spec("accelerate");
  acc.placement.set("max_memory", "0=10GiB;disk=1GiB", "--placement");
  EXPECT_EQ(key_of([&] { compose(testing::model_header("qwen3-8b"), hw, acc); }), "--placement");
}

TEST(ComfyUiRuntime, StreamsAndTheOlderVersionReachTheCopyPath) {
  const auto& h = testing::model_header("qwen3-14b");
  const auto hw = hw::resolve_profile("rtx4090");
  StrategySpec spec = preset_spec("comfyui");
  EXPECT_EQ(compose(h, hw, spec).copy.streams, 2);
  spec.placement.set("async-offload", "4", "--placement");
  EXPECT_EQ(compose(h, hw, spec).copy.streams, 4);
  StrategySpec old = preset_spec("comfyui");
  old.placement.set("version", "2025-07", "--placement");
  const auto p = compose(h, hw, old);
  EXPECT_FALSE(p.copy.stream);
  EXPECT_EQ(p.copy.host_memory, placement::HostMemory::Pageable);
  old.placement.set("pin", "off", "--placement");
  EXPECT_EQ(key_of([&] { compose(h, hw, old); }), "--placement");
  StrategySpec too_much = preset_spec("comfyui");
  too_much.placement.set("free", "100 GiB", "--placement");
  EXPECT_EQ(key_of([&] { compose(h, hw, too_much); }), "--placement");
}

}  // namespace
}  // namespace tiersim::strategy
