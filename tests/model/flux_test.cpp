// The FLUX.1 family: its published diffusers configs, the parameter counts they give, the trace of one
// denoising iteration, and the errors a bad config or option gets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "model/flux/flux_config.hpp"
#include "model/diffusion/gguf_dit.hpp"
#include "model/flux/flux_trace_generator.hpp"
#include "model/model_family.hpp"
#include "support/run_sim.hpp"
#include "trace/trace_writer.hpp"

namespace tiersim::model {
namespace {

std::string model_path(const std::string& name) {
  return std::string(TIERSIM_SOURCE_DIR) + "/traces/models/" + name + ".json";
}

const std::string kBase =
    R"("_class_name":"FluxTransformer2DModel","attention_head_dim":128,"num_attention_heads":24,"num_layers":19,)"
    R"("num_single_layers":38,"in_channels":64,"joint_attention_dim":4096,"pooled_projection_dim":768)";

TEST(Flux, TheDefaultRunIsComfyUIs) {
  // ComfyUI pads FLUX's T5 prompt to at least 256 tokens (comfy/text_encoders/flux.py min_length=256) and
  // skips the negative prompt at cfg 1 (samplers.py: math.isclose(cond_scale, 1.0)); any other scale, below
  // 1 too, runs it.
  const auto im = default_image(ModelFamily::Flux);
  EXPECT_EQ(im.text_tokens, 256u);
  EXPECT_EQ(im.guided_batch(1), 1u);
  auto scaled = im;
  scaled.cfg = 0.5;
  EXPECT_EQ(scaled.guided_batch(1), 2u);
  scaled.cfg = 3.5;
  EXPECT_EQ(scaled.guided_batch(3), 6u);
  EXPECT_EQ(default_image(ModelFamily::Wan).text_tokens, 512u);
}

TEST(Flux, ParameterCountsMatchThePublishedModels) {
  // FLUX.1-dev's transformer: 11.9 B (black-forest-labs model card "12 billion parameter"; the safetensors
  // hold 11,901,408,320); schnell has no guidance embedder: 10,229,760 fewer.
  const FluxConfig dev = load_flux_config(model_path("flux.1-dev"));
  EXPECT_EQ(dev.total_params(), 11901408320u);
  EXPECT_EQ(dev.hidden(), 3072u);
  EXPECT_TRUE(dev.guidance_embeds);
  EXPECT_EQ(load_flux_config(model_path("flux.1-schnell")).total_params(), 11891178560u);
  EXPECT_EQ(model_family(model_path("flux.1-dev")), ModelFamily::Flux);
  EXPECT_EQ(model_family(model_path("qwen3-8b")), ModelFamily::Decoder);
}

TEST(Flux, RefusesWhatIsNotAFluxConfigNamingTheKey) {
  EXPECT_NO_THROW(parse_flux_config("{" + kBase + "}", "f.json"));
  EXPECT_EQ(parse_flux_config("{" + kBase + R"(,"out_channels":null})", "f.json").out_channels, 64u);
  auto key_of = [](const std::string& text) {
    try {
      parse_flux_config(text, "f.json");
    } catch (const InputError& e) {
      EXPECT_EQ(e.file(), "f.json");
      return e.key() + ": " + e.message();
    }
    return std::string("no error");
  };
  // Every unknown field at once, the first in the file named as the key.
  const std::string unknown = key_of("{" + kBase + ",\n\"foo\":1,\n\"bar\":2}");
  EXPECT_EQ(unknown.substr(0, 5), "foo: ");
  EXPECT_NE(unknown.find("foo, bar"), std::string::npos) << unknown;
  EXPECT_EQ(key_of(R"({"_class_name":"FluxTransformer2DModel"})").substr(0, 19), "num_attention_heads");
  EXPECT_EQ(key_of("{" + kBase + R"(,"patch_size":2})").substr(0, 10), "patch_size");
  EXPECT_EQ(key_of("{" + kBase + R"(,"axes_dims_rope":[16,56,50]})").substr(0, 14), "axes_dims_rope");
  EXPECT_EQ(key_of("{" + kBase + R"(,"num_layers":0})").substr(0, 10), "num_layers");
  EXPECT_EQ(key_of(R"({"_class_name":"SD3Transformer2DModel"})").substr(0, 11), "_class_name");
}

TEST(Flux, AnUnknownDiffusersClassIsRefusedByTheRegistry) {
  const std::string path = testing::scratch_file("sd3.json", R"({"_class_name": "SD3Transformer2DModel"})");
  try {
    model_family(path);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), "_class_name");
    EXPECT_EQ(e.line(), 1u);
  }
}

