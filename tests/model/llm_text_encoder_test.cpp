// Qwen-Image's text encoder, Qwen2.5-VL-7B, as ComfyUI builds and runs it (comfy/text_encoders/qwen_image.py,
// llama.py, qwen_vl.py at a125cd84): the published config read, the parameters against ComfyUI's own module (counted
// on the GPU machine by experiments/validate/qwen25_vl_encode.py: results/validation/qwen-image-te/meta.json), the
// ops of one encode in fp32 with every weight cast, a scaled fp8 checkpoint's scales, and the errors a bad config or
// input gets.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "model/text_encoder/llm_text_encoder_trace_generator.hpp"
#include "support/model_headers.hpp"

namespace tiersim::model {
namespace {

using testing::model_path;
using testing::weight_bytes;

trace::Step encode(LlmTextEncoderTraceGenerator& g) {
  trace::Step s;
  EXPECT_TRUE(g.next(s));
  trace::Step again;
  EXPECT_FALSE(g.next(again));
  return s;
}

TEST(Qwen25VlTextEncoder, ParametersEqualComfyUIsModule) {
  const LlmTextEncoderConfig c = load_llm_text_encoder_config(model_path("qwen2.5-vl-7b"));
  EXPECT_EQ(c.layers, 28u);
  EXPECT_EQ(c.hidden, 3584u);
  EXPECT_EQ(c.kv_heads, 4u);
  EXPECT_EQ(c.head_dim, 128u);
  EXPECT_EQ(c.vision.depth, 32u);
  // Llama2_ without lm_head, and Qwen2VLVisionTransformer, as ComfyUI's Qwen25_7BVLI holds them.
  EXPECT_EQ(c.language_params(), 7'070'619'136u);
  EXPECT_EQ(c.vision.params(), 676'550'144u);
  // Every parameter in the checkpoint's format: bf16 throughout (qwen_2.5_vl_7b), or fp8 Linears with a float32
  // scale each and bf16 for the rest (qwen_2.5_vl_7b_fp8_scaled).
  LlmTextEncoderTraceGenerator bf16(c, 139, WeightDtype::Bf16, false), scaled(c, 139, WeightDtype::Fp8, true);
  EXPECT_EQ(weight_bytes(bf16.header()), 2 * c.params());
  EXPECT_EQ(weight_bytes(scaled.header()), 8'293'960'856u);  // = experiments/frameworks/comfyui_job_fixtures.py's
  EXPECT_EQ(bf16.header().meta.at("weight_dtype"), "bf16");
  EXPECT_EQ(scaled.header().meta.at("weight_dtype"), "fp8_scaled");
}

TEST(Qwen25VlTextEncoder, OneEncodeInFp32WithEveryWeightCast) {
  const LlmTextEncoderConfig c = load_llm_text_encoder_config(model_path("qwen2.5-vl-7b"));
  const std::uint64_t S = 139;
  LlmTextEncoderTraceGenerator g(c, S, WeightDtype::Bf16, false);
  EXPECT_EQ(g.header().meta.at("dtype"), "fp32");
  const trace::Step s = encode(g);
  EXPECT_EQ(s.tokens, S);
  std::size_t gemms = 0, casts = 0, attention = 0, rope = 0;
  std::uint64_t flops = 0, cast_bytes = 0;
  for (const auto& op : s.ops) {
    gemms += op.kind == trace::OpKind::Gemm;
    attention += op.kind == trace::OpKind::Attention;
    rope += op.kind == trace::OpKind::Rope;
    if (op.kind == trace::OpKind::Gemm) flops += op.flops;
    if (op.kind == trace::OpKind::Elementwise && g.header().tensors[op.reads[0].tensor].kind == trace::TensorKind::Weight) {
      ++casts;
      cast_bytes += op.writes[0].bytes;
    }
    // Nothing of the vision tower runs for a text prompt.
    for (const auto& r : op.reads) EXPECT_EQ(g.header().tensors[r.tensor].name.rfind("visual.", 0), std::string::npos);
  }
  EXPECT_EQ(gemms, 28u * 7);  // q, k, v, o, gate, up, down
  EXPECT_EQ(casts, gemms);    // manual_cast: each weight (and bias) to fp32 first
  EXPECT_EQ(attention, 28u);
  EXPECT_EQ(rope, 28u);
  const std::uint64_t d = 3584, kv = 512, ff = 18944;
  EXPECT_EQ(flops, 2 * S * 28 * (2 * d * d + 2 * d * kv + 3 * d * ff));
  EXPECT_EQ(cast_bytes, 4 * (c.language_params() - 152064 * d - 28 * 2 * d - d));  // every Linear's parameters in fp32
}

// comfy/ops.py scaled_fp8_ops: the weight cast from fp8, then `input * scale`, or `weight * scale` once the input
// has more elements than the weight (k and v project to 512 features: from 513 tokens).
TEST(Qwen25VlTextEncoder, AScaledCheckpointScalesTheSmallerOperand) {
  const LlmTextEncoderConfig c = load_llm_text_encoder_config(model_path("qwen2.5-vl-7b"));
  // What the product after each fp8 cast reads, per Linear in order (q, k, v, o, gate, up, down).
  auto scale_reads = [&](std::uint64_t tokens) {
    LlmTextEncoderTraceGenerator g(c, tokens, WeightDtype::Fp8, true);
    const trace::Step s = encode(g);
    std::vector<std::uint64_t> out;
    for (std::size_t i = 0; i + 1 < s.ops.size(); ++i)
      if (s.ops[i].kind == trace::OpKind::Elementwise && s.ops[i].dtype == "fp8") out.push_back(s.ops[i + 1].reads[0].bytes);
    return out;
  };
  const std::uint64_t d = 3584, kv = 512, ff = 18944;
  const auto small = scale_reads(139);
  ASSERT_EQ(small.size(), 28u * 7);
  const auto big = scale_reads(1034);
  ASSERT_EQ(big.size(), 28u * 7);
  for (std::size_t l = 0; l < 28; ++l) {
    const std::uint64_t in[7] = {d, d, d, d, d, d, ff};
    for (std::size_t k = 0; k < 7; ++k) {
      EXPECT_EQ(small[7 * l + k], 4 * 139 * in[k]) << l << " " << k;  // every input smaller than its weight
      const bool kv_proj = k == 1 || k == 2;
      EXPECT_EQ(big[7 * l + k], kv_proj ? 4 * d * kv : 4 * 1034 * in[k]) << l << " " << k;
    }
  }
}

TEST(Qwen25VlTextEncoder, RefusesWhatComfyUIsFilesAreNot) {
  const LlmTextEncoderConfig c = load_llm_text_encoder_config(model_path("qwen2.5-vl-7b"));
  EXPECT_THROW(LlmTextEncoderTraceGenerator(c, 0, WeightDtype::Bf16, false), InputError);
  EXPECT_THROW(LlmTextEncoderTraceGenerator(c, 32769, WeightDtype::Bf16, false), InputError);
  EXPECT_THROW(LlmTextEncoderTraceGenerator(c, 100, WeightDtype::Fp8, false), InputError);  // fp8 is the scaled file
  EXPECT_THROW(LlmTextEncoderTraceGenerator(c, 100, WeightDtype::Int8, false), InputError);
  EXPECT_THROW(LlmTextEncoderTraceGenerator(c, 100, WeightDtype::Bf16, true), InputError);
}

std::string error_of(const std::string& text) {
  try {
    (void)parse_llm_text_encoder_config(text, "te.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Qwen25VlTextEncoder, ConfigErrorsNameTheKeyAndLine) {
  const std::string base = R"({"model_type": "qwen2_5_vl", "hidden_size": 64, "intermediate_size": 96,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
  "vision_config": {
    "depth": 2, "hidden_size": 32, "intermediate_size": 48, "num_heads": 2, "out_hidden_size": 64,
    "patch_size": 14, "temporal_patch_size": 2, "spatial_merge_size": 2, "in_channels": 3)";
  EXPECT_EQ(error_of(base + "}}"), "");
  const LlmTextEncoderConfig tiny = parse_llm_text_encoder_config(base + "}}", "te.json");
  EXPECT_EQ(tiny.head_dim, 16u);
  // An unknown field in the vision tower's section: named with its section and its line, every such field listed.
  const std::string unknown = error_of(base + ",\n    \"deepstack\": 1, \"mrope\": 2}}");
  EXPECT_NE(unknown.find("te.json:6"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("vision_config.deepstack"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("vision_config.mrope"), std::string::npos) << unknown;
  // text_config is what transformers reads: the top level's copy must agree.
  const std::string disagree = error_of(base + "}, \"text_config\": {\"hidden_size\": 64, \"intermediate_size\": 97, "
                                               "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                                               "\"num_key_value_heads\": 2, \"vocab_size\": 1000}}");
  EXPECT_NE(disagree.find("intermediate_size"), std::string::npos) << disagree;
  EXPECT_NE(disagree.find("text_config"), std::string::npos) << disagree;
  EXPECT_NE(error_of(R"({"model_type": "qwen3", "hidden_size": 64})").find("model_type"), std::string::npos);
  EXPECT_NE(error_of(base + ", \"hidden_act\": \"gelu\"}}").find("vision_config.hidden_act"), std::string::npos);
  const std::string missing = error_of(R"({"model_type": "qwen2_5_vl", "hidden_size": 64})");
  EXPECT_NE(missing.find("num_hidden_layers"), std::string::npos) << missing;
  EXPECT_NE(error_of(base + "}, \"num_key_value_heads\": 3}").find("appears twice"), std::string::npos);
  // A key twice inside the vision tower's section: refused with its path and the second one's line.
  const std::string twice = error_of(base + ",\n    \"depth\": 3}}");
  EXPECT_NE(twice.find("te.json:6: 'vision_config.depth': appears twice"), std::string::npos) << twice;
  // ComfyUI always builds the vision tower: a config without one is not Qwen-Image's encoder.
  const std::string no_vision = error_of(R"({"model_type": "qwen2_5_vl", "hidden_size": 64, "intermediate_size": 96,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000})");
  EXPECT_NE(no_vision.find("vision_config"), std::string::npos) << no_vision;
}

}  // namespace
}  // namespace tiersim::model
