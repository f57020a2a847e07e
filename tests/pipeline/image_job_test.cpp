// ComfyUI's model management between a FLUX job's nodes (a125cd84), against the transfers read from its source in
// experiments/frameworks/comfyui_model_management.md (section 4: the 24 GB and the 80 GB GPU), and the command.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/comfy_budget.hpp"
#include "pipeline/comfy_model_management.hpp"
#include "pipeline/image_job.hpp"
#include "support/run_sim.hpp"

namespace tiersim::pipeline {
namespace {

constexpr double GB = 1e9;
// FLUX.1-dev bf16, t5xxl fp16 + clip_l, ae in bf16; 1024x1024's estimates (model_base.memory_required, 3.1;
// memory_used_decode).
constexpr double kTe = 9.77 * GB, kFlux = 23.80 * GB, kVae = 0.167 * GB;
constexpr double kSampling = 2.130 * GB, kSamplingMin = 1.065 * GB, kDecode = 4.568 * GB;

// lowvram_model_memory, one rule for the placement and the job: free less the requirement (0.8 GiB + 400 MiB at
// least), never below 128 MiB in mid-2025, and 0.1 bytes (offload everything) for a budget of 0 in v0.19.3.
TEST(ComfyBudget, FreeLessTheRequirementWithEachVersionsFloor) {
  const double MiB = 1048576.0, GiB = 1073741824.0;
  const double inference = comfy::minimum_inference(comfy::kReserveLinux);
  EXPECT_DOUBLE_EQ(inference, 0.8 * GiB + 400 * MiB);
  EXPECT_DOUBLE_EQ(comfy::minimum_required(comfy::kReserveLinux, 0), inference);
  EXPECT_DOUBLE_EQ(comfy::minimum_required(comfy::kReserveLinux, 4 * GiB), 4 * GiB + 400 * MiB);
  const double required = comfy::minimum_required(comfy::kReserveLinux, 2 * GiB);
  EXPECT_DOUBLE_EQ(comfy::lowvram_budget(20 * GiB, required, inference, false), 20 * GiB - required);
  EXPECT_DOUBLE_EQ(comfy::lowvram_budget(20 * GiB, required, inference, true), 20 * GiB - required);
  EXPECT_DOUBLE_EQ(comfy::lowvram_budget(1 * GiB, required, inference, true), 128 * MiB);
  EXPECT_DOUBLE_EQ(comfy::lowvram_budget(1 * GiB, required, inference, false), 0.1);
}

TEST(ComfyModelManager, A24GbCardEvictsTheTextEncodersAndLendsFluxToTheVae) {
  ComfyModelManager m(24.5 * GB);
  const auto te = m.add("te", kTe), flux = m.add("flux", kFlux), vae = m.add("vae", kVae);
  auto moves = m.load(te, 0, 0);
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_DOUBLE_EQ(moves[0].h2d, kTe);  // whole: its budget is free - 1.28 GB
  moves = m.load(flux, kSampling, kSamplingMin);
  ASSERT_EQ(moves.size(), 2u);
  EXPECT_EQ(moves[0].model, "te");
  EXPECT_DOUBLE_EQ(moves[0].d2h, kTe);  // the text encoders go whole
  const double streamed = kFlux - m.loaded(flux);
  EXPECT_NEAR(streamed, 25.29 * GB - 24.5 * GB, 0.01 * GB);  // S = max(0, 25.29 GB - F)
  moves = m.load(vae, kDecode, kDecode);
  ASSERT_EQ(moves.size(), 2u);
  EXPECT_EQ(moves[0].model, "flux");
  EXPECT_NEAR(moves[0].d2h, 3.69 * GB, 0.01 * GB);  // FLUX lends 3.69 GB to the decode
  EXPECT_DOUBLE_EQ(moves[1].h2d, kVae);
  // The next image, same prompt: the VAE goes, FLUX's 3.69 GB come back.
  moves = m.load(flux, kSampling, kSamplingMin);
  ASSERT_EQ(moves.size(), 2u);
  EXPECT_DOUBLE_EQ(moves[0].d2h, kVae);
  EXPECT_NEAR(moves[1].h2d, 3.69 * GB, 0.01 * GB);
  EXPECT_NEAR(kFlux - m.loaded(flux), streamed, 1.0);
  // A new prompt: FLUX, the most offloaded, lends ~7.0 GB to the text encoders; the VAE stays.
  (void)m.load(vae, kDecode, kDecode);
  moves = m.load(te, 0, 0);
  ASSERT_EQ(moves.size(), 2u);
  EXPECT_EQ(moves[0].model, "flux");
  EXPECT_NEAR(moves[0].d2h, 7.03 * GB, 0.02 * GB);
  EXPECT_DOUBLE_EQ(m.loaded(vae), kVae);
}

TEST(ComfyModelManager, On80GbEverythingStaysAndNothingMovesAfterTheFirstImage) {
  hw::HostLinkSpec link;
  link.h2d_pageable.bandwidth = link.d2h_pageable.bandwidth = 20 * GB;
  ImageJobSpec s;
  s.free_bytes = 84 * GB;
  s.text_encoder_bytes = kTe;
  s.dit_bytes = kFlux;
  s.vae_bytes = kVae;
  s.text_seconds = 0.07;
  s.iteration_seconds = 0.5;
  s.steps = 28;
  s.vae_seconds = 0.09;
  s.sampling_memory = kSampling;
  s.sampling_minimum = kSamplingMin;
  s.vae_memory = kDecode;
  const ImageJob j = comfy_image_job(s, link);
  EXPECT_DOUBLE_EQ(j.first.h2d_bytes(), kTe + kFlux + kVae);
  EXPECT_DOUBLE_EQ(j.first.d2h_bytes(), 0);
  EXPECT_DOUBLE_EQ(j.dit_loaded, kFlux);
  EXPECT_DOUBLE_EQ(j.same_prompt.h2d_bytes() + j.same_prompt.d2h_bytes(), 0);
  EXPECT_DOUBLE_EQ(j.new_prompt.h2d_bytes() + j.new_prompt.d2h_bytes(), 0);
  EXPECT_FALSE(j.same_prompt.text.ran);  // ComfyUI's execution cache
  EXPECT_NEAR(j.same_prompt.seconds(), 28 * 0.5 + 0.09, 1e-9);
  EXPECT_NEAR(j.new_prompt.seconds(), 0.07 + 28 * 0.5 + 0.09, 1e-9);
  EXPECT_NEAR(j.first.seconds() - j.new_prompt.seconds(), (kTe + kFlux + kVae) / (20 * GB), 1e-6);
}

TEST(ImageJob, TheCommandReportsSecondsPerImageForFlux) {
  const auto r = testing::run_sim("--model traces/models/flux.1-dev.json --resolution 512x512 --steps 2 --hw rtx4090 "
                                  "--policy resident --image-job --json", false);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  const auto& job = j["image_job"];
  EXPECT_GT(job["first_image"]["seconds"].get<double>(), job["next_same_prompt"]["seconds"].get<double>());
  EXPECT_FALSE(job["next_same_prompt"]["text_encoders"]["ran"].get<bool>());
  EXPECT_EQ(j["inputs"]["image_job"]["text_encoder_dtype"], "fp16");
  // The result re-runs from its inputs to the same bytes.
  const std::string saved = testing::scratch_file("image_job_result.json", r.out);
  const auto again = testing::run_sim("run --config " + saved, false);
  EXPECT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(again.out, r.out);
  // A card smaller than the text encoders: ComfyUI loads them partly and casts the rest per call, as tiersim does.
  const auto small = testing::run_sim("--model traces/models/flux.1-dev.json --dtype Q4_K_S --resolution 512x512 --steps 1 "
                                      "--hw rtx4070 --set 'gpu.memory=8 GiB' --policy comfyui --image-job --json", false);
  ASSERT_EQ(small.code, 0) << small.out;
  const auto sj = nlohmann::json::parse(small.out)["image_job"];
  const auto big = nlohmann::json::parse(testing::run_sim("--model traces/models/flux.1-dev.json --dtype Q4_K_S --resolution "
                                                          "512x512 --steps 1 --hw rtx4070 --policy comfyui --image-job --json",
                                                          false).out)["image_job"];
  EXPECT_GT(sj["t5_seconds"].get<double>(), big["t5_seconds"].get<double>() * 1.2);
  const auto wan = testing::run_sim("--model traces/models/wan2.1-t2v-1.3b.json --steps 1 --policy resident --image-job");
  EXPECT_EQ(wan.code, 2) << wan.out;
  EXPECT_NE(wan.out.find("FLUX and Qwen-Image"), std::string::npos) << wan.out;
  const auto lone = testing::run_sim("--model traces/models/flux.1-dev.json --policy resident --text-encoder-dtype fp8");
  EXPECT_EQ(lone.code, 2) << lone.out;
  EXPECT_NE(lone.out.find("goes with --image-job"), std::string::npos) << lone.out;
  const auto bad = testing::run_sim("--model traces/models/flux.1-dev.json --policy resident --image-job --text-encoder-dtype int4");
  EXPECT_EQ(bad.code, 2) << bad.out;
  const std::string elsewhere = testing::scratch_file("flux_alone.json", R"({"_class_name":"FluxTransformer2DModel","attention_head_dim":128,"num_attention_heads":24,"num_layers":19,"num_single_layers":38,"in_channels":64,"joint_attention_dim":4096,"pooled_projection_dim":768,"guidance_embeds":true})");
  const auto missing = testing::run_sim("--model " + elsewhere + " --resolution 512x512 --steps 1 --policy resident --image-job");
  EXPECT_EQ(missing.code, 2) << missing.out;
  EXPECT_NE(missing.out.find("t5-v1_1-xxl.json"), std::string::npos) << missing.out;
}

}  // namespace
}  // namespace tiersim::pipeline