GenerationOptions image(std::uint32_t w, std::uint32_t h, std::uint32_t steps, WeightDtype d = WeightDtype::Bf16) {
  GenerationOptions o;
  o.dtype = d;
  o.image.width = w;
  o.image.height = h;
  o.image.steps = steps;
  o.image.text_tokens = 512;  // the validation runs' (ComfyUI pads to 256 at least: the default)
  return o;
}

TEST(Flux, TraceHasComfyUIsModulesAndOneIterationPerStep) {
  const FluxConfig dev = load_flux_config(model_path("flux.1-dev"));
  FluxTraceGenerator g(dev, image(1024, 1024, 3));
  const auto& h = g.header();
  EXPECT_EQ(h.meta.at("image_tokens"), "4096");
  EXPECT_EQ(h.meta.at("resolution"), "1024x1024");
  std::uint64_t weights = 0;
  std::set<std::string> names;
  for (const auto& t : h.tensors)
    if (t.kind == trace::TensorKind::Weight) weights += t.bytes, names.insert(t.name);
  EXPECT_EQ(weights, 2 * dev.total_params());  // bf16 throughout
  // ComfyUI's names (comfy/ldm/flux/layers.py), groups: inputs -1, double blocks 0-18, single 19-56, final 57.
  for (const char* n : {"img_in", "guidance_in.out_layer", "double_blocks.0.img_attn.qkv", "double_blocks.18.txt_mlp.2",
                        "single_blocks.37.linear2", "single_blocks.0.norm.key_norm", "final_layer.adaLN_modulation.1"})
    EXPECT_TRUE(names.count(n)) << n;
  EXPECT_EQ(h.tensors.front().layer, -1);
  std::map<std::string, std::int32_t> group;
  for (const auto& t : h.tensors) group[t.name] = t.layer;
  EXPECT_EQ(group["double_blocks.18.txt_mlp.2"], 18);
  EXPECT_EQ(group["single_blocks.0.linear1"], 19);
  EXPECT_EQ(group["final_layer.linear"], 57);
  trace::Step s;
  int steps = 0;
  std::uint64_t flops = 0, attention = 0;
  while (g.next(s)) {
    ++steps;
    EXPECT_EQ(s.kind, trace::StepKind::Iteration);
    flops = attention = 0;
    for (const auto& op : s.ops) {
      flops += op.flops;
      if (op.kind == trace::OpKind::Attention) attention += op.flops;
    }
  }
  EXPECT_EQ(steps, 3);
  // Attention over 4608 tokens in 57 blocks: 4 x 4608^2 x 3072 each.
  EXPECT_EQ(attention, 57ull * 4 * 4608 * 4608 * 3072);
  // The Linears: 2 x weights x rows: image-stream weights over 4096 rows, text-stream over 512, single blocks
  // over 4608, modulations over one row. About 7.4e13 FLOPs an iteration in all.
  EXPECT_NEAR(static_cast<double>(flops), 7.44e13, 0.01e13);
}

