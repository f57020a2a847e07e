// Wan 2.1 text-to-video: its published diffusers configs, the parameter counts they give, ComfyUI's own load
// list, the trace of one iteration, and the errors a bad config or option gets.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "model/model_family.hpp"
#include "model/wan/wan_trace_generator.hpp"
#include "support/run_sim.hpp"
#include "trace/transient_lifetimes.hpp"

namespace tiersim::model {
namespace {

std::string model_path(const std::string& name) {
  return std::string(TIERSIM_SOURCE_DIR) + "/traces/models/" + name + ".json";
}

GenerationOptions video(std::uint32_t w, std::uint32_t h, std::uint32_t frames, double cfg = 6.0) {
  GenerationOptions o;
  o.image = default_image(ModelFamily::Wan);
  o.image.width = w;
  o.image.height = h;
  o.image.frames = frames;
  o.image.cfg = cfg;
  o.image.steps = 2;
  return o;
}

TEST(Wan, ParameterCountsMatchThePublishedModels) {
  // Wan2.1-T2V-14B's transformer: 14,288,491,584 parameters ("14B"); -1.3B: 1,418,996,800 ("1.3B").
  EXPECT_EQ(load_wan_config(model_path("wan2.1-t2v-14b")).total_params(), 14288491584u);
  EXPECT_EQ(load_wan_config(model_path("wan2.1-t2v-1.3b")).total_params(), 1418996800u);
  EXPECT_EQ(model_family(model_path("wan2.1-t2v-14b")), ModelFamily::Wan);
  // Wan2.2-T2V-A14B: two experts of Wan 2.1 14B's shape (wan_t2v_A14B.py), 28.6 B parameters in all.
  const WanConfig a14b = load_wan_config(model_path("wan2.2-t2v-a14b"));
  EXPECT_EQ(a14b.total_params(), 14288491584u);
  EXPECT_TRUE(a14b.two_experts());
  EXPECT_DOUBLE_EQ(a14b.boundary_ratio, 0.875);
  EXPECT_FALSE(load_wan_config(model_path("wan2.1-t2v-14b")).two_experts());
}

// Wan 2.2 A14B's trace is one expert's (both have its shape); the header says where the low-noise expert takes over,
// half the steps unless --switch-step says otherwise.
TEST(Wan, ATwoExpertModelSwitchesHalfWayUnlessToldOtherwise) {
  const WanConfig a14b = load_wan_config(model_path("wan2.2-t2v-a14b"));
  GenerationOptions o = video(832, 480, 81, 3.5);
  o.image.steps = 20;
  EXPECT_EQ(WanTraceGenerator(a14b, o).header().meta.at("switch_step"), "10");
  o.image.steps = 7;
  EXPECT_EQ(WanTraceGenerator(a14b, o).header().meta.at("switch_step"), "3");
  o.image.switch_step = 6;
  EXPECT_EQ(WanTraceGenerator(a14b, o).header().meta.at("switch_step"), "6");
  for (const std::uint32_t bad : {7u, 9u}) {
    o.image.switch_step = bad;
    EXPECT_THROW(WanTraceGenerator(a14b, o), InputError) << bad;
  }
  o.image.switch_step = 0;
  o.image.steps = 1;  // half of one step is none: the low-noise expert would run alone
  EXPECT_THROW(WanTraceGenerator(a14b, o), InputError);
  EXPECT_EQ(WanTraceGenerator(load_wan_config(model_path("wan2.1-t2v-14b")), video(832, 480, 81)).header().meta.count("switch_step"), 0u);
  const std::string base = R"("_class_name":"WanTransformer3DModel","attention_head_dim":128,"num_attention_heads":40,)"
                           R"("ffn_dim":13824,"num_layers":40,"in_channels":16,"text_dim":4096,"freq_dim":256)";
  for (const char* ratio : {"0", "1", "1.5", "-0.2", "\"0.875\""}) {
    try {
      parse_wan_config("{" + base + ",\"boundary_ratio\":" + ratio + "}", "w.json");
      ADD_FAILURE() << ratio;
    } catch (const InputError& e) {
      EXPECT_EQ(e.key(), "boundary_ratio") << ratio;
    }
  }
  EXPECT_FALSE(parse_wan_config("{" + base + ",\"boundary_ratio\":null}", "w.json").two_experts());
}

// tests/fixtures/wan_modules.jsonl: ComfyUI's own WanModel on the meta device and its model patcher's
// _load_list (experiments/frameworks/wan_fixtures.py). The trace's tensors are the load list's modules with
// weights, in order and with ComfyUI's bytes (the Conv3d patch embedding in fp32), plus the blocks' and the
// head's `modulation` parameters, which the load list leaves out (ComfyUI never offloads them).
TEST(Wan, TensorsAreComfyUIsLoadListPlusTheModulations) {
  std::ifstream in(std::string(TIERSIM_SOURCE_DIR) + "/tests/fixtures/wan_modules.jsonl");
  ASSERT_TRUE(in);
  std::string line;
  int models = 0;
  while (std::getline(in, line)) {
    const auto row = nlohmann::json::parse(line);
    const std::string name = row["model"];
    WanTraceGenerator g(load_wan_config(model_path(name)), video(832, 480, 5));
    std::vector<std::pair<std::string, std::uint64_t>> ours, comfy, modulations;
    for (const auto& t : g.header().tensors) {
      if (t.kind != trace::TensorKind::Weight) continue;
      (t.name.find("modulation") != std::string::npos ? modulations : ours).emplace_back(t.name, t.bytes);
    }
    for (const auto& m : row["modules"])
      if (m[1].get<std::uint64_t>() > 0)
        comfy.emplace_back(m[0].get<std::string>(), m[1].get<std::uint64_t>() * m[2].get<std::uint64_t>());
    EXPECT_EQ(ours, comfy) << name;
    std::uint64_t left_out = 0;
    for (const auto& p : row["all_parameters"])
      if (p[0].get<std::string>().find("modulation") != std::string::npos)
        left_out += p[1].get<std::uint64_t>() * p[2].get<std::uint64_t>();
    std::uint64_t ours_left_out = 0;
    for (const auto& [n, b] : modulations) ours_left_out += b;
    EXPECT_EQ(ours_left_out, left_out) << name;
    ++models;
  }
  EXPECT_EQ(models, 3);
}

// The activations as ComfyUI's WanModel holds them (comfy/ldm/wan/model.py at a125cd84), each a transient value: the
// most alive at once is at k's rotary embedding in the self-attention, where the block's input (held by
// forward_orig's call), the modulated norm (self_attn's argument), q, k's normed value, apply_rope1's two fp32
// intermediates and its bf16 result are: 9 token-wide values in bf16 terms, beside what lives through the forward
// (the text context, the rotary table, e0, e and the block's e). fp8 weights' bf16 copies live only around their
// Linear and do not add to it.
TEST(Wan, TheActivationPeakIsAtKsRotaryEmbeddingAndFp8CastsDoNotRaiseIt) {
  auto peak = [](WeightDtype dtype) {
    GenerationOptions o = video(832, 480, 17);
    o.dtype = dtype;
    WanTraceGenerator g(load_wan_config(model_path("wan2.1-t2v-14b")), o);
    trace::Step step;
    EXPECT_TRUE(g.next(step));
    trace::TransientLifetimes l;
    EXPECT_FALSE(trace::derive_transient_lifetimes(g.header(), step, l).has_value());
    return l.peak;
  };
  const double B = 2, T = 5 * 30 * 52, h = 5120, a = 2;  // cfg 6: cond and uncond; 17 frames: 5 latent frames
  const double forward = B * 512 * h * a + T * 128 * 8 + B * 6 * h * a * 2 + B * h * a;
  EXPECT_DOUBLE_EQ(peak(WeightDtype::Bf16), 9 * B * T * h * a + forward);
  EXPECT_DOUBLE_EQ(peak(WeightDtype::Fp8), peak(WeightDtype::Bf16));
  // The generator writes it for the capacity checks made before a run, which count it among the activations.
  WanTraceGenerator g(load_wan_config(model_path("wan2.1-t2v-14b")), video(832, 480, 17));
  EXPECT_DOUBLE_EQ(std::stod(g.header().meta.at("transient_peak")), peak(WeightDtype::Bf16));
  // On an RTX 4090 (the weights alone overfill it) ComfyUI's rule runs the prompts apart: half the batch, about half.
  const auto r = testing::run_sim("--model traces/models/wan2.1-t2v-14b.json --frames 17 --steps 1 --hw rtx4090 --policy resident");
  EXPECT_EQ(r.code, 3) << r.out;
  const std::size_t at = r.out.find("activations ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const double mib = std::stod(r.out.substr(at + 12));
  EXPECT_NE(r.out.find(" MiB", at), std::string::npos) << r.out;
  EXPECT_NEAR(mib * 1048576, peak(WeightDtype::Bf16) / 2, 0.05 * peak(WeightDtype::Bf16)) << r.out;
}

TEST(Wan, Wan22TI2V5BHasTheSixteenFoldVaeLatentComfyUIGivesIt) {
  // Wan2.2-TI2V-5B ("5B"): 48 latent channels, which ComfyUI reads as Wan 2.2's VAE (latent_formats.Wan22): its
  // Wan22ImageToVideoLatent makes [48, (frames - 1) / 4 + 1, H / 16, W / 16]. At its default 1280x704, 121 frames:
  // 31 latent frames x 22 x 40 patches = 27,280 tokens.
  const WanConfig m = load_wan_config(model_path("wan2.2-ti2v-5b"));
  EXPECT_EQ(m.vae_spatial, 16u);
  EXPECT_EQ(load_wan_config(model_path("wan2.1-t2v-14b")).vae_spatial, 8u);
  EXPECT_EQ(m.total_params(), 4999787712u);  // ComfyUI's own WanModel at in/out_dim 48 (tests/fixtures/wan_modules.jsonl)
  EXPECT_EQ(wan_video_tokens(m, video(1280, 704, 121).image), 27280u);
  // The resolution must divide into the VAE's 16 and the 2x2 patch: multiples of 32 (the node's step).
  EXPECT_THROW(WanTraceGenerator(m, video(1280, 720, 121)), InputError);
  EXPECT_NO_THROW(WanTraceGenerator(m, video(1280, 704, 5)));
  // Another latent width is no Wan ComfyUI knows; a first-last-frame model (pos_embed_seq_len) is another model.
  const std::string base = "{\"_class_name\": \"WanTransformer3DModel\", \"attention_head_dim\": 128, "
                           "\"num_attention_heads\": 24, \"ffn_dim\": 14336, \"num_layers\": 30, \"text_dim\": 4096, "
                           "\"freq_dim\": 256, ";
  for (const auto& [bad, key] : {std::pair{std::string("\"in_channels\": 32}"), std::string("out_channels")},
                                 {std::string("\"in_channels\": 16, \"pos_embed_seq_len\": 514}"), std::string("pos_embed_seq_len")}}) {
    try {
      parse_wan_config(base + bad, "bad.json");
      ADD_FAILURE() << bad;
    } catch (const InputError& e) {
      EXPECT_EQ(e.key(), key) << e.what();
    }
  }
}

TEST(Wan, AStartImageGivesATimestepPerLatentFrameAndModulationsPerToken) {
  // Wan 2.2 TI2V with a start image: the time MLPs run on one row per latent frame (31 at 121 frames), and each block
  // expands its six modulations to every token (repeat_e) and its two `1 + e` too, read back in full by the addcmul:
  // eight activation-sized writes a block more, and the iteration's bytes grow by about that.
  const WanConfig m = load_wan_config(model_path("wan2.2-ti2v-5b"));
  auto bytes_of = [&](bool start) {
    auto o = video(1280, 704, 121, 5.0);
    o.image.start_image = start;
    WanTraceGenerator g(m, o);
    trace::Step s;
    EXPECT_TRUE(g.next(s));
    std::uint64_t written = 0;
    for (const auto& op : s.ops)
      for (const auto& w : op.writes) written += w.bytes;
    return written;
  };
  const std::uint64_t rows = 2 * 27280, h = 3072;
  const std::uint64_t more = bytes_of(true) - bytes_of(false);
  const std::uint64_t expected = (30 * 8 + 3) * rows * h * 2;  // bf16 activations: 8 per block, 3 in the head
  EXPECT_GT(more, expected);
  EXPECT_LT(more, expected + expected / 100);  // plus the per-frame time rows: small
  // Wan 2.1's image-to-video is another model; other families take no start image.
  auto o = video(832, 480, 81);
  o.image.start_image = true;
  EXPECT_THROW(WanTraceGenerator(load_wan_config(model_path("wan2.1-t2v-14b")), o), InputError);
  const auto flux = testing::run_sim("--model traces/models/flux.1-dev.json --start-image --policy resident");
  EXPECT_EQ(flux.code, 2);
  EXPECT_NE(flux.out.find("'--start-image'"), std::string::npos) << flux.out;
  // It travels with a result and re-runs from its JSON.
  const auto ok = testing::run_sim("--model traces/models/wan2.2-ti2v-5b.json --resolution 1280x704 --frames 5 "
                                   "--steps 1 --start-image --hw rtx4090 --policy resident --json", false);
  ASSERT_EQ(ok.code, 0) << ok.out;
  EXPECT_NE(ok.out.find("\"start_image\": true"), std::string::npos) << ok.out;
  const auto again = testing::run_sim("run --config " + testing::scratch_file("wan22_i2v.json", ok.out) + " --json", false);
  ASSERT_EQ(again.code, 0) << again.out;
}

TEST(Wan, AnIterationAttendsOverTheVideoAndTheTextWithTheNegativePromptInTheBatch) {
  const WanConfig m = load_wan_config(model_path("wan2.1-t2v-14b"));
  // 832x480, 81 frames: 21 latent frames x 30 x 52 patches = 32,760 tokens.
  EXPECT_EQ(wan_video_tokens(m, video(832, 480, 81).image), 32760u);
  auto attention_flops = [&](double cfg) {
    WanTraceGenerator g(m, video(832, 480, 81, cfg));
    trace::Step s;
    EXPECT_TRUE(g.next(s));
    std::uint64_t self = 0, cross = 0;
    for (const auto& op : s.ops)
      if (op.kind == trace::OpKind::Attention) (op.flops > 1e12 ? self : cross) += op.flops;
    return std::pair{self, cross};
  };
  const auto [self6, cross6] = attention_flops(6.0);
  EXPECT_EQ(self6, 40ull * 4 * 2 * 32760 * 32760 * 5120);  // batch 2: cond and uncond
  EXPECT_EQ(cross6, 40ull * 4 * 2 * 32760 * 512 * 5120);
  EXPECT_EQ(attention_flops(1.0).first * 2, self6);        // cfg 1: the negative prompt is skipped
}

TEST(Wan, RefusesWhatItCannotModelNamingTheKey) {
  const WanConfig m = load_wan_config(model_path("wan2.1-t2v-14b"));
  auto key_of = [&](const GenerationOptions& o) {
    try {
      WanTraceGenerator g(m, o);
    } catch (const InputError& e) {
      return e.key();
    }
    return std::string("no error");
  };
  EXPECT_EQ(key_of(video(832, 480, 80)), "--frames");   // not 4k + 1
  EXPECT_EQ(key_of(video(830, 480, 81)), "--resolution");
  EXPECT_EQ(key_of(video(832, 480, 81)), "no error");
  const std::string base = R"("_class_name":"WanTransformer3DModel","attention_head_dim":128,"num_attention_heads":40,)"
                           R"("ffn_dim":13824,"num_layers":40,"in_channels":16,"text_dim":4096,"freq_dim":256)";
  // Without cross_attn_norm and out_channels: diffusers' and ComfyUI's defaults (norm3 present, 16 out).
  EXPECT_EQ(parse_wan_config("{" + base + "}", "w.json").total_params(), 14288491584u);
  std::string odd = base;
  odd.replace(odd.find("\"attention_head_dim\":128"), 24, "\"attention_head_dim\":126");
  EXPECT_NO_THROW(parse_wan_config("{" + odd + "}", "w.json"));
  odd.replace(odd.find("\"attention_head_dim\":126"), 24, "\"attention_head_dim\":127");
  try {
    parse_wan_config("{" + odd + "}", "w.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), "attention_head_dim");  // rotary pairs need an even width
  }
  try {
    parse_wan_config("{" + base + R"(,"image_dim":1280})", "w.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), "image_dim");  // image-to-video is another model
  }
  EXPECT_THROW(parse_wan_config("{" + base + R"(,"patch_size":[1,2]})", "w.json"), InputError);
  // A re-run's settings get the same checks, named by the config's key.
  const auto ok = testing::run_sim("--model traces/models/wan2.1-t2v-1.3b.json --frames 5 --steps 1 --hw rtx4090 "
                                   "--policy resident --json", false);
  ASSERT_EQ(ok.code, 0) << ok.out;
  std::string edited = ok.out;
  const std::string five = "\"frames\": 5";
  edited.replace(edited.find(five), five.size(), "\"frames\": 6");
  const auto bad = testing::run_sim("run --config " + testing::scratch_file("wan_frames6.json", edited));
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("'inputs.trace.frames'"), std::string::npos) << bad.out;
  const auto flux_frames = testing::run_sim("--model traces/models/flux.1-dev.json --frames 5 --policy resident");
  EXPECT_EQ(flux_frames.code, 2);
  EXPECT_NE(flux_frames.out.find("'--frames'"), std::string::npos) << flux_frames.out;
}

// ComfyUI's offload streams (the DisTorch presets' copy:stream, pageable): a pageable copy syncs its stream,
// which waits for the compute stream, so at most two casts are staged even when the GPU is the bottleneck.
// Wan 14B at 81 frames is compute-bound on an RTX 3090 for a minute an iteration: the cuda:0 peak stays
// within resident weights + activations + reserve + the cast in use and two staged (a run-ahead once reached
// 33 GiB).
TEST(Wan, OffloadStreamsStageAtMostTwoCastsWhenComputeIsTheBottleneck) {
  const auto r = testing::run_sim("--model traces/models/wan2.1-t2v-14b.json --steps 1 --hw rtx3090 --policy bytes "
                                  "--offload-gb 20 --json", false);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  const auto& gpu = j["memory_per_tier"]["cuda:0"];
  const double reserve = std::stod(j["inputs"]["hardware"]["gpu"]["reserved"].get<std::string>());
  const double largest_module = 2.0 * 5120 * 13824;  // an FFN Linear in bf16
  EXPECT_LE(gpu["peak_bytes"].get<double>(), gpu["weights_bytes"].get<double>() + gpu["activation_bytes"].get<double>() +
                                                 reserve + 3 * largest_module);
  EXPECT_GT(j["step_kinds"]["iteration"]["median_seconds"].get<double>(), 30.0);
}

}  // namespace
}  // namespace tiersim::model
