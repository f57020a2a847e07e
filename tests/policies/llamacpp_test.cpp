// llama.cpp's -ngl placement (policies/placement_rules/llamacpp_ngl.cpp) against hand-worked cases of the
// formula in llama_model::load_tensors: Qwen3-8B has 36 repeating layers, so 37 slots with the output.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "hardware/profile_loader.hpp"
#include "model/model_config.hpp"
#include "model/trace_generator.hpp"
#include "policies/strategy/part_spec.hpp"
#include "policies/strategy/strategy.hpp"
#include "support/model_headers.hpp"

namespace tiersim::strategy {
namespace {

placement::Placement ngl(const std::string& options, const std::string& hw = "rtx4090") {
  StrategySpec spec;
  spec.placement = PartSpec::parse("llamacpp.ngl" + (options.empty() ? "" : ":" + options), "--placement");
  spec.offload = PartSpec::parse("execute", "--offload");
  spec.custom = true;
  return compose(testing::model_header("qwen3-8b"), hw::resolve_profile(hw), spec);
}

// The device of every decoder layer 0..35 and of the output slot (36), and where the embedding is.
std::vector<placement::DeviceId> slots(const placement::Placement& p, placement::DeviceId* embedding = nullptr) {
  const auto& h = testing::model_header("qwen3-8b");
  std::vector<placement::DeviceId> out(37, -99);
  for (const auto& t : h.tensors) {
    if (t.kind != trace::TensorKind::Weight) continue;
    if (t.layer < 0) {
      if (embedding) *embedding = p.device[t.id];
      continue;
    }
    if (out[t.layer] == -99) out[t.layer] = p.device[t.id];
    EXPECT_EQ(out[t.layer], p.device[t.id]) << t.name << ": a layer is placed whole";
  }
  return out;
}

std::vector<placement::DeviceId> expect(int cpu_until, placement::DeviceId gpu = 0) {
  std::vector<placement::DeviceId> v(37, gpu);
  for (int i = 0; i < cpu_until; ++i) v[i] = placement::kCpu;
  return v;
}

TEST(LlamaCppNgl, TheLastSlotsGoToTheGpuTheOutputFirstAndTheEmbeddingStaysOnTheCpu) {
  using placement::kCpu;
  placement::DeviceId embedding = 0;
  EXPECT_EQ(slots(ngl("ngl=0"), &embedding), expect(37));
  EXPECT_EQ(embedding, kCpu);
  EXPECT_EQ(slots(ngl("ngl=1")), expect(36));            // only the output layer
  EXPECT_EQ(slots(ngl("ngl=10")), expect(27));           // layers 27..35 + output
  EXPECT_EQ(slots(ngl("ngl=37"), &embedding), expect(0));
  EXPECT_EQ(embedding, kCpu);                            // even with everything offloaded
  EXPECT_EQ(slots(ngl("ngl=999")), expect(0));
  EXPECT_EQ(slots(ngl("")), expect(0));                  // default: every layer
  // Before PR #18148 the output layer was the last slot to be offloaded.
  auto old1 = expect(37);
  old1[35] = 0;
  EXPECT_EQ(slots(ngl("ngl=1,output-first=off")), old1);
  auto old10 = expect(26);
  old10[36] = kCpu;
  EXPECT_EQ(slots(ngl("ngl=10,output-first=off")), old10);
  EXPECT_EQ(slots(ngl("ngl=37,output-first=off")), expect(0));
}

TEST(LlamaCppNgl, TensorSplitPutsLayersOnEachGpuByCumulativeProportions) {
  // splits (0.5, 1): slot il on cuda:0 while il/37 < 0.5, i.e. il <= 18; (0.75, 1): il <= 27.
  auto even = expect(0, 1);
  for (int i = 0; i <= 18; ++i) even[i] = 0;
  EXPECT_EQ(slots(ngl("ts=1/1", "rtx3090x2-nvlink")), even);
  EXPECT_EQ(slots(ngl("", "rtx3090x2-nvlink")), even);  // default: equal free memory
  auto three_one = expect(0, 1);
  for (int i = 0; i <= 27; ++i) three_one[i] = 0;
  EXPECT_EQ(slots(ngl("ts=3/1", "rtx3090x2-nvlink")), three_one);
  // Layers on cuda:1 run there (a pipeline), those on the CPU run on the CPU.
  const auto p = ngl("ngl=20,ts=1/1", "rtx3090x2-nvlink");
  EXPECT_TRUE(placement::has_pipeline(p));
}

TEST(LlamaCppNgl, BadOptionsNameTheirKey) {
  for (const std::string bad : {"ngl=-1", "output-first=maybe", "ts=1/x", "ts=0/0"}) {
    try {
      ngl(bad);
      ADD_FAILURE() << bad;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(bad.substr(0, bad.find('='))), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(ngl("ts=1/1/1", "rtx3090x2-nvlink"), InputError);  // three proportions, two GPUs
}

// Fixtures from llama.cpp itself: its loader's "layer N assigned to device D" log for made-up models of 16,
// 32 and 36 layers at several -ngl (experiments/llamacpp/run_on_gpu.sh ngl-fixtures, llama.cpp 34af94cd9 on
// the H100). Slot n_layer is the output layer.
TEST(LlamaCppNgl, EveryLayerIsWhereLlamaCppsOwnLoaderPutIt) {
  std::ifstream in(std::string(TIERSIM_SOURCE_DIR) + "/tests/fixtures/llamacpp_ngl.jsonl");
  ASSERT_TRUE(in);
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    const auto f = nlohmann::json::parse(line);
    const int n_layer = f["n_layer"];
    const int n_gpu = f["ngl"];
    auto config = model::load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen3-4b.json");
    config.num_hidden_layers = static_cast<std::uint64_t>(n_layer);
    model::GenerationOptions g;
    model::set_dtype(g, "F16");
    g.prompt_tokens = 8;
    g.decode_tokens = 1;
    const model::LlmTraceGenerator gen(config, g);
    StrategySpec spec;
    spec.placement = PartSpec::parse("llamacpp.ngl:ngl=" + std::to_string(n_gpu), "--placement");
    spec.offload = PartSpec::parse("execute", "--offload");
    spec.custom = true;
    const auto p = compose(gen.header(), hw::resolve_profile("h100-measured"), spec);
    for (const auto& t : gen.header().tensors) {
      if (t.kind != trace::TensorKind::Weight) continue;
      if (t.layer < 0) {
        EXPECT_EQ(p.device[t.id], placement::kCpu) << "token embedding, " << line;
        continue;
      }
      const std::string want = f["layer_devices"][static_cast<std::size_t>(t.layer)];
      EXPECT_EQ(p.device[t.id], want == "CPU" ? placement::kCpu : 0) << t.name << ", " << line;
    }
    ++cases;
  }
  EXPECT_EQ(cases, 27);
}

// -ot and --no-kv-offload on Qwen3-4B as a Q4_K_M file (llama.cpp's tensor names; 36 layers).
struct Gguf4b {
  model::ModelConfig config = model::load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen3-4b.json");
  std::unique_ptr<model::LlmTraceGenerator> gen;
  Gguf4b() {
    model::GenerationOptions g;
    model::set_dtype(g, "Q4_K_M");
    g.prompt_tokens = 64;
    g.decode_tokens = 1;
    gen = std::make_unique<model::LlmTraceGenerator>(config, g);
  }
  placement::Placement place(const std::string& options) const {
    StrategySpec spec;
    spec.placement = PartSpec::parse("llamacpp.ngl", "--placement");
    if (!options.empty()) spec.placement = PartSpec::parse("llamacpp.ngl:" + options, "--placement");
    spec.offload = PartSpec::parse("execute:op-offload=32", "--offload");
    spec.custom = true;
    return compose(gen->header(), hw::resolve_profile("rtx4090"), spec);
  }
};

TEST(LlamaCppOverrides, TheFirstMatchingPatternPlacesAWeightAndTheKvCacheStaysWithItsLayer) {
  Gguf4b m;
  PartSpec ot = PartSpec::parse("llamacpp.ngl", "--placement");
  StrategySpec spec;
  spec.placement = ot;
  spec.placement.set("ot", "blk\\.0\\.=CUDA0,ffn_(up|down|gate)=CPU", "--override-tensor");
  spec.offload = PartSpec::parse("execute", "--offload");
  spec.custom = true;
  const auto p = compose(m.gen->header(), hw::resolve_profile("rtx4090"), spec);
  int on_cpu = 0;
  for (const auto& t : m.gen->header().tensors) {
    const bool ffn_matrix = t.name.find("ffn_up") != std::string::npos || t.name.find("ffn_down") != std::string::npos ||
                            t.name.find("ffn_gate") != std::string::npos;
    if (t.kind == trace::TensorKind::Weight && t.layer >= 0) {
      const bool expect_cpu = ffn_matrix && t.name.rfind("blk.0.", 0) != 0;  // layer 0 matched CUDA0 first
      EXPECT_EQ(p.device[t.id], expect_cpu ? placement::kCpu : 0) << t.name;
      on_cpu += expect_cpu;
    }
    if (t.kind == trace::TensorKind::KvCache) { EXPECT_EQ(p.device[t.id], 0) << t.name; }
  }
  EXPECT_EQ(on_cpu, 3 * 35);
  EXPECT_TRUE(p.per_tensor);
}

TEST(LlamaCppOverrides, NoKvOffloadPutsEveryKvCacheOnTheCpu) {
  Gguf4b m;
  const auto p = m.place("kv-offload=off");
  for (const auto& t : m.gen->header().tensors) {
    if (t.kind == trace::TensorKind::KvCache) { EXPECT_EQ(p.device[t.id], placement::kCpu) << t.name; }
    if (t.kind == trace::TensorKind::Weight && t.layer >= 0) { EXPECT_EQ(p.device[t.id], 0) << t.name; }
  }
  EXPECT_TRUE(p.execute.kv_copied_in);
}

TEST(LlamaCppOverrides, BadPatternsAndBuffersNameTheOption) {
  Gguf4b m;
  for (const std::string bad : {"ot=ffn_up", "ot=ffn_up=GPU", "ot=ffn_(up=CPU", "ot=ffn=CUDA", "ot=ffn=CUDAx",
                                "kv-offload=maybe"}) {
    try {
      m.place(bad);
      ADD_FAILURE() << bad;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("'" + bad.substr(0, bad.find('=')) + "'"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(m.place("ot=ffn=CUDA1"), InputError);  // one GPU on the rtx4090
  EXPECT_THROW(m.place("ot=ffn=CUDA 0"), InputError);  // ggml's names exactly
  EXPECT_THROW(m.place("ot=ffn=CUDA01"), InputError);
}

}  // namespace
}  // namespace tiersim::strategy