// tests/fixtures/flux_modules.jsonl: ComfyUI's own Flux class built on the meta device and its model
// patcher's _load_list (experiments/frameworks/flux_fixtures.py): every leaf module with weights, in
// ComfyUI's order, is a tensor of the trace with its bf16 bytes. The load list's weightless LayerNorms
// (0 parameters) have no tensor.
TEST(Flux, TensorsAreComfyUIsLoadListInOrder) {
  std::ifstream in(std::string(TIERSIM_SOURCE_DIR) + "/tests/fixtures/flux_modules.jsonl");
  ASSERT_TRUE(in);
  std::string line;
  int models = 0;
  while (std::getline(in, line)) {
    const auto row = nlohmann::json::parse(line);
    const std::string name = row["model"];
    FluxTraceGenerator g(load_flux_config(model_path(name)), image(512, 512, 1));
    std::vector<std::pair<std::string, std::uint64_t>> ours, comfy;
    for (const auto& t : g.header().tensors)
      if (t.kind == trace::TensorKind::Weight) ours.emplace_back(t.name, t.bytes);
    for (const auto& m : row["modules"])
      if (m[1].get<std::uint64_t>() > 0) comfy.emplace_back(m[0].get<std::string>(), 2 * m[1].get<std::uint64_t>());
    EXPECT_EQ(ours, comfy) << name;
    ++models;
  }
  EXPECT_EQ(models, 2);
}

TEST(Flux, Fp8WeightsAreCastBeforeEachLinear) {
  const FluxConfig dev = load_flux_config(model_path("flux.1-dev"));
  FluxTraceGenerator bf16(dev, image(512, 512, 1)), fp8(dev, image(512, 512, 1, WeightDtype::Fp8));
  std::uint64_t w16 = 0, w8 = 0;
  for (const auto& t : bf16.header().tensors) w16 += t.kind == trace::TensorKind::Weight ? t.bytes : 0;
  for (const auto& t : fp8.header().tensors) w8 += t.kind == trace::TensorKind::Weight ? t.bytes : 0;
  EXPECT_LT(w8, w16 * 51 / 100);  // matrices at one byte, biases and norms at two
  EXPECT_GT(w8, w16 * 49 / 100);
  trace::Step a, b;
  ASSERT_TRUE(bf16.next(a));
  ASSERT_TRUE(fp8.next(b));
  std::size_t gemms = 0;
  for (const auto& op : a.ops) gemms += op.kind == trace::OpKind::Gemm || op.kind == trace::OpKind::Gemv;
  EXPECT_EQ(b.ops.size(), a.ops.size() + gemms);  // one cast per Linear
  EXPECT_EQ(fp8.header().meta.at("dtype"), "bf16");
  for (const auto& op : b.ops)
    if (op.kind == trace::OpKind::Elementwise && op.reads.size() == 1 &&
        fp8.header().tensors[op.reads[0].tensor].kind == trace::TensorKind::Weight)
      EXPECT_EQ(op.dtype, "fp8");  // the runtime's gpu_cast prices it
}

// The PyTorch runtimes' gpu_cast (fp8: 0.364 of the memory rate, results/calib/h100-cast) slows only the casts: the
// same fp8 run with a runtime that lacks it is faster, a bf16 run is unchanged.
TEST(Flux, TheRuntimesCastShareSlowsOnlyTheFp8Casts) {
  std::ifstream in(std::string(TIERSIM_SOURCE_DIR) + "/calib/runtimes/pytorch-hf-h100.yaml");
  std::string yaml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto at = yaml.find("\ngpu_cast:");
  ASSERT_NE(at, std::string::npos);
  const std::string without = testing::scratch_file("runtime_without_cast.yaml", yaml.substr(0, at + 1));
  auto seconds = [](const std::string& args) {
    const auto r = testing::run_sim("--model traces/models/flux.1-dev.json --resolution 512x512 --steps 1 "
                                    "--hw h100-measured --policy resident --json " + args, false);
    EXPECT_EQ(r.code, 0) << r.out;
    return nlohmann::json::parse(r.out)["step_kinds"]["iteration"]["median_seconds"].get<double>();
  };
  const double cast = seconds("--dtype fp8 --runtime pytorch-hf-h100"), plain = seconds("--dtype fp8 --runtime " + without);
  EXPECT_GT(cast, plain * 1.02);
  EXPECT_DOUBLE_EQ(seconds("--runtime pytorch-hf-h100"), seconds("--runtime " + without));
}

