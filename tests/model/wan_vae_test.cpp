// The Wan 2.1 VAE (and Qwen-Image's, the same network): its published configs, its parameters as ComfyUI's module has
// them, and the decode's trace (comfy/ldm/wan/vae.py WanVAE.decode at a125cd84).
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "core/error.hpp"
#include "model/model_family.hpp"
#include "model/vae/wan_vae_config.hpp"
#include "model/vae/wan_vae_decoder_trace_generator.hpp"
#include "support/run_sim.hpp"
#include "trace/trace_reader.hpp"
#include "trace/trace_writer.hpp"
#include "trace/transient_lifetimes.hpp"

namespace tiersim::model {
namespace {

std::string models(const char* file) { return std::string(TIERSIM_SOURCE_DIR) + "/traces/models/" + file; }

// ComfyUI's WanVAE(dim=96, z_dim=16, ...) counted by the harness on the GPU machine (results/validation/wan-vae/
// wan_vae_decode.jsonl: params, and decoder_param_bytes / 2 for the decoder with conv2).
TEST(WanVae, PublishedConfigsHaveComfyUisParameters) {
  for (const char* file : {"wan2.1-vae.json", "qwen-image-vae.json"}) {
    const WanVaeConfig c = load_wan_vae_config(models(file));
    EXPECT_EQ(c.params(), 126'892'531u) << file;
    EXPECT_EQ(c.decoder_params(), 73'295'603u) << file;
    EXPECT_EQ(model_family(models(file)), ModelFamily::WanVae);
    // Decoder3d's levels: 384 -> 384, 192 -> 384, 192 -> 192, 96 -> 96; time upsampled after levels 0 and 1.
    EXPECT_EQ(c.level_in(0), 384u);
    EXPECT_EQ(c.level_in(1), 192u);
    EXPECT_EQ(c.level_out(1), 384u);
    EXPECT_EQ(c.level_in(3), 96u);
    EXPECT_TRUE(c.temporal_upsample(0));
    EXPECT_TRUE(c.temporal_upsample(1));
    EXPECT_FALSE(c.temporal_upsample(2));
  }
  EXPECT_EQ(WanVaeConfig::video_frames(21), 81u);
}

void expect_config_error(const std::string& text, const std::string& key) {
  try {
    parse_wan_vae_config(text, "vae.json");
    ADD_FAILURE() << "accepted: " << text;
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "vae.json");
    EXPECT_NE(std::string(e.key()).find(key), std::string::npos) << e.what();
  }
}

TEST(WanVae, ConfigsThatChangeTheNetworkAreRefusedByKey) {
  const std::string base = R"("_class_name": "AutoencoderKLWan", "base_dim": 96, "z_dim": 16, "num_res_blocks": 2, )";
  const std::string good = base + R"("dim_mult": [1, 2, 4, 4], "temperal_downsample": [false, true, true])";
  EXPECT_NO_THROW(parse_wan_vae_config("{" + good + R"(, "dropout": 0.0, "attn_scales": [], "clip_output": true})", "v"));
  expect_config_error("{" + good + R"(, "is_residual": true})", "is_residual");  // Wan 2.2's 5B VAE
  expect_config_error("{" + good + R"(, "patch_size": 2})", "patch_size");
  expect_config_error("{" + good + R"(, "attn_scales": [1.0]})", "attn_scales");
  expect_config_error("{" + good + R"(, "out_channels": 4})", "out_channels");
  expect_config_error("{" + good + R"(, "wider": 1, "deeper": 2})", "deeper");  // every unknown field listed at once
  expect_config_error("{" + base + R"("dim_mult": [1, 2, 4], "temperal_downsample": [false, true]})", "dim_mult");
  expect_config_error("{" + base + R"("dim_mult": [1, 2, 4, 4], "temperal_downsample": [false, false, true]})",
                      "temperal_downsample");
  expect_config_error(R"({"_class_name": "AutoencoderKL", "base_dim": 96})", "_class_name");
  // Channels beyond what the trace format's bounds allow at the largest sizes.
  expect_config_error(R"({"_class_name": "AutoencoderKLWan", "base_dim": 4096, "z_dim": 16, "num_res_blocks": 2, )"
                      R"("dim_mult": [1, 2, 4, 8], "temperal_downsample": [false, true, true]})", "dim_mult");
}

std::unique_ptr<WanVaeDecoderTraceGenerator> decode(std::uint32_t width, std::uint32_t height, std::uint32_t frames) {
  return std::make_unique<WanVaeDecoderTraceGenerator>(load_wan_vae_config(models("wan2.1-vae.json")), width, height,
                                                       frames, WeightDtype::Bf16);
}

TEST(WanVaeDecode, OneStepPerLatentFrameAndOptionsChecked) {
  auto gen = decode(832, 480, 81);
  EXPECT_EQ(gen->latent_frames(), 21u);
  trace::Step s;
  std::size_t steps = 0;
  while (gen->next(s)) {
    EXPECT_EQ(s.kind, trace::StepKind::Prefill);
    EXPECT_EQ(s.tokens, 60u * 104u);
    trace::TransientLifetimes lifetimes;
    EXPECT_FALSE(trace::derive_transient_lifetimes(gen->header(), s, lifetimes).has_value());
    ++steps;
  }
  EXPECT_EQ(steps, 21u);
  for (const auto& [w, h, f, key] : {std::tuple{830u, 480u, 81u, "--resolution"}, {832u, 480u, 80u, "--frames"},
                                     {832u, 4u, 1u, "--resolution"}, {832u, 480u, 0u, "--frames"}}) {
    try {
      decode(w, h, f);
      ADD_FAILURE() << w << "x" << h << "x" << f;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.key()), key);
    }
  }
}

