// ComfyUI's sampler as tiersim runs a guided diffusion model: the positive and negative prompt share a batch only
// when ComfyUI's memory estimate for the two, x 1.5, is below the GPU's free memory (comfy/samplers.py
// _calc_cond_batch), and a model ComfyUI loads itself (comfy.lowvram) keeps the sampler's estimate free.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "model/model_family.hpp"
#include "model/wan/wan_trace_generator.hpp"
#include "support/run_sim.hpp"

namespace tiersim::model {
namespace {

TEST(ComfySampler, TheEstimateIsComfyUIsMemoryRequiredPerPrompt) {
  // Wan 14B at 832x480 x 81 frames: latent 1 x 16 x 21 x 60 x 104 -> area 131,040; bf16; memory_usage_factor
  // 5120 / 2222: 131040 x 2 x 0.01 x 2.3042 x 2^20 bytes.
  GenerationOptions o;
  o.image = default_image(ModelFamily::Wan);
  o.image.steps = 1;
  const WanTraceGenerator wan(load_wan_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/wan2.1-t2v-14b.json"), o);
  EXPECT_NEAR(std::stod(wan.header().meta.at("comfy_memory_per_cond")), 131040.0 * 2 * 0.01 * (5120.0 / 2222) * 1048576, 1);
}

// Apart, an iteration is two forwards of the batch: the same arithmetic, twice the weight reads.
TEST(ComfySampler, APromptApartIsASecondForwardOfTheSameArithmetic) {
  for (const char* name : {"wan2.1-t2v-1.3b", "flux.1-dev"}) {
    const std::string path = std::string(TIERSIM_SOURCE_DIR) + "/traces/models/" + name + ".json";
    GenerationOptions o;
    o.image = default_image(model_family(path));
    o.image.steps = 1;
    o.image.cfg = 4;
    o.image.width = 512;
    o.image.height = 512;
    if (o.image.frames > 1) o.image.frames = 9;
    auto totals = [&](bool apart) {
      o.image.cfg_separate = apart;
      auto g = generate_trace(path, o);
      trace::Step step;
      EXPECT_TRUE(g->next(step));
      std::uint64_t flops = 0, attention = 0;
      for (const auto& op : step.ops) {
        flops += op.flops;
        attention += op.kind == trace::OpKind::Attention;
      }
      return std::pair{flops, attention};
    };
    const auto together = totals(false), apart = totals(true);
    // The same up to what each forward computes once whatever its batch (the rotary table).
    EXPECT_NEAR(static_cast<double>(apart.first), static_cast<double>(together.first), 1e-6 * together.first) << name;
    EXPECT_GE(apart.first, together.first) << name;
    EXPECT_EQ(apart.second, 2 * together.second) << name;
  }
}

TEST(ComfySampler, ThePromptsShareABatchOnlyWhenComfyUIsEstimateFits) {
  const std::string wan = "--model traces/models/wan2.1-t2v-14b.json --dtype fp8 --steps 1 --policy resident ";
  // On an 80 GB H100 the two prompts share one forward.
  const auto big = testing::run_sim_json(wan + "--hw h100-measured");
  EXPECT_EQ(big["trace"]["cfg_forwards"], 1);
  EXPECT_FALSE(big["trace"].contains("comfy_cond_batch"));
  // On a 24 GB card 14.3 GB of fp8 weights leave about 10 GB free, less than 1.5 x the 12.66 GB ComfyUI estimates for
  // the two: one forward after the other, each with half the activations.
  const auto small = testing::run_sim_json(wan + "--hw rtx4090");
  EXPECT_EQ(small["trace"]["cfg_forwards"], 2);
  const double estimate = small["trace"]["comfy_cond_batch"]["estimate_bytes"].get<double>();
  const double free = small["trace"]["comfy_cond_batch"]["free_bytes"].get<double>();
  EXPECT_GE(1.5 * estimate, free);
  EXPECT_NEAR(estimate, 2 * 131040.0 * 2 * 0.01 * (5120.0 / 2222) * 1048576, 2);
  // The same card told it has 48 GB: the rule flips at 1.5 x the estimate.
  const auto roomy = testing::run_sim_json(wan + "--hw rtx4090 --set 'gpu.memory=48 GiB'");
  EXPECT_EQ(roomy["trace"]["cfg_forwards"], 1);
  // Apart, the iteration does the same arithmetic in two forwards; its activations peak lower.
  const auto batched_peak = testing::run_sim_json(wan + "--hw rtx4090 --set 'gpu.memory=48 GiB'")["vram_peak_bytes"].get<double>();
  EXPECT_LT(small["vram_peak_bytes"].get<double>(), batched_peak);
  // cfg 1 runs one prompt: nothing to batch.
  const auto unguided = testing::run_sim_json(wan + "--hw rtx4090 --cfg 1");
  EXPECT_FALSE(unguided["trace"].contains("cfg_forwards"));
  // The console says why.
  const auto text = testing::run_sim(wan + "--hw rtx4090", false);
  EXPECT_NE(text.out.find("negative prompt as a second forward: ComfyUI batches the two only when 1.5 x its estimate"),
            std::string::npos) << text.out;
  // A result re-runs to the same bytes (the decision is made again from the same inputs).
  const auto saved = testing::run_sim(wan + "--hw rtx4090 --json", false);
  const auto again = testing::run_sim("run --config " + testing::scratch_file("cond_batch_result.json", saved.out), false);
  EXPECT_EQ(again.out, saved.out);
}

TEST(ComfySampler, QwenImagesEqualLengthPromptsFollowTheSameRule) {
  const std::string q = "--model traces/models/qwen-image.json --dtype fp8 --steps 1 --negative-tokens 100 --policy resident ";
  EXPECT_EQ(testing::run_sim_json(q + "--hw h100-measured")["trace"]["cfg_forwards"], 1);
  const auto small = testing::run_sim_json(q + "--hw rtx4090 --resolution 2048x2048");
  EXPECT_EQ(small["trace"]["cfg_forwards"], 2);
  EXPECT_TRUE(small["trace"].contains("comfy_cond_batch"));
  // Unequal lengths never share a batch (CONDRegular), whatever the memory.
  const auto apart = testing::run_sim_json("--model traces/models/qwen-image.json --dtype fp8 --steps 1 --policy resident --hw h100-measured");
  EXPECT_EQ(apart["trace"]["cfg_forwards"], 2);
  EXPECT_FALSE(apart["trace"].contains("comfy_cond_batch"));
}

TEST(ComfySampler, ComfyUIsOwnLoadKeepsTheSamplersEstimateFree) {
  // FLUX.1-dev (22.17 GiB) on a 24 GB card: with the sampler's minimum (one prompt at 1024x1024, 1015.8 MiB) and
  // the 400 MiB reserve kept free, 22.02 GiB of weights load: a little is cast per forward.
  const auto r = testing::run_sim("--model traces/models/flux.1-dev.json --steps 1 --hw rtx4090 --policy comfyui", false);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("22.02 GiB for weights of 23.40 GiB free VRAM (reserve 400.0 MiB, the sampler's estimate 1015.8 MiB)"),
            std::string::npos) << r.out;
  // A given memory-required wins over the sampler's (a text encoder's 0).
  const auto given = testing::run_sim("--model traces/models/flux.1-dev.json --steps 1 --hw rtx4090 --placement "
                                      "'comfy.lowvram:memory-required=0B' --memory device --offload copy:host=pageable", false);
  ASSERT_EQ(given.code, 0) << given.out;
  EXPECT_NE(given.out.find("22.21 GiB for weights of 23.40 GiB free VRAM (reserve 400.0 MiB): the model loads whole"),
            std::string::npos) << given.out;
  // A language model's trace has no sampler estimate.
  const auto llm = testing::run_sim("--model traces/models/qwen3-8b.json --hw rtx4070 --policy comfyui", false);
  EXPECT_EQ(llm.out.find("sampler's estimate"), std::string::npos) << llm.out;
}

}  // namespace
}  // namespace tiersim::model
