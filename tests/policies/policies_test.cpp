#include <gtest/gtest.h>

#include "runtime/runtime_loader.hpp"

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "hardware/profile_loader.hpp"
#include "model/model_config.hpp"
#include "model/trace_generator.hpp"
#include "policies/placement_rules/split_string.hpp"
#include "policies/placement_rules/tail_first_assignment.hpp"
#include "policies/strategy/parts.hpp"
#include "policies/strategy/presets.hpp"
#include "replay/event_replay.hpp"
#include "support/toy.hpp"
#include "trace/trace_reader.hpp"

namespace tiersim::strategy {
namespace {

using placement::kCpu;

struct Qwen14B {
  model::ModelConfig config =
      model::load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen3-14b.json");
  model::LlmTraceGenerator gen{config, {}};
  const trace::Header& header = gen.header();
};

placement::Placement place(const std::string& preset, const trace::Header& h, const hw::HardwareProfile& hw,
                           const LegacyFlags& flags = {}) {
  StrategySpec spec = preset_spec(preset);
  apply_flags(spec, flags);
  return compose(h, hw, spec);
}

double bytes_on(const trace::Header& h, const placement::Placement& p, placement::DeviceId d) {
  return placement::usage_on(h, p, d).weights;
}

TEST(Registry, EveryPolicyBuildsAndPlacesASmallModel) {
  auto m = model::parse_model_config(
      R"({"model_type":"qwen3","hidden_size":256,"intermediate_size":512,"num_hidden_layers":4,
          "num_attention_heads":4,"num_key_value_heads":2,"vocab_size":1000})",
      "small.json");
  model::LlmTraceGenerator gen(m, {});
  const auto hw = hw::resolve_profile("rtx4090");
  for (const auto& info : presets()) {
    const auto p = place(info.name, gen.header(), hw);
    EXPECT_EQ(p.device.size(), gen.header().tensors.size()) << info.name;
  }
  EXPECT_THROW(preset_spec("magic"), InputError);
  // Every registered part builds from its defaults and composes with the others.
  for (const auto& rule : placement_rules())
    for (const auto& memory : memory_kinds())
      for (const auto& offload : offload_paths()) {
        StrategySpec spec;
        spec.placement.name = rule.name;
        spec.memory.name = memory.name;
        spec.offload.name = offload.name;
        try {
          const auto p = compose(gen.header(), hw, spec);
          EXPECT_EQ(p.path.size(), gen.header().tensors.size()) << spec.label();
        } catch (const InputError& e) {
          if (rule.name == "device_map") {  // it needs its file: the one part without defaults
            EXPECT_EQ(e.key(), "file") << e.what();
            continue;
          }
          // Managed memory with execution off the compute GPU is refused, by name.
          EXPECT_EQ(memory.name, "managed") << spec.label() << ": " << e.what();
          EXPECT_EQ(offload.name, "execute") << spec.label() << ": " << e.what();
        }
      }
  // Every platform composes with the presets it supports (the managed presets it refuses are tested in
  // platform_test.cpp).
  for (const auto& platform : platforms())
    for (const std::string preset : {"resident", "ratio", "um", "accelerate"}) {
      StrategySpec spec = preset_spec(preset);
      spec.platform.name = platform.name;
      EXPECT_EQ(compose(gen.header(), hw, spec).path.size(), gen.header().tensors.size()) << spec.label();
    }
}

TEST(Resident, RefusesAModelThatDoesNotFitAndSaysHowMuchItNeeds) {
  Qwen14B q;
  try {
    place("resident", q.header, hw::resolve_profile("rtx4090"), {});
    FAIL();
  } catch (const CapacityError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("needs 28."), std::string::npos) << msg;
    EXPECT_NE(msg.find("weights 27.51 GiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cuda:0 has 24.00 GiB"), std::string::npos) << msg;
  }
  EXPECT_NO_THROW(place("resident", q.header, hw::resolve_profile("h100-sxm"), {}));
}