// The convolutions' FLOPs of a later call (one latent frame in, four video frames out), summed by hand from
// Decoder3d's modules: each a gemm with its kernel and channels.
TEST(WanVaeDecode, ALaterCallsConvolutionsAreDecoder3dsModules) {
  auto gen = decode(832, 480, 9);
  trace::Step s;
  ASSERT_TRUE(gen->next(s));
  ASSERT_TRUE(gen->next(s));
  ASSERT_TRUE(gen->next(s));  // the third call: the cache holds two frames everywhere
  const std::uint64_t p0 = 60 * 104, p1 = 4 * p0, p2 = 16 * p0, p3 = 64 * p0;
  const std::uint64_t c27 = 2 * 27;
  const std::uint64_t expected =
      c27 * 16 * 384 * p0 + 4 * c27 * 384 * 384 * p0 + 2 * 384 * 1152 * p0 + 2 * 384 * 384 * p0  // conv1, middle
      + 6 * c27 * 384 * 384 * p0 + 2 * 3 * 384 * 768 * p0 + 2 * 9 * 384 * 192 * (4 * p0) * 2      // level 0, upsample
      + (c27 * 192 * 384 + 5 * c27 * 384 * 384 + 2 * 192 * 384) * p1 * 2                          // level 1
      + 2 * 3 * 384 * 768 * p1 * 2 + 2 * 9 * 384 * 192 * (4 * p1) * 4                             // its upsample
      + 6 * c27 * 192 * 192 * p2 * 4 + 2 * 9 * 192 * 96 * (4 * p2) * 4                             // level 2, upsample
      + 6 * c27 * 96 * 96 * p3 * 4 + c27 * 96 * 3 * p3 * 4;                                        // level 3, head
  std::uint64_t flops = 0;
  std::set<std::string> kernels;
  for (const auto& op : s.ops) {
    if (op.kind != trace::OpKind::Gemm) continue;
    ASSERT_FALSE(op.conv.empty());
    kernels.insert(op.conv.kernel_name());
    flops += op.flops;
  }
  EXPECT_EQ(flops, expected);
  EXPECT_EQ(kernels, (std::set<std::string>{"1x1", "1x1x1", "3x1x1", "3x3", "3x3x3"}));
}