TEST(Flux, RefusesOptionsItCannotModel) {
  const FluxConfig dev = load_flux_config(model_path("flux.1-dev"));
  auto key_of = [&](const GenerationOptions& o) {
    try {
      FluxTraceGenerator g(dev, o);
    } catch (const InputError& e) {
      return e.key();
    }
    return std::string("no error");
  };
  EXPECT_EQ(key_of(image(1000, 1024, 1)), "--resolution");
  EXPECT_EQ(key_of(image(0, 1024, 1)), "--resolution");
  EXPECT_EQ(key_of(image(1024, 1024, 0)), "--steps");
  EXPECT_EQ(key_of(image(1024, 1024, 1, WeightDtype::Q4)), "--dtype");
  GenerationOptions big = image(16384, 16384, 1);
  big.batch = 4096;
  EXPECT_EQ(key_of(big), "--resolution");  // beyond 2^62 FLOPs
  EXPECT_EQ(key_of(image(16384, 16384, 1)), "no error");
}

// FLUX.1 Kontext (ComfyUI's ReferenceLatent): the reference image's tokens join the image stream in every block and
// the final layer (Flux._forward: torch.cat after the image, out[:, :img_tokens] after the final layer); the
// sampler's update is over the image's latent alone.
TEST(Flux, AReferenceImageRunsBesideTheImageThroughEveryBlock) {
  const FluxConfig dev = load_flux_config(model_path("flux.1-dev"));
  GenerationOptions kontext = image(1024, 1024, 1);
  kontext.image.reference_width = 1024;
  kontext.image.reference_height = 768;  // 48 x 64 = 3072 tokens
  FluxTraceGenerator g(dev, kontext), plain(dev, image(1024, 1024, 1));
  EXPECT_EQ(g.header().meta.at("image_tokens"), "4096");
  EXPECT_EQ(g.header().meta.at("reference_tokens"), "3072");
  trace::Step s, p;
  ASSERT_TRUE(g.next(s));
  ASSERT_TRUE(plain.next(p));
  EXPECT_EQ(s.tokens, 4096u + 3072u + 512u);
  std::uint64_t attention = 0;
  for (const auto& op : s.ops)
    if (op.kind == trace::OpKind::Attention) attention += op.flops;
  EXPECT_EQ(attention, 57ull * 4 * 7680 * 7680 * 3072);  // 4096 + 3072 + 512 tokens in every block
  // The final layer's Linear runs over image and reference rows; the sampler's last op over the image's only.
  const std::uint64_t final_linear = 2ull * (4096 + 3072) * 3072 * 64;
  bool found = false;
  for (const auto& op : s.ops)
    if (op.layer == 57 && op.flops == final_linear) found = true;
  EXPECT_TRUE(found);
  EXPECT_EQ(s.ops.back().flops, p.ops.back().flops);
  EXPECT_EQ(s.ops.size(), p.ops.size() + 1);  // the reference latent's patchify and concatenation
  auto key_of = [&](std::uint32_t w, std::uint32_t h) {
    GenerationOptions o = image(1024, 1024, 1);
    o.image.reference_width = w;
    o.image.reference_height = h;
    try {
      FluxTraceGenerator bad(dev, o);
    } catch (const InputError& e) {
      return e.key();
    }
    return std::string("no error");
  };
  EXPECT_EQ(key_of(1000, 1024), "--reference");
  EXPECT_EQ(key_of(1024, 0), "--reference");
  EXPECT_EQ(key_of(32768, 1024), "--reference");
  EXPECT_EQ(key_of(16, 16), "no error");
}