TEST(Ratio, PutsTheShareOnTheGpuFromTheTailAsDisTorchDoes) {
  Qwen14B q;
  LegacyFlags o;
  o.split = "cuda:0,70%;cpu,30%";
  const auto p = place("ratio", q.header, hw::resolve_profile("rtx4090"), o);
  const double total = placement::weight_bytes(q.header);
  double embedding = 0;
  for (const auto& t : q.header.tensors)
    if (t.name == "model.embed_tokens") embedding = static_cast<double>(t.bytes);
  // As in DisTorch, the GPU's 70% quota is filled from the tail with the leaf blocks, the cpu's 30%
  // with the rest; the embedding, first in the model and so last in the walk, no longer fits the cpu's
  // remainder and is an orphan on the GPU: the cpu holds 30% less the embedding, give or take one
  // module (a 178 MB MLP matrix).
  EXPECT_NEAR(bytes_on(q.header, p, kCpu), 0.30 * total - embedding, 178.3e6);
  // Tail first: the LM head is on the GPU, the first layer's projections on the cpu.
  for (const auto& t : q.header.tensors) {
    if (t.name == "lm_head") {
      EXPECT_EQ(p.device[t.id], 0);
    }
    if (t.name == "model.layers.0.mlp.down_proj") {
      EXPECT_EQ(p.device[t.id], kCpu);
    }
    if (t.name == "model.embed_tokens") {
      EXPECT_EQ(p.device[t.id], 0);
    }
  }
}

TEST(DisTorch, TheNodeDefaultMovesFourGiBAndOverfillsA24GiBCardAsDisTorchDoes) {
  // The node's defaults (virtual_vram_gb 4.0, donor cpu): the compute GPU's quota is the model less
  // 4 GiB; filled from the tail, the cpu's 4 GiB takes the first layers' leaf blocks, and the 1.45 GiB
  // embedding, fitting neither quota any more, is an orphan that DisTorch puts on the compute GPU: 24.95
  // GiB of weights on a 24 GiB card (issue 11's worked example). tiersim says it will not fit.
  Qwen14B q;
  try {
    place("ratio", q.header, hw::resolve_profile("rtx4090"));
    FAIL();
  } catch (const CapacityError& e) {
    EXPECT_NE(std::string(e.what()).find("weights 24.95 GiB"), std::string::npos) << e.what();
  }
}

TEST(DisTorch, WorkedExampleTwentyGiBOfLinearBlocks) {
  // 320 blocks of 64 MiB (20 GiB), a 24 GiB GPU, 64 GiB of host memory, the node's defaults: cuda:0's
  // fraction 16/24 -> 0.6667 (16.0008 GiB) takes blocks 64..319, the cpu's 4/64 = 0.0625 (4 GiB) blocks
  // 0..63, equality fitting.
  std::ostringstream t;
  t << "tiersim-trace 1\nmeta model blocks\n";
  for (int i = 0; i < 320; ++i) t << "tensor " << i << " weight " << 64 * 1048576 << " " << i << " blocks." << i << ".linear\n";
  t << "step decode tokens=1\n";
  for (int i = 0; i < 320; ++i) t << "op gemv layer=" << i << " read=" << i << "\n";
  t << "end\n";
  trace::TraceReader reader(std::make_unique<std::istringstream>(t.str()), "blocks.trace");
  const auto p = place("bytes", reader.header(), hw::resolve_profile("rtx4090"));
  for (int i = 0; i < 320; ++i) EXPECT_EQ(p.device[static_cast<std::size_t>(i)], i < 64 ? kCpu : 0) << i;
}

TEST(Bytes, VirtualVramMovesWhatTheNodeMoves) {
  // --offload-gb 8 is 8e9 bytes = 7.45 GiB of virtual VRAM; the cpu's quota is 7.45/64 -> 0.1164 of it.
  Qwen14B q;
  LegacyFlags o;
  o.offload_bytes = 8e9;
  const auto p = place("bytes", q.header, hw::resolve_profile("rtx4090"), o);
  const double quota = 0.1164 * 64.0 * 1073741824.0;
  const double moved = bytes_on(q.header, p, kCpu);
  double embedding = 0;
  for (const auto& t : q.header.tensors)
    if (t.name == "model.embed_tokens") {
      embedding = static_cast<double>(t.bytes);
      EXPECT_EQ(p.device[t.id], 0);  // the orphan: it no longer fits the cpu's remainder
    }
  EXPECT_LE(moved, quota);
  EXPECT_GT(moved, quota - embedding - 178.3e6);
}

TEST(Fraction, AnImpossibleSplitIsACapacityError) {
  Qwen14B q;
  LegacyFlags o;
  o.split = "cuda:0,1.0;cpu,0.0";  // everything on a GPU it does not fit
  EXPECT_THROW(place("fraction", q.header, hw::resolve_profile("rtx4090"), o), CapacityError);
}

TEST(Layers, FirstNLayersOnTheGpu) {
  Qwen14B q;
  LegacyFlags o;
  o.layers = 30;
  const auto p = place("layers", q.header, hw::resolve_profile("rtx4090"), o);
  for (const auto& t : q.header.tensors) {
    if (t.kind != trace::TensorKind::Weight) continue;
    const bool gpu = t.layer < 30 || t.name == "model.embed_tokens";
    EXPECT_EQ(p.device[t.id], gpu ? 0 : kCpu) << t.name;
  }
  o.layers = 41;
  EXPECT_THROW(place("layers", q.header, hw::resolve_profile("rtx4090"), o), InputError);
  o.layers.reset();
  const auto best = place("layers", q.header, hw::resolve_profile("rtx4090"), o);
  EXPECT_GT(bytes_on(q.header, best, 0), bytes_on(q.header, p, 0) - 1);  // at least as many as 30
}