// The feature cache's workspaces hold two frames of each CausalConv3d's input between calls; a one-frame decode (an
// image: Qwen-Image) has one call and keeps its clones as transients instead. The whole VAE is loaded.
TEST(WanVaeDecode, CacheWorkspacesOnlyBetweenCalls) {
  auto cache_bytes = [](const trace::Header& h) {
    std::uint64_t b = 0;
    for (const auto& t : h.tensors)
      if (t.name.rfind("feat_cache.", 0) == 0) b += t.bytes;
    return b;
  };
  const auto video = decode(832, 480, 5), image = decode(1328, 1328, 1);
  // 2 frames x (levels 0-3: 4240, 2496, 1152 and 672 channels of the caches) x their pixels x 2 bytes
  const std::uint64_t p0 = 60 * 104;
  EXPECT_EQ(cache_bytes(video->header()), 2 * 2 * (4240 * p0 + 2496 * 4 * p0 + 1152 * 16 * p0 + 672 * 64 * p0));
  EXPECT_EQ(cache_bytes(image->header()), 0u);
  std::uint64_t weights = 0;
  for (const auto& t : image->header().tensors)
    if (t.kind == trace::TensorKind::Weight) weights += t.bytes;
  EXPECT_EQ(weights, 2 * 126'892'531u);
  // A convolution's weight and bias are two allocations.
  for (const auto& t : image->header().tensors)
    if (t.name == "decoder.head.2") {
      const auto parts = image->parameter_bytes(t.id);
      ASSERT_EQ(parts.size(), 2u);
      EXPECT_EQ(parts[0], 2u * 96 * 3 * 27);
      EXPECT_EQ(parts[1], 2u * 3);
    }
}

// A written trace reads back to the same bytes (the conv= key included).
TEST(WanVaeDecode, TraceRoundTrips) {
  auto gen = decode(64, 64, 5);
  std::ostringstream first;
  trace::write_trace(first, *gen);
  trace::TraceReader back(std::make_unique<std::istringstream>(first.str()), "vae.trace");
  std::ostringstream second;
  trace::write_trace(second, back);
  EXPECT_EQ(first.str(), second.str());
  EXPECT_NE(first.str().find(" conv=3x3x3:96:96"), std::string::npos);
}

// The command: Qwen-Image's VAE decodes its one 1328x1328 image by default, Wan's its 832x480 video of 81 frames; the
// options of a diffusion transformer and --dtype (ComfyUI's vae_dtype decides) are refused by name.
TEST(WanVaeDecode, TheCommandsDefaultsAndRefusals) {
  const auto qwen = testing::run_sim("--model traces/models/qwen-image-vae.json --hw rtx4090 --policy resident --json", false);
  ASSERT_EQ(qwen.code, 0) << qwen.out;
  const auto q = nlohmann::json::parse(qwen.out);
  EXPECT_EQ(q["inputs"]["trace"]["resolution"], "1328x1328");
  EXPECT_EQ(q["step_kinds"]["prefill"]["steps"], 1);
  const auto wan = testing::run_sim("--model traces/models/wan2.1-vae.json --hw rtx4090 --policy resident");
  ASSERT_EQ(wan.code, 0) << wan.out;
  EXPECT_NE(wan.out.find("VAE decode"), std::string::npos);
  EXPECT_NE(wan.out.find("21 decoder calls"), std::string::npos) << wan.out;
  for (const char* bad : {"--dtype fp8", "--steps 2", "--cfg 3", "--text-tokens 77"}) {
    const auto r = testing::run_sim(std::string("--model traces/models/wan2.1-vae.json --policy resident ") + bad);
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_NE(r.out.find(std::string(bad).substr(0, std::string(bad).find(' '))), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace tiersim::model