TEST(Flux, ReferenceOnTheCommandLineIsAnInputOfTheResultAndRefusedWhereNotModelled) {
  const std::string file = std::string(TIERSIM_BINARY_DIR) + "/kontext-result.json";
  const auto first = testing::run_sim("--model traces/models/flux.1-dev.json --resolution 512x512 --reference 512x768 "
                                      "--steps 2 --hw rtx3090 --policy resident --json", false);
  ASSERT_EQ(first.code, 0) << first.out;
  EXPECT_NE(first.out.find("\"reference\": \"512x768\""), std::string::npos) << first.out;
  { std::ofstream(file) << first.out; }
  const auto again = testing::run_sim("run --config " + file, false);
  EXPECT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(again.out, first.out);
  std::remove(file.c_str());
  const auto text = testing::run_sim("--model traces/models/flux.1-dev.json --resolution 512x512 --reference 512x768 "
                                     "--steps 2 --hw rtx3090 --policy resident");
  EXPECT_NE(text.out.find("1024 latent + 1536 reference (512x768) + 256 text tokens"), std::string::npos) << text.out;
  for (const std::string& bad : {std::string("--model traces/models/qwen3-8b.json --reference 512x512 --policy resident"),
                                 std::string("--model traces/models/wan2.1-t2v-1.3b.json --reference 512x512 --policy resident"),
                                 std::string("--model traces/models/flux.1-dev.json --reference 512 --policy resident"),
                                 std::string("--model traces/models/flux.1-dev.json --reference 0x512 --policy resident"),
                                 // Qwen-Image-Edit's job also runs its text encoder's vision tower on the reference
                                 std::string("run --model traces/models/qwen-image.json --reference 512x512 --steps 1 "
                                             "--hw h100-sxm --policy resident --image-job")}) {
    const auto r = testing::run_sim(bad);
    EXPECT_EQ(r.code, 2) << bad << "\n" << r.out;
    EXPECT_NE(r.out.find("reference"), std::string::npos) << bad << "\n" << r.out;
  }
}