TEST(CpuExecution, MovesWholeLayersAndTheirKvCache) {
  Qwen14B q;
  LegacyFlags o;
  o.split = "cuda:0,80%;cpu,20%";
  o.offload_exec = "cpu";
  const auto p = place("ratio", q.header, hw::resolve_profile("rtx4090"), o);
  std::map<int, std::set<int>> devices_by_layer;
  for (const auto& t : q.header.tensors)
    if (t.kind != trace::TensorKind::Activation) devices_by_layer[t.layer].insert(p.device[t.id]);
  int cpu_layers = 0;
  for (const auto& [layer, devs] : devices_by_layer) {
    EXPECT_EQ(devs.size(), 1u) << "layer " << layer << " is split";
    if (devs.count(kCpu)) ++cpu_layers;
  }
  EXPECT_GT(cpu_layers, 4);
}

TEST(PeerDonor, NeedsAProfileWithThatGpu) {
  Qwen14B q;
  LegacyFlags o;
  o.split = "cuda:0,70%;cuda:1,30%";
  // A device the machine lacks is bad input naming the split, not a model that does not fit.
  EXPECT_THROW(place("ratio", q.header, hw::resolve_profile("rtx4090"), o), InputError);
  EXPECT_NO_THROW(place("ratio", q.header, hw::resolve_profile("rtx3090x2-nvlink"), o));
}

}  // namespace
}  // namespace tiersim::strategy

namespace tiersim::strategy {
namespace {

TEST(UnifiedMemory, UmCpuKeepsVramNearActivationsOnly) {
  auto config = model::load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen3-14b.json");
  model::GenerationOptions g;
  g.prompt_tokens = 64;
  g.decode_tokens = 4;
  model::LlmTraceGenerator gen(config, g);
  const auto hw = hw::resolve_profile("rtx4090");
  const auto p = place("um-cpu", gen.header(), hw);
  const auto r = replay::run_event_engine({hw, runtime::resolve_runtime(runtime::kDefaultRuntime)}, p, gen);
  double kv_and_act = 0;
  for (const auto& t : gen.header().tensors)
    if (t.kind != trace::TensorKind::Weight) kv_and_act += static_cast<double>(t.bytes);
  // Reserve + KV cache + activations, rounded up to 2 MiB blocks (one per tensor at most).
  EXPECT_LE(r.peak_bytes.at("cuda:0"), hw.gpu.reserved + kv_and_act + gen.header().tensors.size() * 2.0 * 1048576);
  EXPECT_GT(r.steps.back().remote_read_bytes, 0.9 * placement::weight_bytes(gen.header()) - 1.6e9);
}

TEST(UnifiedMemory, NeedsTheProfilesManagedMemorySection) {
  Qwen14B q;
  std::string yaml = testing::toy_profile_yaml();
  const auto hw = hw::parse_profile(yaml, "no-um.yaml");
  try {
    place("um", q.header, hw);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), "managed_memory");
  }
  LegacyFlags o;
  o.allocator = "per-tensor";
  EXPECT_THROW(place("ratio", q.header, hw::resolve_profile("rtx4090"), o), InputError);
  o.allocator = "bump";
  EXPECT_THROW(place("um", q.header, hw::resolve_profile("rtx4090"), o), InputError);
}

}  // namespace
}  // namespace tiersim::strategy

namespace tiersim::strategy {
namespace {

TEST(SplitUnits, OneMeaningPerUnitAndDisTorchsOwnSuffixesStayBinary) {
  using policies::parse_split;
  using policies::SplitMode;
  EXPECT_DOUBLE_EQ(parse_split("cuda:0,20GiB;cpu,*", SplitMode::Bytes)[0].value, 20.0 * 1073741824.0);
  EXPECT_DOUBLE_EQ(parse_split("cuda:0,20GB;cpu,*", SplitMode::Bytes)[0].value, 20e9);
  EXPECT_DOUBLE_EQ(parse_split("cuda:0,20gb;cpu,*", SplitMode::Bytes)[0].value, 20.0 * 1073741824.0);
  EXPECT_DOUBLE_EQ(parse_split("cuda:0,2.5g;cpu,*", SplitMode::Bytes)[0].value, 2.5 * 1073741824.0);
  EXPECT_DOUBLE_EQ(parse_split("cuda:0,512MiB;cpu,*", SplitMode::Bytes)[0].value, 512.0 * 1048576.0);
  EXPECT_THROW(parse_split("cuda:0,20Gib;cpu,*", SplitMode::Bytes), InputError);
}

}  // namespace
}  // namespace tiersim::strategy

