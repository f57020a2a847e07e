#include "model/vae/vae_encoder_trace_generator.hpp"

#include <algorithm>

#include "model/vae/ae_ops.hpp"

namespace tiersim::model {

using trace::TensorKind;

VaeEncoderTraceGenerator::VaeEncoderTraceGenerator(const VaeConfig& model, std::uint32_t width, std::uint32_t height,
                                                   std::uint32_t images, WeightDtype dtype, const std::string& key)
    : model_(model), width_(width), height_(height), images_(images), dtype_(dtype) {
  begin_ae_header(header_, model_, width_, height_, images_, dtype_, key, "encode");
  header_.meta["source"] = "tiersim VAE encoder generator (comfy/ldm/modules/diffusionmodules/model.py at a125cd84)";
  const std::uint64_t a = activation_bytes(dtype_);
  // The encoder's weights in the order its forward reads them.
  AeWeights weights(header_, a);
  const std::int32_t levels = static_cast<std::int32_t>(model_.channels.size());
  weights.conv(-1, "encoder.conv_in", model_.in_channels, model_.channels.front(), 3);
  std::uint64_t c = model_.channels.front();
  for (std::int32_t i = 0; i < levels; ++i) {
    const std::string p = "encoder.down." + std::to_string(i) + ".";
    for (std::uint64_t b = 0; b < model_.res_blocks; ++b) {
      weights.resnet(i, p + "block." + std::to_string(b) + ".", c, model_.channels[static_cast<std::size_t>(i)]);
      c = model_.channels[static_cast<std::size_t>(i)];
    }
    if (i + 1 != levels) weights.conv(i, p + "downsample.conv", c, c, 3);
  }
  weights.resnet(levels, "encoder.mid.block_1.", c, c);
  weights.attention(levels, "encoder.mid.attn_1.", c);
  weights.resnet(levels, "encoder.mid.block_2.", c, c);
  weights.norm(levels + 1, "encoder.norm_out", c);
  const std::uint64_t z2 = 2 * model_.latent_channels;  // the mean and the log-variance
  weights.conv(levels + 1, "encoder.conv_out", c, z2, 3);
  if (model_.quant_convs) weights.conv(levels + 1, "quant_conv", z2, z2, 1);
  convs_ = std::move(weights.convs);
  norms_ = std::move(weights.norms);
  std::uint64_t params = 0;
  for (const auto& t : header_.tensors) params += t.bytes / a;
  header_.meta["parameters"] = std::to_string(params);
  // Live at the widest point (a ResnetBlock at full resolution): its input, the norm's output, conv1, norm2 and
  // conv2 and the sum at the first level's channels; and at the mid attention, q, k, v, their transposed copies and
  // the output.
  const std::uint64_t f = model_.downscale();
  const std::uint64_t px = width_ * height_ * images_, lat = px / (f * f), top = model_.channels.back();
  act_ = trace::append_tensor(header_, TensorKind::Activation,
                              a * std::max(6 * px * model_.channels.front(), 9 * lat * top), -1, "activations");
  trace::assign_components(header_, "vae");
}

bool VaeEncoderTraceGenerator::next(trace::Step& out) {
  if (done_) return false;
  done_ = true;
  const std::uint64_t f = model_.downscale(), B = images_, z2 = 2 * model_.latent_channels;
  const std::uint64_t lat = (width_ / f) * (height_ / f);  // latent pixels per image
  out.kind = trace::StepKind::Prefill;
  out.tokens = static_cast<std::uint32_t>(std::min<std::uint64_t>(B * lat, 0xffffffffu));
  out.ops.clear();
  AeOps ops(out, header_, act_, activation_bytes(dtype_), B, model_.groups, convs_, norms_);
  std::uint64_t w = width_, h = height_, c = model_.channels.front();
  ops.conv(-1, model_.in_channels, c, 3, B * w * h);
  const std::int32_t levels = static_cast<std::int32_t>(model_.channels.size());
  for (std::int32_t i = 0; i < levels; ++i) {
    const std::uint64_t o = model_.channels[static_cast<std::size_t>(i)];
    for (std::uint64_t b = 0; b < model_.res_blocks; ++b) {
      ops.resnet(i, c, o, B * w * h);
      c = o;
    }
    if (i + 1 != levels) {
      // Downsample: F.pad(x, (0, 1, 0, 1)) (constant_pad_nd: the padded tensor filled, then x copied into it), then
      // the 3x3 convolution of stride 2 over it.
      const std::uint64_t padded = B * (w + 1) * (h + 1);
      ops.elementwise(i, 0, c * B * w * h, c * padded, 2);
      w /= 2;
      h /= 2;
      ops.conv(i, c, c, 3, B * w * h, padded);
    }
  }
  const std::uint64_t px = B * w * h;
  ops.resnet(levels, c, c, px);
  ops.attention(levels, c, w * h);
  ops.resnet(levels, c, c, px);
  ops.group_norm(levels + 1, c, px);
  ops.silu(levels + 1, c, px);  // nonlinearity(): out of place
  ops.conv(levels + 1, c, z2, 3, px);
  if (model_.quant_convs) ops.conv(levels + 1, z2, z2, 1, px);
  // DiagonalGaussianDistribution(z): chunk (views), clamp(logvar), exp(0.5 * logvar) (a product and an exp),
  // exp(logvar); mode() is the mean's view.
  const std::uint64_t half = px * model_.latent_channels;
  ops.elementwise(levels + 1, 4 * half, 2 * half, 4 * half, 4);
  return true;
}

}  // namespace tiersim::model
