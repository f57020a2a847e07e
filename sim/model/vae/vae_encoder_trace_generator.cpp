#include "model/vae/vae_encoder_trace_generator.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "model/vae/ae_ops.hpp"

namespace tiersim::model {

using trace::TensorKind;

VaeEncoderTraceGenerator::VaeEncoderTraceGenerator(const VaeConfig& model, std::uint32_t width, std::uint32_t height,
                                                   std::uint32_t images, WeightDtype dtype, const std::string& key)
    : model_(model), width_(width), height_(height), images_(images), dtype_(dtype) {
  const std::uint64_t f = model_.downscale();
  if (width_ < f || height_ < f || width_ > 16384 || height_ > 16384 || width_ % f != 0 || height_ % f != 0)
    throw InputError("", 0, key, "the VAE encodes sides that are multiples of " + std::to_string(f) + " up to 16384");
  if (images_ < 1 || images_ > 4096) throw InputError("", 0, "--batch", "images per encode: 1 to 4096");
  if (dtype_ != WeightDtype::Bf16 && dtype_ != WeightDtype::Fp16 && dtype_ != WeightDtype::Fp32)
    throw InputError("", 0, "--vae-dtype", "the VAE runs in bf16, fp16 or fp32");
  const std::uint64_t a = activation_bytes(dtype_);
  header_.meta["model"] = model_.name;
  header_.meta["family"] = "vae";
  header_.meta["dtype"] = to_string(dtype_);
  header_.meta["weight_dtype"] = to_string(dtype_);
  header_.meta["batch"] = std::to_string(images_);
  header_.meta["resolution"] = std::to_string(width_) + "x" + std::to_string(height_);
  header_.meta["source"] = "tiersim VAE encoder generator (comfy/ldm/modules/diffusionmodules/model.py at a125cd84)";
  // The encoder's weights in the order its forward reads them (names as ComfyUI's state dict has them).
  auto resnet = [&](std::int32_t g, const std::string& p, std::uint64_t in, std::uint64_t out) {
    norms_.push_back(trace::append_tensor(header_, TensorKind::Weight, 2 * in * a, g, p + "norm1"));
    add_conv(g, p + "conv1", in, out, 3);
    norms_.push_back(trace::append_tensor(header_, TensorKind::Weight, 2 * out * a, g, p + "norm2"));
    add_conv(g, p + "conv2", out, out, 3);
    if (in != out) add_conv(g, p + "nin_shortcut", in, out, 1);
  };
  const std::int32_t levels = static_cast<std::int32_t>(model_.channels.size());
  add_conv(-1, "encoder.conv_in", model_.in_channels, model_.channels.front(), 3);
  std::uint64_t c = model_.channels.front();
  for (std::int32_t i = 0; i < levels; ++i) {
    const std::string p = "encoder.down." + std::to_string(i) + ".";
    for (std::uint64_t b = 0; b < model_.res_blocks; ++b) {
      resnet(i, p + "block." + std::to_string(b) + ".", c, model_.channels[static_cast<std::size_t>(i)]);
      c = model_.channels[static_cast<std::size_t>(i)];
    }
    if (i + 1 != levels) add_conv(i, p + "downsample.conv", c, c, 3);
  }
  resnet(levels, "encoder.mid.block_1.", c, c);
  norms_.push_back(trace::append_tensor(header_, TensorKind::Weight, 2 * c * a, levels, "encoder.mid.attn_1.norm"));
  for (const char* n : {"q", "k", "v", "proj_out"}) add_conv(levels, std::string("encoder.mid.attn_1.") + n, c, c, 1);
  resnet(levels, "encoder.mid.block_2.", c, c);
  norms_.push_back(trace::append_tensor(header_, TensorKind::Weight, 2 * c * a, levels + 1, "encoder.norm_out"));
  add_conv(levels + 1, "encoder.conv_out", c, 2 * model_.latent_channels, 3);
  if (model_.quant_convs) add_conv(levels + 1, "quant_conv", 2 * model_.latent_channels, 2 * model_.latent_channels, 1);
  std::uint64_t params = 0;
  for (const auto& t : header_.tensors) params += t.bytes / a;
  header_.meta["parameters"] = std::to_string(params);
  // Live at the widest point (a ResnetBlock at full resolution): its input, the norm's output, conv1, norm2 and
  // conv2 and the sum at the first level's channels; and at the mid attention, q, k, v, their transposed copies and
  // the output.
  const std::uint64_t px = width_ * height_ * images_, lat = px / (f * f), top = model_.channels.back();
  act_ = trace::append_tensor(header_, TensorKind::Activation,
                              a * std::max(6 * px * model_.channels.front(), 9 * lat * top), -1, "activations");
  trace::assign_components(header_, "vae");
}

std::uint32_t VaeEncoderTraceGenerator::add_conv(std::int32_t group, const std::string& name, std::uint64_t in,
                                                 std::uint64_t out, std::uint64_t k) {
  const std::uint32_t id = trace::append_tensor(header_, TensorKind::Weight,
                                                (in * out * k * k + out) * activation_bytes(dtype_), group, name);
  convs_.push_back(id);
  return id;
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