namespace tiersim::strategy {
namespace {

TEST(Accelerate, AutoOffloadsWhatAccelerateOffloadsOnA24GiBCard) {
  // accelerate: one GPU, no max_memory -> 0.9 x free memory; the largest layer not yet placed (the
  // 1.45 GiB LM head) held back on cuda:0; decoder layers never split. Qwen3-14B on an RTX 4090
  // (23.4 GiB free): 29 of 40 decoder layers on the GPU, the other 11, the final norm and the LM head on
  // the cpu (issue 11's reading of accelerate; the fixtures computed by accelerate itself are in
  // tests/fixtures/accelerate when present).
  Qwen14B q;
  const auto p = place("accelerate", q.header, hw::resolve_profile("rtx4090"));
  std::set<int> cpu_layers;
  for (const auto& t : q.header.tensors) {
    if (t.kind != trace::TensorKind::Weight) continue;
    if (p.device[t.id] == kCpu) cpu_layers.insert(t.layer);
    if (t.name == "lm_head" || t.name == "model.norm") {
      EXPECT_EQ(p.device[t.id], kCpu) << t.name;
    }
    if (t.name == "model.embed_tokens") {
      EXPECT_EQ(p.device[t.id], 0);
    }
  }
  EXPECT_EQ(cpu_layers.size(), 12u);  // layers 29..39 and the head's group (40)
  EXPECT_EQ(*cpu_layers.begin(), 29);
  // Copied per forward, synchronously, from pageable memory, as AlignDevicesHook does.
  EXPECT_EQ(p.copy.host_memory, placement::HostMemory::Pageable);
  EXPECT_TRUE(p.copy.sync);
}

TEST(DeviceMap, AnExplicitHfDeviceMapPlacesByTheLongestModulePrefix) {
  Qwen14B q;
  const std::string path = std::string(TIERSIM_BINARY_DIR) + "/device-map-test.json";
  {
    std::ofstream f(path);
    f << R"({"model.embed_tokens": 0, "model.layers": 0, "model.layers.39": "cpu", "model.norm": "cuda:0", "lm_head": "cpu"})";
  }
  StrategySpec spec;
  spec.placement = PartSpec::parse("device_map:file=" + path, "--placement");
  const auto p = compose(q.header, hw::resolve_profile("h100-sxm"), spec);
  for (const auto& t : q.header.tensors) {
    if (t.kind != trace::TensorKind::Weight) continue;
    const bool cpu = t.layer == 39 || t.name == "lm_head";
    EXPECT_EQ(p.device[t.id], cpu ? kCpu : 0) << t.name;
  }
  {
    std::ofstream f(path);
    f << R"({"model.layers": 0, "lm_head": "disk"})";
  }
  EXPECT_THROW(compose(q.header, hw::resolve_profile("h100-sxm"), spec), InputError);
  {
    std::ofstream f(path);
    f << R"({"model.layers": 0})";
  }
  EXPECT_THROW(compose(q.header, hw::resolve_profile("h100-sxm"), spec), InputError);  // embed_tokens uncovered
  std::remove(path.c_str());
}

TEST(Accelerate, SequentialHasNoNinetyPercentAndMaxMemoryIsTheUsers) {
  Qwen14B q;
  const auto hw = hw::resolve_profile("rtx4090");
  auto count_gpu_layers = [&](const placement::Placement& p) {
    std::set<int> gpu;
    for (const auto& t : q.header.tensors)
      if (t.kind == trace::TensorKind::Weight && p.device[t.id] == 0 && t.layer >= 0 && t.layer < 40) gpu.insert(t.layer);
    return gpu.size();
  };
  StrategySpec seq = preset_spec("accelerate");
  seq.placement = PartSpec::parse("accelerate.sequential", "--placement");
  const auto sequential = compose(q.header, hw, seq);
  EXPECT_GT(count_gpu_layers(sequential), 29u);
  StrategySpec capped = preset_spec("accelerate");
  capped.placement = PartSpec::parse("accelerate.auto:max_memory=0=12GiB;cpu=64GiB", "--placement");
  const auto small = compose(q.header, hw, capped);
  EXPECT_LT(count_gpu_layers(small), 17u);  // 12 GiB less the 1.45 GiB head held back, the embedding
}

}  // namespace
}  // namespace tiersim::strategy