namespace tiersim::pipeline {
namespace {

// Qwen-Image's job: Qwen2.5-VL-7B (its vision tower loaded too) encodes the prompt and, at cfg 2.5, the empty negative
// one, each in ComfyUI's chat template (34 tokens before the prompt); the Wan VAE decodes the one image.
TEST(ImageJob, TheCommandRunsQwenImagesJobWithItsOwnEncoder) {
  const std::string base = "--model traces/models/qwen-image.json --dtype fp8 --resolution 1024x1024 --steps 2 "
                           "--hw h100-sxm --policy resident --image-job --json";
  const auto r = testing::run_sim(base, false);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  const auto& job = j["image_job"];
  EXPECT_EQ(j["inputs"]["image_job"]["text_encoder_dtype"], "fp8_scaled");  // the template's qwen_2.5_vl_7b_fp8_scaled
  EXPECT_EQ(job["text_encoder_bytes"].get<double>(), 8'293'960'856.0);
  EXPECT_EQ(job["vae_bytes"].get<double>(), 2.0 * 126'892'531);
  EXPECT_GT(job["qwen2_5_vl_seconds"].get<double>(), 0);
  EXPECT_FALSE(job.contains("t5_seconds"));
  EXPECT_DOUBLE_EQ(job["first_image"]["text_encoders"]["compute_seconds"].get<double>(), job["qwen2_5_vl_seconds"].get<double>());
  // One prompt at cfg 1: the negative prompt's encode (the template's 39 tokens) is gone.
  const auto one = nlohmann::json::parse(testing::run_sim(base + " --cfg 1", false).out)["image_job"];
  EXPECT_LT(one["qwen2_5_vl_seconds"].get<double>(), job["qwen2_5_vl_seconds"].get<double>());
  // The bf16 file: twice the Linears' bytes, every cast from bf16.
  const auto bf16 = testing::run_sim(base + " --text-encoder-dtype bf16", false);
  ASSERT_EQ(bf16.code, 0) << bf16.out;
  EXPECT_EQ(nlohmann::json::parse(bf16.out)["image_job"]["text_encoder_bytes"].get<double>(), 2.0 * 7'747'169'280);
  // The result re-runs from its inputs to the same bytes.
  const std::string saved = testing::scratch_file("qwen_image_job_result.json", r.out);
  const auto again = testing::run_sim("run --config " + saved, false);
  EXPECT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(again.out, r.out);
  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {" --text-encoder-dtype fp16", "must be fp8_scaled or bf16"},
           {" --batch 2", "one image"},
           {" --reference 512x512", "Qwen-Image-Edit"}}) {
    const auto bad = testing::run_sim(base + args);
    EXPECT_EQ(bad.code, 2) << args << "\n" << bad.out;
    EXPECT_NE(bad.out.find(says), std::string::npos) << args << "\n" << bad.out;
  }
  const std::string elsewhere = testing::scratch_file("qwen_image_alone.json",
      R"({"_class_name":"QwenImageTransformer2DModel","attention_head_dim":128,"num_attention_heads":24,"num_layers":60,"in_channels":64,"joint_attention_dim":3584,"out_channels":16,"patch_size":2})");
  const auto missing = testing::run_sim("--model " + elsewhere + " --resolution 512x512 --steps 1 --hw h100-sxm "
                                        "--policy resident --image-job");
  EXPECT_EQ(missing.code, 2) << missing.out;
  EXPECT_NE(missing.out.find("qwen2.5-vl-7b.json"), std::string::npos) << missing.out;
}

// Replays a fixture of ComfyUI a125cd84's own load_models_gpu and ModelPatcher, run unchanged on stand-ins of a job's
// three models (experiments/frameworks/comfyui_job_fixtures.py) through its nodes at five free-VRAM sizes: after every
// call each model's bytes on the GPU agree with tiersim's manager to within one of the model's leaves (`leaf`: ComfyUI
// moves whole leaves: a partial unload stops past what was asked, a partial load short of the budget), and every
// decision (whole, part, none) is the same. Returns the calls replayed.
std::size_t expect_agrees_with_comfyui(const std::string& fixture, const std::map<std::string, double>& leaf) {
  std::ifstream in(std::string(TIERSIM_SOURCE_DIR) + "/tests/fixtures/" + fixture);
  EXPECT_TRUE(in.good()) << fixture;
  std::string line;
  std::size_t cases = 0, calls = 0;
  while (std::getline(in, line)) {
    const auto c = nlohmann::json::parse(line);
    ComfyModelManager m(c["free"].get<double>());
    std::map<std::string, std::size_t> index;
    for (const auto& [name, bytes] : leaf) index[name] = m.add(name, c["models"][name].get<double>());
    for (const auto& call : c["calls"]) {
      const double mem = call["memory_required"].get<double>();
      const double min = call["minimum_memory_required"].is_null() ? mem : call["minimum_memory_required"].get<double>();
      (void)m.load(index.at(call["model"].get<std::string>()), mem, min);
      for (const auto& [name, i] : index) {
        const double comfy = call["loaded"][name].get<double>(), size = c["models"][name].get<double>();
        const std::string where = fixture + ": " + c["sequence"].get<std::string>() + " at " +
                                  std::to_string(c["free"].get<double>()) + ", call " + std::to_string(calls) + " (" +
                                  call["node"].get<std::string>() + "), " + name;
        EXPECT_LE(std::abs(m.loaded(i) - comfy), leaf.at(name) + 1) << where;
        EXPECT_EQ(m.loaded(i) == 0, comfy == 0) << where;
        EXPECT_EQ(m.loaded(i) == size, comfy == size) << where;
      }
      ++calls;
    }
    ++cases;
  }
  EXPECT_EQ(cases, 10u) << fixture;  // five sizes x two sequences
  return calls;
}

// FLUX's three models (tests/fixtures/comfyui_job.jsonl); the largest leaf of each: T5's shared embedding, FLUX's
// single-block linear1; the VAE always loads whole.
TEST(ComfyModelManager, AgreesWithComfyUIsOwnCodeCallByCall) {
  const std::map<std::string, double> leaf{{"te", 32128.0 * 4096 * 2}, {"flux", 3072.0 * 21504 * 2 + 21504 * 2}, {"vae", 0}};
  EXPECT_EQ(expect_agrees_with_comfyui("comfyui_job.jsonl", leaf), 55u);  // 5 calls for the same prompt, 6 for a new one
}

// FLUX.1 Kontext's job (comfyui_job_fixtures.py --kontext -> tests/fixtures/comfyui_kontext_job.jsonl): the reference
// image's VAEEncode loads the VAE with memory_used_encode after the text encoders, and is cached for the next image.
TEST(ComfyModelManager, AgreesWithComfyUIsOwnCodeOnKontextsJob) {
  const std::map<std::string, double> leaf{{"te", 32128.0 * 4096 * 2}, {"flux", 3072.0 * 21504 * 2 + 21504 * 2}, {"vae", 0}};
  EXPECT_EQ(expect_agrees_with_comfyui("comfyui_kontext_job.jsonl", leaf), 65u);  // 6 calls for the same prompt, 7 new
}

TEST(ImageJob, KontextsJobEncodesTheReferenceOnceAndCachesIt) {
  const auto r = testing::run_sim("--model traces/models/flux.1-dev.json --reference 1024x1024 --resolution 512x512 "
                                  "--steps 1 --hw rtx4090 --policy resident --image-job --json", false);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto job = nlohmann::json::parse(r.out)["image_job"];
  EXPECT_GT(job["vae_encode_seconds"].get<double>(), 0);
  EXPECT_TRUE(job["first_image"]["vae_encode"]["ran"].get<bool>());
  EXPECT_DOUBLE_EQ(job["first_image"]["vae_encode"]["compute_seconds"].get<double>(), job["vae_encode_seconds"].get<double>());
  EXPECT_FALSE(job["next_same_prompt"]["vae_encode"]["ran"].get<bool>());
  EXPECT_FALSE(job["next_new_prompt"]["vae_encode"]["ran"].get<bool>());  // the same reference: cached
  EXPECT_TRUE(job["next_new_prompt"]["text_encoders"]["ran"].get<bool>());
  // Without a reference, no such stage or key.
  const auto plain = nlohmann::json::parse(testing::run_sim("--model traces/models/flux.1-dev.json --resolution 512x512 "
                                                            "--steps 1 --hw rtx4090 --policy resident --image-job --json",
                                                            false).out)["image_job"];
  EXPECT_FALSE(plain.contains("vae_encode_seconds"));
  EXPECT_FALSE(plain["first_image"].contains("vae_encode"));
}

// Qwen-Image's job with the template's files (comfyui_job_fixtures.py --qwen-image ->
// tests/fixtures/comfyui_qwen_image_job.jsonl): Qwen2.5-VL fp8_scaled with its vision tower, Qwen-Image fp8, the Wan
// VAE at 1328x1328, whose decode estimate (24.7 GB) leaves a 24 GB card's VAE partly loaded. The largest leaves: the
// encoder's bf16 embedding, a block's fp8 MLP projection with its bias, the VAE's encoder (one tensor in tiersim's
// trace). The models' bytes are those tiersim's job uses.
TEST(ComfyModelManager, AgreesWithComfyUIsOwnCodeOnQwenImagesJob) {
  const std::map<std::string, double> leaf{
      {"te", 152064.0 * 3584 * 2}, {"dit", 3072.0 * 12288 + 2 * 12288}, {"vae", 107193856.0}};
  EXPECT_EQ(expect_agrees_with_comfyui("comfyui_qwen_image_job.jsonl", leaf), 55u);
  std::ifstream in(std::string(TIERSIM_SOURCE_DIR) + "/tests/fixtures/comfyui_qwen_image_job.jsonl");
  std::string line;
  std::getline(in, line);
  const auto models = nlohmann::json::parse(line)["models"];
  const auto r = testing::run_sim("--model traces/models/qwen-image.json --dtype fp8 --steps 1 --hw h100-sxm "
                                  "--policy resident --image-job --json", false);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto job = nlohmann::json::parse(r.out)["image_job"];
  EXPECT_EQ(job["text_encoder_bytes"].get<double>(), models["te"].get<double>());
  EXPECT_EQ(job["diffusion_model_bytes"].get<double>(), models["dit"].get<double>());
  EXPECT_EQ(job["vae_bytes"].get<double>(), models["vae"].get<double>());
}

}  // namespace
}  // namespace tiersim::pipeline
