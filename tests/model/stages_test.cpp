// A diffusion job's other stages: the text encoders (T5-XXL, CLIP-L) and the VAE, read from the configs ComfyUI ships
// or the model publishes, their parameters against ComfyUI's own modules (counted by experiments/validate/
// comfy_stages_check.py on ComfyUI's classes), the ops of one forward, and the errors a bad config gets.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/error.hpp"
#include "model/text_encoder/text_encoder_trace_generator.hpp"
#include "model/vae/vae_decoder_trace_generator.hpp"
#include "model/vae/vae_encoder_trace_generator.hpp"
#include "support/model_headers.hpp"

namespace tiersim::model {
namespace {

using testing::model_path;
using testing::weight_bytes;

TEST(TextEncoders, ParameterCountsEqualComfyUIsModules) {
  const TextEncoderConfig t5 = load_text_encoder_config(model_path("t5-v1_1-xxl"));
  EXPECT_EQ(t5.kind, TextEncoderConfig::Kind::T5);
  EXPECT_EQ(t5.params(), 4'762'310'656u);  // ComfyUI's T5 (encoder and shared embedding)
  const TextEncoderConfig clip = load_text_encoder_config(model_path("clip-vit-large-patch14"));
  EXPECT_EQ(clip.kind, TextEncoderConfig::Kind::Clip);
  EXPECT_EQ(clip.params(), 123'650'304u);  // CLIPTextModel with its text_projection
  // The traces hold every parameter in the stored format: t5xxl_fp16 is 9.52 GB.
  TextEncoderTraceGenerator fp16(t5, 256, WeightDtype::Fp16), fp8(t5, 256, WeightDtype::Fp8);
  EXPECT_EQ(weight_bytes(fp16.header()), 2 * t5.params());  // = the measured run's parameter bytes
  EXPECT_LT(weight_bytes(fp8.header()), weight_bytes(fp16.header()) / 2 + 1'000'000);
  TextEncoderTraceGenerator c(clip, 77, WeightDtype::Fp16);
  EXPECT_NEAR(static_cast<double>(weight_bytes(c.header())), 2.0 * clip.params(), 2.0 * 25 * 2 * 768);
}

TEST(TextEncoders, OneForwardInFp32WithEveryWeightCast) {
  const TextEncoderConfig t5 = load_text_encoder_config(model_path("t5-v1_1-xxl"));
  TextEncoderTraceGenerator g(t5, 256, WeightDtype::Fp16);
  EXPECT_EQ(g.header().meta.at("dtype"), "fp32");
  trace::Step s;
  ASSERT_TRUE(g.next(s));
  EXPECT_FALSE(g.next(s));
  std::size_t gemms = 0, casts = 0, attention = 0, bias = 0;
  std::uint64_t flops = 0;
  for (const auto& op : s.ops) {
    gemms += op.kind == trace::OpKind::Gemm;
    attention += op.kind == trace::OpKind::Attention;
    bias += op.kind == trace::OpKind::Other;
    if (op.kind == trace::OpKind::Gemm) flops += op.flops;
    if (op.kind == trace::OpKind::Elementwise && !op.reads.empty() &&
        g.header().tensors[op.reads[0].tensor].kind == trace::TensorKind::Weight)
      ++casts;
  }
  EXPECT_EQ(gemms, 24u * 7);  // q, k, v, o, wi_0, wi_1, wo
  EXPECT_EQ(casts, gemms);    // manual_cast: each weight to fp32 first
  EXPECT_EQ(attention, 24u);
  EXPECT_EQ(bias, 1u);        // the relative position bias, built once (umT5 would build it per block)
  EXPECT_EQ(flops, 2ull * 256 * 24 * (4 * 4096 * 4096 + 3 * 4096 * 10240));
  EXPECT_THROW(TextEncoderTraceGenerator(t5, 0, WeightDtype::Fp16), InputError);
  const TextEncoderConfig clip = load_text_encoder_config(model_path("clip-vit-large-patch14"));
  EXPECT_THROW(TextEncoderTraceGenerator(clip, 78, WeightDtype::Fp16), InputError);  // 77 positions
}

// umT5-XXL as ComfyUI builds Wan's encoder (comfy/text_encoders/wan.py, umt5_config_xxl.json): T5's shape with a
// 256,384-token vocabulary and a relative position bias table in every block; attention masks on, so T5Stack's fp32
// mask is built once and added to every block's own bias.
TEST(TextEncoders, Umt5BuildsItsBiasInEveryBlockAndAddsTheMask) {
  const TextEncoderConfig u = load_text_encoder_config(model_path("umt5-xxl"));
  EXPECT_TRUE(u.bias_every_layer);
  EXPECT_EQ(u.vocab, 256'384u);
  // shared 256384 x 4096; per block q, k, v, o, wi_0, wi_1, wo, two norms and a 32 x 64 bias table; the final norm
  EXPECT_EQ(u.params(), 256'384ull * 4096 + 24ull * (4 * 4096 * 4096 + 3 * 4096 * 10240 + 2 * 4096 + 32 * 64) + 4096);
  TextEncoderTraceGenerator g(u, 512, WeightDtype::Fp16);
  EXPECT_EQ(weight_bytes(g.header()), 2 * u.params());
  trace::Step s;
  ASSERT_TRUE(g.next(s));
  std::size_t bias = 0, masks = 0;
  std::set<std::uint32_t> tables;
  for (const auto& op : s.ops) {
    if (op.kind == trace::OpKind::Other) {
      ++bias;
      tables.insert(op.reads[0].tensor);
    }
    if (op.kind == trace::OpKind::Elementwise && op.reads.size() == 1 && op.reads[0].bytes == 4ull * 65 * 512 * 512)
      ++masks;  // the fp32 bias (64 heads) and the mask read, the sum written
  }
  EXPECT_EQ(bias, 24u);
  EXPECT_EQ(tables.size(), 24u);  // each block reads its own table
  EXPECT_EQ(masks, 24u);          // mask + past_bias in every block
}

TEST(TextEncoders, ConfigErrorsNameTheKey) {
  auto key_of = [](const std::string& text) {
    try {
      parse_text_encoder_config(text, "te.json");
    } catch (const InputError& e) {
      return e.key();
    }
    return std::string("no error");
  };
  const std::string t5 = R"("d_ff":10240,"d_kv":64,"d_model":4096,"num_heads":64,"num_layers":24,"vocab_size":32128)";
  EXPECT_EQ(key_of("{\"model_type\":\"t5\"," + t5 + "}"), "no error");
  EXPECT_EQ(key_of("{" + t5 + "}"), "model_type");
  EXPECT_EQ(key_of("{\"model_type\":\"bert\"," + t5 + "}"), "model_type");
  EXPECT_EQ(key_of("{\"model_type\":\"t5\",\"num_experts\":8," + t5 + "}"), "num_experts");  // changes the weights
  EXPECT_EQ(key_of("{\"model_type\":\"t5\",\"dense_act_fn\":\"swiglu\"," + t5 + "}"), "dense_act_fn");
  EXPECT_EQ(key_of("{\"model_type\":\"t5\",\"relative_attention_num_buckets\":64," + t5 + "}"),
            "relative_attention_num_buckets");
  EXPECT_EQ(key_of(R"({"model_type":"clip_text_model","hidden_size":768,"intermediate_size":3072,"num_hidden_layers":12,
                       "num_attention_heads":7,"max_position_embeddings":77,"vocab_size":49408})"),
            "num_attention_heads");
}

TEST(Vae, FluxsAeHasComfyUIsParametersAndDecodesWhole) {
  const VaeConfig ae = load_vae_config(model_path("flux.1-vae"));
  EXPECT_EQ(ae.downscale(), 8u);
  EXPECT_EQ(ae.decoder_params(), 49'545'475u);  // ComfyUI's Decoder for FLUX's ddconfig
  EXPECT_EQ(ae.params(), 83'819'683u);          // with the encoder: ae.safetensors
  VaeDecoderTraceGenerator g(ae, 1024, 1024, 1, WeightDtype::Bf16);
  trace::Step s;
  ASSERT_TRUE(g.next(s));
  std::size_t convs = 0, norms = 0, attention = 0, statistics = 0, transposed = 0;
  for (const auto& op : s.ops) {
    // cuDNN's NHWC transposes of a 3x3 convolution's input and filter (the filter is a weight the op reads).
    if (op.kind == trace::OpKind::Elementwise)
      for (const auto& r : op.reads) transposed += g.header().tensors[r.tensor].kind == trace::TensorKind::Weight;
    convs += op.kind == trace::OpKind::Gemm;
    norms += op.kind == trace::OpKind::Norm;
    attention += op.kind == trace::OpKind::Attention;
    if (op.blocks) {
      ++statistics;
      EXPECT_EQ(op.blocks, 32u);  // PyTorch's RowwiseMomentsCUDAKernel: one block per (image, group)
      EXPECT_TRUE(op.writes.empty());
    }
  }
  EXPECT_EQ(convs, 1u + 28 + 3 + 2 + 4 + 1);  // conv_in, 14 ResnetBlocks x 2, 3 upsamples, 2 shortcuts, attention's 4, conv_out
  EXPECT_EQ(norms, 2 * 30u);  // 30 GroupNorms, each its statistics and its normalisation
  EXPECT_EQ(statistics, 30u);
  EXPECT_EQ(transposed, 1u + 28 + 3 + 1);  // the 3x3 convolutions: conv_in, the ResnetBlocks', upsamples', conv_out
  EXPECT_EQ(attention, 1u);  // one head over 128 x 128 latent pixels
  EXPECT_EQ(weight_bytes(g.header()), 2 * ae.decoder_params());
  EXPECT_THROW(VaeDecoderTraceGenerator(ae, 1020, 1024, 1, WeightDtype::Bf16), InputError);
  auto key_of = [](const std::string& text) {
    try {
      parse_vae_config(text, "vae.json");
    } catch (const InputError& e) {
      return e.key();
    }
    return std::string("no error");
  };
  const std::string base = R"("_class_name":"AutoencoderKL","block_out_channels":[128,256,512,512],"layers_per_block":2,"latent_channels":16)";
  EXPECT_EQ(key_of("{" + base + "}"), "no error");
  EXPECT_EQ(key_of(R"({"_class_name":"AutoencoderKLWan","block_out_channels":[128],"layers_per_block":2,"latent_channels":16})"), "_class_name");
  EXPECT_EQ(key_of("{" + base + R"(,"norm_num_groups":48})"), "norm_num_groups");
  EXPECT_EQ(key_of("{" + base + R"(,"up_block_types":["AttnUpDecoderBlock2D"]})"), "up_block_types");
  EXPECT_EQ(key_of("{" + base + R"(,"temporal_compression_ratio":4})"), "temporal_compression_ratio");
}

// FLUX.1 Kontext's reference image, VAEEncode as ComfyUI runs it (model.py Encoder, then DiagonalGaussianRegularizer):
// the encoder's weights are the rest of ae.safetensors, and its forward runs every block once, the Downsamples as a
// zero pad and a strided 3x3 convolution over the padded image.
TEST(Vae, FluxsAeEncodesAReferenceImageWithItsEncoder) {
  const VaeConfig ae = load_vae_config(model_path("flux.1-vae"));
  VaeEncoderTraceGenerator g(ae, 1024, 768, 1, WeightDtype::Bf16);
  EXPECT_EQ(weight_bytes(g.header()), 2 * (ae.params() - ae.decoder_params()));
  trace::Step s;
  ASSERT_TRUE(g.next(s));
  EXPECT_FALSE(g.next(s));
  EXPECT_EQ(s.tokens, 128u * 96);  // the latent's pixels
  std::size_t convs = 0, statistics = 0, attention = 0;
  std::uint64_t conv_flops = 0;
  for (const auto& op : s.ops) {
    convs += op.kind == trace::OpKind::Gemm;
    statistics += op.blocks > 0;
    attention += op.kind == trace::OpKind::Attention;
    if (op.kind == trace::OpKind::Gemm) conv_flops += op.flops;
  }
  EXPECT_EQ(convs, 1u + 8 * 2 + 2 + 3 + 2 * 2 + 4 + 1);  // conv_in, 8 down ResnetBlocks, 2 shortcuts, 3 downsamples,
                                                         // the mid's 2 ResnetBlocks and attention's 4, conv_out
  EXPECT_EQ(statistics, 8u * 2 + 2 * 2 + 1 + 1);  // GroupNorms: the ResnetBlocks', attention's, norm_out
  EXPECT_EQ(attention, 1u);
  // The FLOPs of every convolution at its output size: 2 x k^2 x in x out per output pixel.
  const std::uint64_t p0 = 1024 * 768, p1 = p0 / 4, p2 = p1 / 4, p3 = p2 / 4;
  auto c = [](std::uint64_t k, std::uint64_t in, std::uint64_t out, std::uint64_t px) { return 2 * k * k * in * out * px; };
  const std::uint64_t expected =
      c(3, 3, 128, p0) + 4 * c(3, 128, 128, p0) + c(3, 128, 128, p1) +                                     // level 0
      c(3, 128, 256, p1) + 3 * c(3, 256, 256, p1) + c(1, 128, 256, p1) + c(3, 256, 256, p2) +               // level 1
      c(3, 256, 512, p2) + 3 * c(3, 512, 512, p2) + c(1, 256, 512, p2) + c(3, 512, 512, p3) +               // level 2
      4 * c(3, 512, 512, p3) + 4 * c(3, 512, 512, p3) + 4 * c(1, 512, 512, p3) + c(3, 512, 32, p3);         // 3, mid, out
  EXPECT_EQ(conv_flops, expected);
  EXPECT_THROW(VaeEncoderTraceGenerator(ae, 1020, 768, 1, WeightDtype::Bf16), InputError);
  EXPECT_THROW(VaeEncoderTraceGenerator(ae, 1024, 768, 1, WeightDtype::Fp8), InputError);
}

}  // namespace
}  // namespace tiersim::model