TEST(Flux, CommandLineReportsSecondsPerIterationAndRefusesDecoderOptions) {
  const auto ok = testing::run_sim("--model traces/models/flux.1-dev.json --resolution 512x512 --steps 2 --hw rtx3090 "
                                   "--policy bytes --offload-gb 4");
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_NE(ok.out.find("s/iteration (median)"), std::string::npos) << ok.out;
  EXPECT_EQ(ok.out.find("tokens/s"), std::string::npos) << ok.out;
  const auto prompt = testing::run_sim("--model traces/models/flux.1-dev.json --prompt 10 --hw rtx3090 --policy resident");
  EXPECT_EQ(prompt.code, 2);
  EXPECT_NE(prompt.out.find("'--prompt'"), std::string::npos) << prompt.out;
  const auto res = testing::run_sim("--model traces/models/qwen3-8b.json --resolution 512x512 --policy resident");
  EXPECT_EQ(res.code, 2);
  EXPECT_NE(res.out.find("'--resolution'"), std::string::npos) << res.out;
  const auto bad = testing::run_sim("--model traces/models/flux.1-dev.json --resolution 512 --policy resident");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("WIDTHxHEIGHT"), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace tiersim::model

namespace tiersim::model {
namespace {

GenerationOptions gguf_image(const std::string& file_type) {
  GenerationOptions o;
  o.image = default_image(ModelFamily::Flux);
  o.image.width = o.image.height = 512;
  o.image.steps = 1;
  set_dtype(o, file_type);
  return o;
}

// ComfyUI-GGUF's FLUX files (tools/convert.py, tools/lcpp.patch): the inputs and the final layer stay BF16, a
// fused qkv gets more bits in the _M files, and a K-quant needs rows of whole 256-element super-blocks.
TEST(FluxGguf, EachWeightGetsTheTypeComfyUIGgufsQuantizerGivesIt) {
  EXPECT_STREQ(flux_weight_type("txt_in", 4096, "Q4_K_S").name, "BF16");
  EXPECT_STREQ(flux_weight_type("final_layer.adaLN_modulation.1", 3072, "Q8_0").name, "BF16");
  EXPECT_STREQ(flux_weight_type("guidance_in.in_layer", 256, "Q4_K_M").name, "BF16");
  EXPECT_STREQ(flux_weight_type("double_blocks.0.img_attn.qkv", 3072, "Q4_K_S").name, "Q4_K");
  EXPECT_STREQ(flux_weight_type("double_blocks.0.img_attn.qkv", 3072, "Q4_K_M").name, "Q5_K");
  EXPECT_STREQ(flux_weight_type("double_blocks.18.txt_attn.qkv", 3072, "Q5_K_M").name, "Q6_K");
  EXPECT_STREQ(flux_weight_type("double_blocks.0.img_attn.proj", 3072, "Q4_K_M").name, "Q4_K");
  EXPECT_STREQ(flux_weight_type("double_blocks.0.img_mlp.2", 12288, "Q4_K_M").name, "Q4_K");  // no ffn_down rule
  EXPECT_STREQ(flux_weight_type("single_blocks.37.linear2", 15360, "Q8_0").name, "Q8_0");
  EXPECT_STREQ(flux_weight_type("single_blocks.0.linear1", 3072, "q4_0").name, "Q4_0");
  EXPECT_STREQ(flux_weight_type("single_blocks.0.linear1", 3000, "Q4_K_S").name, "F16");  // 3000 % 256 != 0
  EXPECT_STREQ(flux_weight_type("single_blocks.0.linear1", 3000, "Q8_0").name, "Q8_0");   // 32-element blocks
  EXPECT_TRUE(is_dit_gguf_file_type("q4_k_s"));
  EXPECT_FALSE(is_dit_gguf_file_type("Q3_K_M"));  // no measured dequantization rate
  EXPECT_FALSE(is_dit_gguf_file_type("IQ4_XS"));  // lcpp.patch refuses IQ types for image models
}

// dequant.py read kernel by kernel (the calibration's profiler counts them on the GPU: results/calib/h100-gguf).
TEST(FluxGguf, DequantizationKernelsAndBlockingCopiesPerType) {
  auto dq = [](const char* t) { return gguf_dequant(gguf::quant_type(t)); };
  EXPECT_EQ(dq("Q8_0").launches, 2u);
  EXPECT_EQ(dq("Q8_0").syncs, 0u);
  EXPECT_EQ(dq("Q4_K").launches, 19u);
  EXPECT_EQ(dq("Q4_K").syncs, 1u);
  EXPECT_EQ(dq("Q5_K").syncs, 2u);
  EXPECT_EQ(dq("Q6_K").syncs, 2u);
  EXPECT_STREQ(dq("BF16").cast_tag, "gguf_bf16");
  EXPECT_EQ(dq("Q4_0").syncs, 1u);
}

TEST(FluxGguf, TheTraceHoldsStoredBytesAndADequantizationPerLinear) {
  const FluxConfig dev = load_flux_config(model_path("flux.1-dev"));
  FluxTraceGenerator q(dev, gguf_image("Q4_K_M"));
  const auto& h = q.header();
  EXPECT_EQ(h.meta.at("weight_dtype"), "Q4_K_M");
  EXPECT_EQ(h.meta.at("weight_copy"), "sync");
  EXPECT_EQ(h.meta.at("dtype"), "bf16");
  std::map<std::string, std::uint64_t> bytes;
  std::uint64_t total = 0;
  for (const auto& t : h.tensors)
    if (t.kind == trace::TensorKind::Weight) bytes[t.name] = t.bytes, total += t.bytes;
  // Blocks of 256 weights: Q4_K 144 bytes, Q5_K 176; BF16 2 bytes a weight; biases F32.
  EXPECT_EQ(bytes.at("double_blocks.0.img_attn.qkv"), 3072ull * 9216 / 256 * 176 + 4 * 9216);
  EXPECT_EQ(bytes.at("double_blocks.0.img_attn.proj"), 3072ull * 3072 / 256 * 144 + 4 * 3072);
  EXPECT_EQ(bytes.at("txt_in"), 4096ull * 3072 * 2 + 4 * 3072);
  EXPECT_EQ(bytes.at("single_blocks.0.norm.query_norm"), 128u * 4);  // 1-D: F32
  EXPECT_GT(total, 6'800'000'000ull);  // 11.9 B parameters at ~4.6 bits, the BF16 inputs and outputs
  EXPECT_LT(total, 7'100'000'000ull);
  trace::Step step;
  ASSERT_TRUE(q.next(step));
  std::size_t linears = 0, casts = 0, syncs = 0;
  for (const auto& op : step.ops) {
    linears += op.kind == trace::OpKind::Gemm || op.kind == trace::OpKind::Gemv;
    if (op.kind == trace::OpKind::Elementwise && !op.dtype.empty()) {
      ++casts;
      syncs += op.syncs;
      const std::string& name = h.tensors[op.reads[0].tensor].name;
      if (name == "double_blocks.0.img_attn.qkv") {
        EXPECT_EQ(op.dtype, "q5_k");
        EXPECT_EQ(op.launches, 23u + 1);  // the dequantization and the bias's cast
        EXPECT_EQ(op.syncs, 2u);
        // The bf16 copies the product reads (weight and bias), and the dequantizer's intermediates (Q5_K: ql, qh, q,
        // the product and the result at `d * q - dm`, 5 bytes an element beyond the copy), a value of 0 bytes' traffic.
        ASSERT_EQ(op.writes.size(), 3u);
        EXPECT_EQ(op.writes[0].bytes + op.writes[1].bytes, 2 * (3072ull * 9216 + 9216));
        EXPECT_EQ(h.tensors[op.writes[2].tensor].bytes, 5 * 3072ull * 9216);
        EXPECT_EQ(op.writes[2].bytes, 0u);
      }
      if (name == "txt_in") EXPECT_EQ(op.dtype, "gguf_bf16");
    }
  }
  EXPECT_EQ(casts, linears);
  EXPECT_GT(syncs, linears);  // one or two per quantized Linear, none for the BF16 ones
}

TEST(FluxGguf, OffloadedWeightsAreCopiedByTheLayersThemselvesAndOtherFamiliesRefuseGguf) {
  const auto run = testing::run_sim("--model traces/models/flux.1-dev.json --dtype Q4_K_S --resolution 512x512 --steps 1 "
                                    "--hw rtx3090 --policy bytes --offload-gb 2");
  EXPECT_EQ(run.code, 0) << run.out;
  EXPECT_NE(run.out.find("weights Q4_K_S"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("blocking .to(device) in the model's own layers"), std::string::npos) << run.out;
  const auto resident = testing::run_sim("--model traces/models/flux.1-dev.json --dtype Q4_K_S --resolution 512x512 "
                                         "--steps 1 --hw rtx3090 --policy resident");
  EXPECT_EQ(resident.code, 0) << resident.out;
  EXPECT_EQ(resident.out.find("blocking .to(device)"), std::string::npos) << resident.out;  // nothing is copied
  for (const char* other : {"qwen-image", "wan2.1-t2v-1.3b"}) {
    const auto r = testing::run_sim(std::string("--model traces/models/") + other + ".json --dtype Q8_0 --policy resident");
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("FLUX only"), std::string::npos) << r.out;
  }
  const auto q3 = testing::run_sim("--model traces/models/flux.1-dev.json --dtype Q3_K_M --policy resident");
  EXPECT_EQ(q3.code, 2) << q3.out;
  EXPECT_NE(q3.out.find("Q8_0, Q6_K"), std::string::npos) << q3.out;
}

// The blocking copies inside the K-quant dequantization keep the host from running ahead of the GPU, so the GPU
// idles while the host issues the next ops: the same trace without them is faster.
TEST(FluxGguf, TheDequantizersBlockingCopiesCostTime) {
  const FluxConfig dev = load_flux_config(model_path("flux.1-dev"));
  GenerationOptions small = gguf_image("Q4_K_S");
  small.image.width = small.image.height = 256;  // little GPU work a Linear: the host's issue time shows
  FluxTraceGenerator q(dev, small);
  std::ostringstream with, without;
  trace::write_header(with, q.header());
  trace::write_header(without, q.header());
  trace::Step step;
  ASSERT_TRUE(q.next(step));
  trace::write_step(with, q.header(), step);
  for (auto& op : step.ops) op.syncs = 0;
  trace::write_step(without, q.header(), step);
  trace::write_end(with);
  trace::write_end(without);
  auto seconds = [](const std::string& path) {
    const auto r = testing::run_sim("--trace " + path + " --hw rtx3090 --policy resident --json", false);
    EXPECT_EQ(r.code, 0) << r.out;
    return nlohmann::json::parse(r.out)["step_kinds"]["iteration"]["median_seconds"].get<double>();
  };
  const double synced = seconds(testing::scratch_file("flux_q4ks_syncs.trace", with.str()));
  const double free_running = seconds(testing::scratch_file("flux_q4ks_nosyncs.trace", without.str()));
  EXPECT_GT(synced - free_running, 1e-3);  // ~300 waits, each leaving the GPU idle while the host issues on
  // A trace's weight_copy names how the layers copy; any other value than sync is an error naming the file, line and key.
  std::string text = without.str();
  const auto at = text.find("meta weight_copy sync");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 21, "meta weight_copy soon");
  const auto bad = testing::run_sim("--trace " + testing::scratch_file("flux_bad_copy.trace", text) +
                                    " --hw rtx3090 --policy bytes --offload-gb 2");
  EXPECT_EQ(bad.code, 2) << bad.out;
  const std::string line = std::to_string(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n') + 1);
  EXPECT_NE(bad.out.find("flux_bad_copy.trace:" + line + ": 'weight_copy'"), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace tiersim::model

namespace tiersim::model {
namespace {

// A scaled fp8 checkpoint (comfy/ops.py scaled_fp8_ops): after each Linear's cast, the smaller of the weight and the
// input is multiplied by the weight's scale: one more elementwise op per Linear, two launches; decoders refuse it.
TEST(Flux, ScaledFp8MultipliesTheSmallerOperandByTheScale) {
  const FluxConfig dev = load_flux_config(model_path("flux.1-dev"));
  GenerationOptions plain = image(512, 512, 1), scaled = image(512, 512, 1);
  set_dtype(plain, "fp8");
  set_dtype(scaled, "fp8_scaled");
  EXPECT_EQ(dtype_name(scaled), "fp8_scaled");
  EXPECT_EQ(dtype_name(plain), "fp8");
  FluxTraceGenerator a(dev, plain), b(dev, scaled);
  EXPECT_EQ(b.header().meta.at("weight_dtype"), "fp8_scaled");
  trace::Step sa, sb;
  ASSERT_TRUE(a.next(sa));
  ASSERT_TRUE(b.next(sb));
  std::size_t linears = 0;
  for (const auto& op : sa.ops) linears += op.kind == trace::OpKind::Gemm || op.kind == trace::OpKind::Gemv;
  EXPECT_EQ(sb.ops.size(), sa.ops.size() + linears);
  // A Linear over one row (a modulation, an embedder): its input is scaled, not its weight.
  for (std::size_t i = 0; i + 2 < sb.ops.size(); ++i)
    if (sb.ops[i].dtype == "fp8" && sb.ops[i + 2].kind == trace::OpKind::Gemv) {
      EXPECT_EQ(sb.ops[i + 1].launches, 2u);
      EXPECT_LT(sb.ops[i + 1].writes[0].bytes, sb.ops[i].writes[0].bytes / 100);
      break;
    }
  const auto llm = testing::run_sim("--model traces/models/qwen3-8b.json --dtype fp8_scaled --policy resident");
  EXPECT_EQ(llm.code, 2) << llm.out;
  EXPECT_NE(llm.out.find("diffusion models"), std::string::npos) << llm.out;
}

}  // namespace
}  // namespace tiersim::model
