// A two-expert model's sampling in ComfyUI (Wan 2.2 A14B: two KSamplerAdvanced nodes, one expert each): the loads and
// unloads ComfyUI's model management makes between the nodes, and the command.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "pipeline/expert_job.hpp"
#include "support/run_sim.hpp"

namespace tiersim::pipeline {
namespace {

constexpr double GB = 1e9;

hw::HostLinkSpec flat_link(double rate) {
  hw::HostLinkSpec l;
  l.h2d_pageable.bandwidth = l.d2h_pageable.bandwidth = rate;
  return l;
}

// Wan 2.2 A14B's experts in fp8 (14.3 GB each), 832x480 x 81 frames: model_base.memory_required 12.66 GB at the
// batch doubled, 6.33 GB at the batch (WAN21_T2V's memory_usage_factor 5120 / 2222).
ExpertJobSpec a14b(double free, double expert = 14.3 * GB) {
  ExpertJobSpec s;
  s.free_bytes = free;
  s.expert_bytes = expert;
  s.high_steps = 10;
  s.low_steps = 10;
  s.sampling_memory = 12.66 * GB;
  s.sampling_minimum = 6.33 * GB;
  s.iteration_seconds = [](double) { return 30.0; };
  return s;
}

TEST(ExpertJob, On80GbBothExpertsStayAndTheNextVideoMovesNothing) {
  const ExpertJob j = comfy_expert_job(a14b(79 * GB), flat_link(20 * GB));
  EXPECT_DOUBLE_EQ(j.high_loaded, 14.3 * GB);
  EXPECT_DOUBLE_EQ(j.low_loaded, 14.3 * GB);
  EXPECT_DOUBLE_EQ(j.first.h2d_bytes(), 2 * 14.3 * GB);
  EXPECT_DOUBLE_EQ(j.first.d2h_bytes(), 0);
  EXPECT_DOUBLE_EQ(j.next.h2d_bytes(), 0);
  EXPECT_DOUBLE_EQ(j.next.d2h_bytes(), 0);
  EXPECT_NEAR(j.next.seconds(), 20 * 30.0, 1e-9);
  EXPECT_NEAR(j.first.seconds() - j.next.seconds(), 2 * 14.3 / 20, 1e-9);
}

TEST(ExpertJob, OnA24GbCardEachNodeEvictsTheOtherExpert) {
  // 14.3 GB + 1.1 x 14.3 GB and the sampling estimate do not fit in 24: the low-noise node unloads the high-noise
  // expert whole (ComfyUI's free_memory: the other model, by what is still missing), and the next video's first node
  // the low-noise one.
  const ExpertJob j = comfy_expert_job(a14b(23.4 * GB), flat_link(20 * GB));
  EXPECT_DOUBLE_EQ(j.high_loaded, 14.3 * GB);
  EXPECT_DOUBLE_EQ(j.first.low.d2h_bytes, 14.3 * GB);
  EXPECT_DOUBLE_EQ(j.first.low.h2d_bytes, 14.3 * GB);
  EXPECT_DOUBLE_EQ(j.next.high.d2h_bytes, 14.3 * GB);
  EXPECT_DOUBLE_EQ(j.next.h2d_bytes(), 2 * 14.3 * GB);
  EXPECT_DOUBLE_EQ(j.next.d2h_bytes(), 2 * 14.3 * GB);
  EXPECT_NEAR(j.next.transfer_seconds(), 4 * 14.3 / 20, 1e-9);
}

// An unload is a copy into fresh host memory (the move allocates it): at the profile's d2h_fresh_pageable where it has
// one, at d2h_pageable otherwise.
TEST(ExpertJob, UnloadsRunAtTheFreshPageableRateWhereMeasured) {
  hw::HostLinkSpec link = flat_link(20 * GB);
  const double plain = comfy_expert_job(a14b(23.4 * GB), link).next.transfer_seconds();
  link.d2h_fresh_pageable = hw::TransferCurve{};
  link.d2h_fresh_pageable->bandwidth = 1.4 * GB;
  const ExpertJob j = comfy_expert_job(a14b(23.4 * GB), link);
  EXPECT_NEAR(j.next.transfer_seconds(), 2 * 14.3 / 20 + 2 * 14.3 / 1.4, 1e-9);  // loads at 20 GB/s, unloads at 1.4
  EXPECT_GT(j.next.transfer_seconds(), 5 * plain);
}

TEST(ExpertJob, IterationsArePricedOncePerLoadBudget) {
  ExpertJobSpec s = a14b(23.4 * GB, 28.6 * GB);  // bf16: each expert loads partly
  int calls = 0;
  s.iteration_seconds = [&](double budget) {
    ++calls;
    return budget / GB;
  };
  const ExpertJob j = comfy_expert_job(s, flat_link(20 * GB));
  EXPECT_LT(j.high_loaded, 28.6 * GB);
  EXPECT_GT(j.high_loaded, 0);
  EXPECT_EQ(calls, 1);  // every node loads its expert from the same free memory: one engine run
  EXPECT_NEAR(j.first.high.compute_seconds, 10 * j.first.high.budget_free / GB, 1e-9);
  EXPECT_DOUBLE_EQ(j.first.low.compute_seconds, j.next.low.compute_seconds);
}

// ComfyUI a125cd84's own load_models_gpu and ModelPatcher, run unchanged on stand-ins of Wan 2.2 A14B's two fp8 experts
// (tiersim's own tensors) through two videos' KSamplerAdvanced nodes at five free-VRAM sizes
// (experiments/frameworks/comfyui_job_fixtures.py --wan-experts -> tests/fixtures/comfyui_expert_job.jsonl): after every
// node each expert's bytes on the GPU agree with tiersim's job within one leaf (ComfyUI moves whole leaves), with the
// same decisions (none, part, whole).
TEST(ExpertJob, AgreesWithComfyUIsOwnCodeNodeByNode) {
  std::ifstream in(std::string(TIERSIM_SOURCE_DIR) + "/tests/fixtures/comfyui_expert_job.jsonl");
  ASSERT_TRUE(in.good());
  const double leaf = 5120.0 * 13824 + 2 * 13824;  // the largest: a block's ffn.0 in fp8 with its bf16 bias
  std::string line;
  std::size_t cases = 0, calls = 0;
  while (std::getline(in, line)) {
    const auto c = nlohmann::json::parse(line);
    const double expert = c["models"]["high"].get<double>();
    ASSERT_EQ(expert, c["models"]["low"].get<double>());
    const auto& nodes = c["calls"];
    ASSERT_EQ(nodes.size(), 4u);
    ExpertJobSpec s;
    s.free_bytes = c["free"].get<double>();
    s.expert_bytes = expert;
    s.high_steps = s.low_steps = 1;
    s.sampling_memory = nodes[0]["memory_required"].get<double>();
    s.sampling_minimum = nodes[0]["minimum_memory_required"].get<double>();
    s.iteration_seconds = [](double) { return 1.0; };
    const ExpertJob j = comfy_expert_job(s, flat_link(20 * GB));
    // What each node leaves on the GPU: the job's moves, replayed.
    std::map<std::string, double> loaded{{"high-noise expert", 0}, {"low-noise expert", 0}};
    const StageCost* stages[] = {&j.first.high, &j.first.low, &j.next.high, &j.next.low};
    for (std::size_t k = 0; k < 4; ++k) {
      for (const ModelMove& m : stages[k]->moves) loaded[m.model] += m.h2d - m.d2h;
      for (const auto& [name, key] : {std::pair<std::string, const char*>{"high-noise expert", "high"}, {"low-noise expert", "low"}}) {
        const double comfy = nodes[k]["loaded"][key].get<double>();
        const std::string where = std::to_string(s.free_bytes) + " free, node " + std::to_string(k) + ", " + key;
        EXPECT_LE(std::abs(loaded[name] - comfy), leaf + 1) << where;
        EXPECT_EQ(loaded[name] == 0, comfy == 0) << where;
        EXPECT_EQ(loaded[name] == expert, comfy == expert) << where;
      }
      ++calls;
    }
    EXPECT_NEAR(j.high_loaded, nodes[0]["loaded"]["high"].get<double>(), leaf + 1);
    EXPECT_NEAR(j.low_loaded, nodes[1]["loaded"]["low"].get<double>(), leaf + 1);
    ++cases;
  }
  EXPECT_EQ(cases, 5u);
  EXPECT_EQ(calls, 20u);
}

// The video job (sim run --video-job): ComfyUI a125cd84's own load_models_gpu through a Wan video's CLIPTextEncode
// (umT5-XXL fp16, memory_required 0), its sampler node(s) and its VAEDecode (memory_used_decode, no minimum), two videos
// of one prompt, five free-VRAM sizes, for Wan 2.2 A14B's two fp8 experts and for Wan 2.1 14B fp8
// (experiments/frameworks/comfyui_job_fixtures.py --wan-video -> tests/fixtures/comfyui_video_job.jsonl): after every
// node each model's bytes on the GPU agree within one of its leaves.
TEST(ExpertJob, TheVideoJobAgreesWithComfyUIsOwnCodeNodeByNode) {
  std::ifstream in(std::string(TIERSIM_SOURCE_DIR) + "/tests/fixtures/comfyui_video_job.jsonl");
  ASSERT_TRUE(in.good());
  const double expert_leaf = 5120.0 * 13824 + 2 * 13824;  // a block's ffn.0 in fp8 with its bf16 bias
  const double te_leaf = 256384.0 * 4096 * 2;              // umT5's shared embedding in fp16
  std::string line;
  std::size_t cases = 0, calls = 0;
  while (std::getline(in, line)) {
    const auto c = nlohmann::json::parse(line);
    const bool two = c["model"] == "wan2.2-t2v-a14b";
    const std::string dit_key = two ? "high" : "dit";
    const auto& nodes = c["calls"];
    ASSERT_EQ(nodes.size(), two ? 7u : 5u);
    ExpertJobSpec s;
    s.free_bytes = c["free"].get<double>();
    s.expert_bytes = c["models"][dit_key].get<double>();
    s.two_experts = two;
    if (!two) s.high_name = "diffusion model";
    s.high_steps = 1;
    s.low_steps = two ? 1 : 0;
    s.sampling_memory = nodes[1]["memory_required"].get<double>();
    s.sampling_minimum = nodes[1]["minimum_memory_required"].get<double>();
    s.iteration_seconds = [](double) { return 1.0; };
    s.vae_bytes = c["models"]["vae"].get<double>();
    s.vae_memory = nodes[two ? 3 : 2]["memory_required"].get<double>();
    s.vae_seconds = [](double) { return 2.0; };
    s.text_encoder_bytes = c["models"]["te"].get<double>();
    s.text_seconds = [](double) { return 0.5; };
    const ExpertJob j = comfy_expert_job(s, flat_link(20 * GB));
    std::map<std::string, double> loaded;
    std::vector<const StageCost*> stages{&j.first.text, &j.first.high};
    if (two) stages.push_back(&j.first.low);
    stages.push_back(&j.first.vae);
    stages.push_back(&j.next.high);
    if (two) stages.push_back(&j.next.low);
    stages.push_back(&j.next.vae);
    std::vector<std::tuple<std::string, std::string, double>> models{
        {two ? "high-noise expert" : "diffusion model", dit_key, expert_leaf}, {"VAE", "vae", 0}, {"text encoder", "te", te_leaf}};
    if (two) models.push_back({"low-noise expert", "low", expert_leaf});
    for (std::size_t k = 0; k < stages.size(); ++k) {
      for (const ModelMove& m : stages[k]->moves) loaded[m.model] += m.h2d - m.d2h;
      for (const auto& [name, key, leaf] : models) {
        const double comfy = nodes[k]["loaded"][key].get<double>();
        const std::string where = c["model"].get<std::string>() + ", " + std::to_string(s.free_bytes) + " free, node " +
                                  std::to_string(k) + ", " + key;
        EXPECT_LE(std::abs(loaded[name] - comfy), leaf + 1) << where;
        EXPECT_EQ(loaded[name] == 0, comfy == 0) << where;
      }
      ++calls;
    }
    EXPECT_TRUE(j.first.text.ran);
    EXPECT_FALSE(j.next.text.ran);  // the same prompt: ComfyUI's cache skips CLIPTextEncode
    EXPECT_DOUBLE_EQ(j.first.vae.compute_seconds, 2.0);
    EXPECT_DOUBLE_EQ(j.first.seconds() - j.first.transfer_seconds(), 0.5 + (two ? 2.0 : 1.0) + 2.0);
    ++cases;
  }
  EXPECT_EQ(cases, 10u);
  EXPECT_EQ(calls, 60u);
}

// The command: a one-model Wan video's sampler node and VAE decode, in the console and in JSON; a FLUX model and Wan 2.2
// TI2V-5B (the Wan 2.2 VAE) are refused, and --video-job with --sampler-job.
TEST(ExpertJob, TheVideoJobCommand) {
  const std::string wan = "--model traces/models/wan2.1-t2v-1.3b.json --resolution 480x320 --frames 9 --steps 2 ";
  const auto r = testing::run_sim(wan + "--hw rtx4090 --policy resident --video-job --json", false);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  const auto& job = j["video_job"];
  EXPECT_EQ(job["steps"], 2);
  // the run's trace names its components: the diffusion transformer's weights, all on the GPU here
  EXPECT_EQ(j["components"]["dit"]["weight_bytes"], j["components"]["dit"]["weights_on"]["cuda:0"]);
  EXPECT_GT(j["components"]["dit"]["weight_bytes"].get<double>(), 2.5e9);
  EXPECT_GT(job["vae_bytes"].get<double>(), 2.5e8);
  EXPECT_DOUBLE_EQ(job["vae_memory_required"].get<double>(), 7000.0 * 40 * 60 * 64 * 2);
  EXPECT_GT(job["first_video"]["vae_decode"]["compute_seconds"].get<double>(), 0);
  EXPECT_GT(job["text_encoder_bytes"].get<double>(), 1.1e10);  // umT5-XXL in fp16
  EXPECT_GT(job["first_video"]["text_encode"]["compute_seconds"].get<double>(), 0);
  EXPECT_FALSE(job["next_video"]["text_encode"]["ran"].get<bool>());
  EXPECT_NEAR(job["first_video"]["seconds"].get<double>(),
              job["first_video"]["text_encode"]["compute_seconds"].get<double>() +
                  job["first_video"]["text_encode"]["transfer_seconds"].get<double>() +
                  job["first_video"]["sampler"]["compute_seconds"].get<double>() +
                  job["first_video"]["sampler"]["transfer_seconds"].get<double>() +
                  job["first_video"]["vae_decode"]["compute_seconds"].get<double>() +
                  job["first_video"]["vae_decode"]["transfer_seconds"].get<double>(),
              1e-9);
  const auto console = testing::run_sim(wan + "--hw rtx4090 --policy resident --video-job");
  EXPECT_NE(console.out.find("VAE decode"), std::string::npos) << console.out;
  EXPECT_NE(console.out.find("s/video"), std::string::npos);
  const auto flux = testing::run_sim("--model traces/models/flux.1-dev.json --steps 1 --policy resident --video-job");
  EXPECT_EQ(flux.code, 2);
  EXPECT_NE(flux.out.find("--video-job"), std::string::npos);
  const auto five = testing::run_sim("--model traces/models/wan2.2-ti2v-5b.json --steps 1 --policy resident --video-job");
  EXPECT_EQ(five.code, 2);
  EXPECT_NE(five.out.find("Wan 2.2 VAE"), std::string::npos) << five.out;
  const auto both = testing::run_sim(wan + "--policy resident --video-job --sampler-job");
  EXPECT_EQ(both.code, 2);
  const auto batch = testing::run_sim(wan + "--policy resident --video-job --batch 2");  // one video at a time
  EXPECT_EQ(batch.code, 2);
  EXPECT_NE(batch.out.find("--batch"), std::string::npos) << batch.out;
}

TEST(ExpertJob, TheCommandReportsSecondsPerVideoForTwoExpertModelsOnly) {
  const std::string a14b = "--model traces/models/wan2.2-t2v-a14b.json --resolution 480x320 --frames 9 --steps 4 --cfg 3.5 ";
  const auto r = testing::run_sim(a14b + "--dtype fp8 --hw rtx4090 --policy resident --sampler-job --json", false);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  const auto& job = j["sampler_job"];
  EXPECT_EQ(job["high_noise_steps"], 2);
  EXPECT_EQ(job["low_noise_steps"], 2);
  EXPECT_EQ(j["inputs"]["sampler_job"], true);
  // The two fp8 experts (14.3 GB each) do not fit a 24 GB card together: every node unloads part of the other one
  // (ComfyUI's free_memory takes what is missing: 1.1 x the expert and the small video's estimate).
  const double expert = job["expert_bytes"].get<double>();
  EXPECT_GT(job["next_video"]["low_noise_sampler"]["d2h_bytes"].get<double>(), 1e9);
  EXPECT_LT(job["next_video"]["low_noise_sampler"]["d2h_bytes"].get<double>(), expert);
  EXPECT_EQ(job["low_noise_loaded_bytes"].get<double>(), expert);
  EXPECT_GT(job["next_video"]["seconds"].get<double>(), 4 * job["first_video"]["high_noise_sampler"]["compute_seconds"].get<double>() / 2);
  // The result re-runs from its inputs to the same bytes.
  const std::string saved = testing::scratch_file("sampler_job_result.json", r.out);
  const auto again = testing::run_sim("run --config " + saved, false);
  EXPECT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(again.out, r.out);
  // The switch moves steps from one node to the other.
  const auto late = nlohmann::json::parse(
      testing::run_sim(a14b + "--dtype fp8 --hw rtx4090 --policy resident --sampler-job --switch-step 3 --json", false).out);
  EXPECT_EQ(late["sampler_job"]["high_noise_steps"], 3);
  EXPECT_EQ(late["sampler_job"]["low_noise_steps"], 1);
  // Refusals: one transformer, a switch outside the steps, a language model.
  const auto one = testing::run_sim("--model traces/models/wan2.1-t2v-1.3b.json --steps 2 --policy resident --sampler-job");
  EXPECT_EQ(one.code, 2) << one.out;
  EXPECT_NE(one.out.find("two experts"), std::string::npos) << one.out;
  const auto switch_one = testing::run_sim("--model traces/models/wan2.1-t2v-1.3b.json --steps 2 --policy resident --switch-step 1");
  EXPECT_EQ(switch_one.code, 2) << switch_one.out;
  EXPECT_NE(switch_one.out.find("--switch-step"), std::string::npos) << switch_one.out;
  const auto outside = testing::run_sim(a14b + "--dtype fp8 --policy resident --switch-step 4");
  EXPECT_EQ(outside.code, 2) << outside.out;
  EXPECT_NE(outside.out.find("from 1 to 3"), std::string::npos) << outside.out;
  const auto llm = testing::run_sim("--model traces/models/qwen3-0.6b.json --policy resident --switch-step 2");
  EXPECT_EQ(llm.code, 2) << llm.out;
}

}  // namespace
}  // namespace tiersim::pipeline
