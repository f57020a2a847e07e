// llama.cpp's --fit (policies/placement_rules/llamacpp_fit.cpp) and its memory projection, against
// llama.cpp itself: tools/fit-params run on the random-weight GGUF files of the validation models
// (experiments/llamacpp/run_on_gpu.sh fit-fixtures, llama.cpp 34af94cd9 on the H100; raw output in
// results/validation/llamacpp/raw/fit*.jsonl), and against hand-worked cases of common/fit.cpp's steps.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "core/error.hpp"
#include "hardware/profile_loader.hpp"
#include "model/model_config.hpp"
#include "model/trace_generator.hpp"
#include "policies/placement_rules/llamacpp_fit.hpp"
#include "policies/strategy/part_spec.hpp"
#include "policies/strategy/strategy.hpp"

namespace tiersim::strategy {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// A fixture's model ("qwen3-4b-Q4_K_M") as tiersim generates it: traces/models/<name>.json at that type.
std::unique_ptr<model::LlmTraceGenerator> generate(const std::string& file_stem, std::uint32_t ubatch = 512) {
  const std::size_t cut = file_stem.rfind(file_stem.find("Q4_K_M") != std::string::npos ? "-Q4_K_M" : "-Q8_0");
  const auto config =
      model::load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/" + file_stem.substr(0, cut) + ".json");
  model::GenerationOptions g;
  model::set_dtype(g, file_stem.substr(cut + 1));
  g.prompt_tokens = 8;
  g.decode_tokens = 1;
  g.ubatch = ubatch;
  return std::make_unique<model::LlmTraceGenerator>(config, g);
}

// The MoE file of the llama.cpp validation (experiments/llamacpp/models/qwen3-30b-a3b-L24.json) in Q4_K_M.
std::unique_ptr<model::LlmTraceGenerator> generate_moe(std::uint32_t ubatch = 512) {
  const auto config =
      model::load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/experiments/llamacpp/models/qwen3-30b-a3b-L24.json");
  model::GenerationOptions g;
  model::set_dtype(g, "Q4_K_M");
  g.prompt_tokens = 8;
  g.decode_tokens = 1;
  g.ubatch = ubatch;
  return std::make_unique<model::LlmTraceGenerator>(config, g);
}

// The placement's resolved lines for llamacpp.ngl:OPTIONS on one GPU with `free_mib` free.
placement::Placement place(const trace::Header& header, const std::string& options, double free_mib) {
  auto hw = hw::resolve_profile("h100-measured");
  hw.gpu.memory = free_mib * kMiB;
  hw.gpu.reserved = 0;
  StrategySpec spec;
  spec.placement = PartSpec::parse("llamacpp.ngl:" + options, "--placement");
  spec.offload = PartSpec::parse("execute:op-offload=32", "--offload");
  spec.custom = true;
  return compose(header, hw, spec);
}

std::string resolved(const placement::Placement& p, const std::string& key) {
  for (const auto& [k, v] : p.resolved)
    if (k == key) return v;
  return "";
}

std::vector<nlohmann::json> fixture(const std::string& name) {
  std::ifstream in(std::string(TIERSIM_SOURCE_DIR) + "/tests/fixtures/" + name);
  std::vector<nlohmann::json> rows;
  std::string line;
  while (std::getline(in, line)) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

// llama-fit-params --fit-print rows against tiersim's projection of the same -ngl, -c and -ub: model and context to the
// MiB in every row (checked here); the rows whose compute differs by more than 1 MiB, with llama.cpp's excess.
std::vector<std::pair<nlohmann::json, double>> compute_differences(
    const std::vector<nlohmann::json>& rows, const std::function<std::unique_ptr<model::LlmTraceGenerator>(const nlohmann::json&)>& gen_of) {
  const std::regex pattern(R"((\d+) MiB = model (\d+) \+ context (\d+) \+ compute (\d+))");
  std::vector<std::pair<nlohmann::json, double>> off;
  for (const auto& r : rows) {
    const auto gen = gen_of(r);
    const auto p = place(gen->header(), "ngl=" + std::to_string(r["ngl"].get<int>()) + ",ctx=" + std::to_string(r["ctx"].get<int>()),
                         80000);
    const std::string line = resolved(p, "--fit projection CUDA0");
    std::smatch m;
    EXPECT_TRUE(std::regex_search(line, m, pattern)) << line;
    if (m.empty()) continue;
    const auto& want = r["mib"]["CUDA0"];
    EXPECT_NEAR(std::stod(m[2]), want["model"].get<double>(), 1) << r.dump();
    EXPECT_NEAR(std::stod(m[3]), want["context"].get<double>(), 1) << r.dump();
    const double excess = want["compute"].get<double>() - std::stod(m[4]);
    if (std::abs(excess) > 1) off.emplace_back(r, excess);
  }
  return off;
}

// llama-fit-params -fitt MARGIN on a GPU with FREE MiB free: the -c and -ngl it prints, for five files
// and twelve budgets each (context reduced, layers filled, or nothing to do).
TEST(LlamaCppFit, ChoosesTheContextAndLayersLlamaCppsOwnFitChooses) {
  const auto rows = fixture("llamacpp_fit.jsonl");
  ASSERT_EQ(rows.size(), 60u);
  std::map<std::string, std::unique_ptr<model::LlmTraceGenerator>> models;
  for (const auto& r : rows) {
    const std::string name = r["model"];
    if (!models.count(name)) models[name] = generate(name);
    ASSERT_EQ(r["status"], 0) << r.dump();
    const auto p = place(models[name]->header(), "fit-target=" + std::to_string(r["margin_mib"].get<int>()),
                         r["free_mib"].get<double>());
    const std::string line = resolved(p, "--fit");
    EXPECT_NE(line.find("would print: " + r["args"].get<std::string>() + " ("), std::string::npos)
        << name << " budget " << r["budget_mib"] << ": " << line;
  }
}

// The same on the MoE file (Qwen3-30B-A3B's first 24 layers, Q4_K_M; tests/fixtures/llamacpp_fit_moe.jsonl): where the
// model fits at some context of at least 4096, llama.cpp's fit is the dense one's steps 1 and 2 (5 budgets); below
// that it fills dense-only layers (every expert tensor in system memory), makes them whole front to back and keeps
// part of one more layer (7 budgets): the same -c, -ngl and -ot patterns, character for character.
TEST(LlamaCppFit, AMixtureOfExpertsGetsTheContextLayersAndOverridesLlamaCppsOwnFitChooses) {
  const auto rows = fixture("llamacpp_fit_moe.jsonl");
  ASSERT_EQ(rows.size(), 12u);
  const auto gen = generate_moe();
  int context_rows = 0, expert_rows = 0;
  for (const auto& r : rows) {
    ASSERT_EQ(r["status"], 0) << r.dump();
    const auto p = place(gen->header(), "fit-target=" + std::to_string(r["margin_mib"].get<int>()), r["free_mib"].get<double>());
    const std::string line = resolved(p, "--fit"), args = r["args"];
    EXPECT_NE(line.find("would print: " + args + " ("), std::string::npos) << r["budget_mib"] << ": " << line;
    ++(args.find(" -ot ") != std::string::npos ? expert_rows : context_rows);
  }
  EXPECT_EQ(context_rows, 5);
  EXPECT_EQ(expert_rows, 7);
}

// llama-fit-params --fit-print: llama.cpp's projection of the GPU's model, context and compute buffers
// (MiB, floored) at -ngl x -c x -ub. Model and context agree to the MiB in every row; compute in all but
// five: llama.cpp projects 82 MiB more for Llama-3.1-8B Q4_K_M with the output layer on the GPU alone or
// no layer at all at -ub 512 (not at -ub 256, not for Q8_0: a graph-allocation detail not modelled), and
// 5 MiB more for one Qwen3-4B Q8_0 row at -c 16384.
TEST(LlamaCppFit, ProjectsTheMemoryLlamaCppProjects) {
  const auto rows = fixture("llamacpp_fit_print.jsonl");
  ASSERT_EQ(rows.size(), 75u);
  const auto off = compute_differences(rows, [](const nlohmann::json& r) {
    return generate(r["model"].get<std::string>(), r["ubatch"].get<std::uint32_t>());
  });
  EXPECT_EQ(off.size(), 5u);
  for (const auto& [r, excess] : off) {
    EXPECT_LE(excess, 83) << r.dump();
    EXPECT_GE(excess, 0) << r.dump();
  }
}

// The same projection on the MoE file (tests/fixtures/llamacpp_fit_print_moe.jsonl, -ngl 0, 1, 12, 24, 25): model and
// context to the MiB in all 15 rows, compute in 12; with the layers split between the CPU and the GPU at -ub 256
// llama.cpp projects 194 MiB of compute where tiersim has the logits' 150 (3 rows; not modelled).
TEST(LlamaCppFit, ProjectsTheMemoryLlamaCppProjectsForAMixtureOfExperts) {
  const auto rows = fixture("llamacpp_fit_print_moe.jsonl");
  ASSERT_EQ(rows.size(), 15u);
  const auto off = compute_differences(rows, [](const nlohmann::json& r) { return generate_moe(r["ubatch"].get<std::uint32_t>()); });
  EXPECT_EQ(off.size(), 3u);
  for (const auto& [r, excess] : off) {
    EXPECT_EQ(r["ubatch"], 256) << r.dump();
    EXPECT_NEAR(excess, 44, 1) << r.dump();
  }
}

// common/fit.cpp's steps on a made-up projection: 10 layers + output, 100 MiB per slot, 10 MiB of KV per
// layer per 1024 tokens, 50 MiB of compute on a GPU with any slot.
llamacpp::Projector toy(int gpus) {
  return [gpus](const llamacpp::Assignment& a, std::uint32_t n_ctx) {
    std::vector<llamacpp::DeviceProjection> out(static_cast<std::size_t>(gpus));
    const int slots = 11, ngl = std::min(a.ngl, slots);
    std::vector<double> share(static_cast<std::size_t>(gpus), 1.0);
    if (!a.tensor_split.empty()) share = a.tensor_split;
    double sum = 0;
    for (double s : share) sum += s;
    int given = 0;
    for (int d = 0; d < gpus; ++d) {
      const int n = sum <= 0         ? 0
                    : d + 1 == gpus ? ngl - given
                                    : static_cast<int>(ngl * share[static_cast<std::size_t>(d)] / sum);
      given += n;
      auto& p = out[static_cast<std::size_t>(d)];
      p.model = static_cast<std::int64_t>(n) * 100 * (1 << 20);
      p.context = static_cast<std::int64_t>(n) * 10 * (1 << 20) * n_ctx / 1024;
      p.compute = n > 0 ? 50 << 20 : 0;
    }
    return out;
  };
}

llamacpp::FitRequest request(int gpus, std::int64_t free_mib) {
  llamacpp::FitRequest rq;
  rq.n_layer = 10;
  rq.n_ctx_train = 32768;
  for (int d = 0; d < gpus; ++d) {
    rq.free.push_back(free_mib << 20);
    rq.margin.push_back(std::int64_t{1024} << 20);
  }
  return rq;
}

TEST(LlamaCppFitSteps, NothingChangesWhenTheMarginIsKept) {
  // 11 slots: 1100 + 11 x 320 (KV at 32768) + 50 = 4670 MiB; 5700 free leaves 1030 >= 1024.
  const auto r = llamacpp::fit(request(1, 5700), toy(1));
  EXPECT_TRUE(r.success);
  EXPECT_EQ(r.n_ctx, 0u);
  EXPECT_FALSE(r.ngl);
}

TEST(LlamaCppFitSteps, AUserContextStandsWhenNothingChanges) {
  // -c 8192: 1100 + 11 x 80 + 50 = 2030 MiB, 5700 free. Until 2026-11-24 the fit returned here with no context, and a
  // run allocated the training context's KV cache (32768 tokens) in place of the user's.
  auto rq = request(1, 5700);
  rq.n_ctx = 8192;
  const auto r = llamacpp::fit(rq, toy(1));
  EXPECT_TRUE(r.success);
  EXPECT_EQ(r.n_ctx, 8192u);
}

TEST(LlamaCppFitSteps, AMixtureOfExpertsFitsByItsContextAsADenseModelDoes) {
  auto rq = request(1, 4024);
  rq.moe = true;
  const auto r = llamacpp::fit(rq, toy(1));
  EXPECT_TRUE(r.success);
  EXPECT_EQ(r.n_ctx, 17152u);
  EXPECT_FALSE(r.ngl);
  EXPECT_TRUE(r.overrides.empty());
}

TEST(LlamaCppFitSteps, TheContextIsInterpolatedAndRoundedDownTo256) {
  // Target 3000 MiB: at 4096 tokens 1100 + 440 + 50 = 1590; at 32768, 4670. 4096 + 28672 x 1410 / 3080
  // = 17221.8 -> 17152.
  const auto r = llamacpp::fit(request(1, 4024), toy(1));
  EXPECT_TRUE(r.success);
  EXPECT_EQ(r.n_ctx, 17152u);
  EXPECT_FALSE(r.ngl);
}

TEST(LlamaCppFitSteps, LayersAreFilledWhenEvenTheMinimumContextDoesNotFit) {
  // Target 1000 MiB at 4096 tokens: n slots use 140 n + 50, so 6 slots (890) fit and 7 (1030) do not.
  const auto r = llamacpp::fit(request(1, 2024), toy(1));
  EXPECT_TRUE(r.success);
  EXPECT_EQ(r.n_ctx, 4096u);
  ASSERT_TRUE(r.ngl);
  EXPECT_EQ(*r.ngl, 6);
}

TEST(LlamaCppFitSteps, AUserSetNglOrOverrideEndsTheFitAfterTheContextStep) {
  auto rq = request(1, 2024);
  rq.ngl = 11;
  auto r = llamacpp::fit(rq, toy(1));
  EXPECT_FALSE(r.success);
  EXPECT_EQ(r.n_ctx, 4096u);
  EXPECT_FALSE(r.ngl);
  rq = request(1, 2024);
  rq.n_ctx = 8192;  // -c given: kept
  rq.overrides_given = true;
  r = llamacpp::fit(rq, toy(1));
  EXPECT_FALSE(r.success);
  EXPECT_EQ(r.n_ctx, 8192u);
}

TEST(LlamaCppFitSteps, SeveralGpusAreFilledFromTheLast) {
  // Two GPUs, 1000 MiB usable each. The context step (conservative on several GPUs) sets 5888 tokens, a
  // slot 157.5 MiB: the last GPU takes 6 slots (995 MiB), the first the other 5.
  const auto r = llamacpp::fit(request(2, 2024), toy(2));
  EXPECT_TRUE(r.success);
  EXPECT_EQ(r.n_ctx, 5888u);
  ASSERT_TRUE(r.ngl);
  EXPECT_EQ(*r.ngl, 11);
  ASSERT_EQ(r.tensor_split.size(), 2u);
  EXPECT_EQ(r.tensor_split[1], 6);
  EXPECT_EQ(r.tensor_split[0], 5);
}

TEST(LlamaCppFitSteps, ContextsArePaddedTo256) {
  EXPECT_EQ(llamacpp::padded_context(0, 40960), 40960u);
  EXPECT_EQ(llamacpp::padded_context(640, 40960), 768u);
  EXPECT_EQ(llamacpp::padded_context(4097, 40960), 4352u);
}

TEST(LlamaCppFit, ATraceWithoutTheModelsSizesIsPlacedWithoutFittingAndSaysSo) {
  auto gen = generate("qwen3-4b-Q4_K_M");
  trace::Header h = gen->header();
  h.meta.erase("vocab_size");
  const auto p = place(h, "ngl=10", 80000);
  EXPECT_NE(resolved(p, "--fit").find("not applied: the trace has no 'vocab_size' meta"), std::string::npos);
  h.meta["vocab_size"] = "many";
  try {
    place(h, "ngl=10", 80000);
    FAIL() << "a non-numeric vocab_size was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), "vocab_size");
  }
  // Off: no projection at all.
  EXPECT_EQ(resolved(place(gen->header(), "fit=off", 80000), "--fit"), "");
}

// llama.cpp allocates the KV cache of its whole context when it loads: the placement counts that (576 MiB
// for Qwen3-4B at -c 4096, as --fit-print says), not the run's 9 tokens; a run longer than -c is refused.
TEST(LlamaCppFit, TheKvCacheCountedIsTheWholeContext) {
  const auto gen = generate("qwen3-4b-Q4_K_M");
  const auto p = place(gen->header(), "fit=off,ctx=4096", 80000);
  EXPECT_NEAR(placement::usage_on(gen->header(), p, placement::kComputeGpu).kv / kMiB, 576.0, 1e-6);
  EXPECT_NE(resolved(p, "-c").find("4096 tokens of KV cache allocated (the run uses 9)"), std::string::npos);
  // -c 0: the training context (40960), as llama-cli without --fit.
  const auto train = place(gen->header(), "fit=off", 80000);
  EXPECT_NEAR(placement::usage_on(gen->header(), train, placement::kComputeGpu).kv / kMiB, 5760.0, 1e-6);
  try {
    place(gen->header(), "fit=off,ctx=8", 80000);  // padded to 256: still fits 9 tokens
  } catch (const InputError& e) {
    ADD_FAILURE() << e.what();
  }
  model::GenerationOptions g;
  model::set_dtype(g, "Q4_K_M");
  g.prompt_tokens = 300;
  g.decode_tokens = 1;
  const model::LlmTraceGenerator longer(
      model::load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen3-4b.json"), g);
  try {
    place(longer.header(), "fit=off,ctx=8", 80000);
    ADD_FAILURE() << "301 tokens in a 256-token context were accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), "ctx");
  }
}

TEST(LlamaCppFit, BadOptionsNameTheirKey) {
  const auto gen = generate("qwen3-4b-Q4_K_M");
  for (const auto& [options, key] : std::vector<std::pair<std::string, std::string>>{
           {"fit=maybe", "fit"}, {"fit-target=1g", "fit-target"}, {"fit-target=//", "fit-target"},
           {"ctx=-1", "ctx"}, {"fit-ctx=0", "fit-ctx"}}) {
    try {
      place(gen->header(), options, 80000);
      ADD_FAILURE() << options << " was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("option '" + key + "'"), std::string::npos) << options << ": " << e.what();
    }
  }
}

// On several GPUs the fit's -ts is the layers per GPU, and llama.cpp's float split points give each GPU
// exactly that many slots (in double precision a boundary slot can fall to the GPU before).
TEST(LlamaCppFit, OnTwoGpusEachGetsTheSlotsItsPrintedSplitSays) {
  const auto config = model::load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/llama-3.1-70b.json");
  model::GenerationOptions g;
  model::set_dtype(g, "Q4_K_M");
  g.prompt_tokens = 8;
  g.decode_tokens = 1;
  const model::LlmTraceGenerator gen(config, g);
  const std::regex ts(R"(-ts (\d+),(\d+))");
  int checked = 0;
  for (const int margin : {4361, 4652, 7659, 9000, 12000}) {
    StrategySpec spec;
    spec.placement = PartSpec::parse("llamacpp.ngl:fit-target=" + std::to_string(margin), "--placement");
    spec.offload = PartSpec::parse("execute:op-offload=32", "--offload");
    spec.custom = true;
    const auto p = compose(gen.header(), hw::resolve_profile("rtx3090x2-pcie"), spec);
    const std::string line = resolved(p, "--fit");
    std::smatch m;
    if (!std::regex_search(line, m, ts)) continue;
    std::vector<int> slots(2, 0);
    std::set<std::int32_t> seen;
    for (const auto& t : gen.header().tensors)
      if (t.kind == trace::TensorKind::Weight && t.layer >= 0 && p.device[t.id] >= 0 && seen.insert(t.layer).second)
        ++slots[static_cast<std::size_t>(p.device[t.id])];
    EXPECT_EQ(slots[0], std::stoi(m[1])) << margin << ": " << line;
    EXPECT_EQ(slots[1], std::stoi(m[2])) << margin << ": " << line;
    ++checked;
  }
  EXPECT_GE(checked, 4);
}

TEST(LlamaCppFit, FitTargetListsAreLlamaCppsOneForAllOrOneEachTheRest1024) {
  const auto gen = generate("qwen3-4b-Q4_K_M");
  auto two = [&](const std::string& options) {
    StrategySpec spec;
    spec.placement = PartSpec::parse("llamacpp.ngl:" + options, "--placement");
    spec.offload = PartSpec::parse("execute:op-offload=32", "--offload");
    spec.custom = true;
    return resolved(compose(gen->header(), hw::resolve_profile("rtx3090x2-pcie"), spec), "--fit");
  };
  EXPECT_NE(two("fit-target=2048").find("margin 2048,2048 MiB by GPU"), std::string::npos) << two("fit-target=2048");
  EXPECT_NE(two("fit-target=2048//512").find("margin 2048,512 MiB"), std::string::npos);  // runs of separators
  EXPECT_NE(two("fit-target=1024/2048").find("margin 1024,2048 MiB"), std::string::npos);
  EXPECT_THROW(two("fit-target=1/2/3"), InputError);
}

TEST(LlamaCppFit, ATensorOutsideTheModelsLayersIsRefused) {
  auto gen = generate("qwen3-4b-Q4_K_M");
  for (const std::int32_t layer : {-7, 36, 5000}) {
    trace::Header h = gen->header();
    for (auto& t : h.tensors)
      if (t.kind == trace::TensorKind::KvCache) {
        t.layer = layer;
        break;
      }
    try {
      place(h, "ngl=10", 80000);
      ADD_FAILURE() << "a KV cache at layer " << layer << " was accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.key(), "tensor") << e.what();
    }
  }
}

}  // namespace
}  // namespace tiersim::strategy
