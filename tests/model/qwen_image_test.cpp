// Qwen-Image: its published diffusers config, the parameter count, ComfyUI's own load list, the forwards of one
// iteration (the negative prompt as a second forward unless its length is the prompt's), and the errors a bad config
// or option gets.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "model/model_family.hpp"
#include "model/qwen_image/qwen_image_trace_generator.hpp"
#include "support/run_sim.hpp"

namespace tiersim::model {
namespace {

std::string model_path() { return std::string(TIERSIM_SOURCE_DIR) + "/traces/models/qwen-image.json"; }

GenerationOptions image(double cfg, std::uint32_t text, std::uint32_t negative) {
  GenerationOptions o;
  o.image = default_image(ModelFamily::QwenImage);
  o.image.cfg = cfg;
  o.image.text_tokens = text;
  o.image.negative_tokens = negative;
  o.image.steps = 2;
  return o;
}

TEST(QwenImage, ParameterCountMatchesComfyUIsModel) {
  // "a 20B MMDiT" (Qwen/Qwen-Image model card); ComfyUI's QwenImageTransformer2DModel built from the same defaults
  // has 20,430,401,088 (experiments/frameworks/qwen_image_fixtures.py), 40.86 GB in bf16.
  const QwenImageConfig c = load_qwen_image_config(model_path());
  EXPECT_EQ(c.total_params(), 20430401088u);
  EXPECT_EQ(c.hidden(), 3072u);
  EXPECT_EQ(model_family(model_path()), ModelFamily::QwenImage);
  const auto d = default_image(ModelFamily::QwenImage);  // ComfyUI's example workflow
  EXPECT_EQ(d.width, 1328u);
  EXPECT_EQ(d.steps, 20u);
  EXPECT_DOUBLE_EQ(d.cfg, 2.5);
  EXPECT_EQ(d.negative_tokens, 5u);
}

// tests/fixtures/qwen_image_modules.jsonl: ComfyUI's own model on the meta device and its model patcher's
// _load_list. The trace's weights are the load list's modules with parameters, in order, with ComfyUI's bytes.
TEST(QwenImage, TensorsAreComfyUIsLoadList) {
  std::ifstream in(std::string(TIERSIM_SOURCE_DIR) + "/tests/fixtures/qwen_image_modules.jsonl");
  ASSERT_TRUE(in);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  const auto row = nlohmann::json::parse(line);
  QwenImageTraceGenerator g(load_qwen_image_config(model_path()), image(2.5, 100, 5));
  std::vector<std::pair<std::string, std::uint64_t>> ours, comfy;
  for (const auto& t : g.header().tensors)
    if (t.kind == trace::TensorKind::Weight) ours.emplace_back(t.name, t.bytes);
  for (const auto& m : row["modules"])
    if (m[1].get<std::uint64_t>() > 0)
      comfy.emplace_back(m[0].get<std::string>(), m[1].get<std::uint64_t>() * m[2].get<std::uint64_t>());
  EXPECT_EQ(ours.size(), 1087u);
  EXPECT_EQ(ours, comfy);
}

// Reads of each weight in one iteration, and the attention's FLOPs.
struct Iteration {
  std::map<std::uint32_t, int> reads;
  std::uint64_t attention_flops = 0;
  std::uint32_t tokens = 0;
};
Iteration iterate(const GenerationOptions& o) {
  QwenImageTraceGenerator g(load_qwen_image_config(model_path()), o);
  trace::Step s;
  EXPECT_TRUE(g.next(s));
  Iteration it;
  it.tokens = s.tokens;
  for (const auto& op : s.ops) {
    if (op.kind == trace::OpKind::Attention) it.attention_flops += op.flops;
    for (const auto& r : op.reads)
      if (g.header().tensors[r.tensor].kind == trace::TensorKind::Weight) ++it.reads[r.tensor];
  }
  return it;
}

TEST(QwenImage, TheNegativePromptRunsAsASecondForwardUnlessItsLengthIsThePrompts) {
  // 1328x1328: 83 x 83 = 6,889 latent tokens.
  EXPECT_EQ(qwen_image_tokens(image(2.5, 100, 5).image), 6889u);
  const Iteration two = iterate(image(2.5, 100, 5)), one = iterate(image(1.0, 100, 5)),
                  batched = iterate(image(2.5, 100, 100));
  for (const auto& [t, n] : two.reads) EXPECT_EQ(n, 2 * one.reads.at(t)) << t;  // every weight, twice
  for (const auto& [t, n] : batched.reads) EXPECT_EQ(n, one.reads.at(t)) << t;  // once, batch 2
  const std::uint64_t per = 60ull * 4 * 24 * 128;  // blocks x (QK^T and PV: 2 x 2 FLOPs) x heads x head_dim
  EXPECT_EQ(one.attention_flops, per * 6989 * 6989);
  EXPECT_EQ(two.attention_flops, per * (6989ull * 6989 + 6894ull * 6894));
  EXPECT_EQ(batched.attention_flops, 2 * per * 6989 * 6989);
  EXPECT_EQ(two.tokens, 6989u + 6894u);
}

// Qwen-Image-Edit (ComfyUI's ReferenceLatent): the reference's tokens join the image stream in every block, norm_out
// and proj_out, and are cut off before the unpacking.
TEST(QwenImage, AReferenceImageRunsBesideTheImageThroughEveryBlock) {
  GenerationOptions edit = image(1.0, 100, 5);
  edit.image.reference_width = edit.image.reference_height = 1024;  // 64 x 64 = 4096 tokens
  const Iteration one = iterate(image(1.0, 100, 5)), with = iterate(edit);
  const std::uint64_t per = 60ull * 4 * 24 * 128;
  EXPECT_EQ(with.attention_flops, per * (6989 + 4096) * (6989 + 4096));
  EXPECT_EQ(with.tokens, 6989u + 4096u);
  for (const auto& [t, n] : with.reads) EXPECT_EQ(n, one.reads.at(t)) << t;  // the same weights, once each
}

TEST(QwenImage, RefusesWhatItCannotModelNamingTheKey) {
  const QwenImageConfig m = load_qwen_image_config(model_path());
  auto key_of = [&](const GenerationOptions& o) {
    try {
      QwenImageTraceGenerator g(m, o);
    } catch (const InputError& e) {
      return e.key();
    }
    return std::string("no error");
  };
  auto fp16 = image(2.5, 100, 5);
  fp16.dtype = WeightDtype::Fp16;  // ComfyUI runs Qwen-Image in bf16 or fp32 only
  EXPECT_EQ(key_of(fp16), "--dtype");
  EXPECT_EQ(key_of(image(2.5, 100, 0)), "--negative-tokens");
  EXPECT_EQ(key_of(image(1.0, 100, 0)), "no error");  // no negative prompt runs at cfg 1
  auto video = image(2.5, 100, 5);
  video.image.frames = 5;
  EXPECT_EQ(key_of(video), "--frames");
  const std::string base = R"("_class_name":"QwenImageTransformer2DModel","attention_head_dim":128,)"
                           R"("num_attention_heads":24,"num_layers":60,"in_channels":64,"joint_attention_dim":3584)";
  EXPECT_EQ(parse_qwen_image_config("{" + base + "}", "q.json").total_params(), 20430401088u);  // out_channels 16
  auto key_of_config = [&](const std::string& extra) {
    try {
      parse_qwen_image_config("{" + base + extra + "}", "q.json");
    } catch (const InputError& e) {
      return e.key();
    }
    return std::string("no error");
  };
  EXPECT_EQ(key_of_config(R"(,"guidance_embeds":true)"), "guidance_embeds");
  EXPECT_EQ(key_of_config(R"(,"patch_size":1)"), "patch_size");
  EXPECT_EQ(key_of_config(R"(,"out_channels":32)"), "in_channels");
  EXPECT_EQ(key_of_config(R"(,"axes_dims_rope":[16,56,54])"), "axes_dims_rope");
  EXPECT_EQ(key_of_config(R"(,"zero_cond_t":true)"), "zero_cond_t");  // Qwen-Image-Edit-2511: not modelled
  // --negative-tokens is refused for a model whose encoder pads both prompts to one length.
  const auto flux = testing::run_sim("--model traces/models/flux.1-dev.json --negative-tokens 8 --policy resident");
  EXPECT_EQ(flux.code, 2);
  EXPECT_NE(flux.out.find("'--negative-tokens'"), std::string::npos) << flux.out;
  // A re-run's settings get the same checks, named by the result's key.
  const auto ok = testing::run_sim("--model traces/models/qwen-image.json --resolution 256x256 --steps 1 --hw h100-sxm "
                                   "--policy resident --json", false);
  ASSERT_EQ(ok.code, 0) << ok.out;
  std::string edited = ok.out;
  const std::string five = "\"negative_tokens\": 5";
  ASSERT_NE(edited.find(five), std::string::npos) << ok.out;
  edited.replace(edited.find(five), five.size(), "\"negative_tokens\": 5000");
  const auto bad = testing::run_sim("run --config " + testing::scratch_file("qwen_negative.json", edited));
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("'inputs.trace.negative_tokens'"), std::string::npos) << bad.out;
}

// DisTorch's casts are per forward: with the negative prompt as a second forward, every offloaded byte crosses the
// link twice per iteration.
TEST(QwenImage, OffloadedWeightsAreCopiedOncePerForward) {
  auto h2d = [](const std::string& extra) {
    const auto r = testing::run_sim("--model traces/models/qwen-image.json --dtype fp8 --resolution 512x512 --steps 1 "
                                    "--hw rtx4090 --policy bytes --offload-gb 8 --json " + extra, false);
    EXPECT_EQ(r.code, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out);
    return j["h2d_bytes_per_step"].get<double>();
  };
  const double once = h2d("--cfg 1"), twice = h2d(""), batched = h2d("--negative-tokens 100");
  EXPECT_GT(once, 7e9);
  EXPECT_NEAR(twice, 2 * once, 1e-6 * once);
  EXPECT_NEAR(batched, once, 1e-6 * once);
}

}  // namespace
}  // namespace tiersim::model
