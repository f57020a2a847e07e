#include "model/vae/vae_decoder_trace_generator.hpp"

#include <algorithm>

#include "model/vae/ae_ops.hpp"

namespace tiersim::model {

using trace::TensorKind;

VaeDecoderTraceGenerator::VaeDecoderTraceGenerator(const VaeConfig& model, std::uint32_t width, std::uint32_t height,
                                                   std::uint32_t images, WeightDtype dtype)
    : model_(model), width_(width), height_(height), images_(images), dtype_(dtype) {
  begin_ae_header(header_, model_, width_, height_, images_, dtype_, "--resolution", "decode");
  header_.meta["parameters"] = std::to_string(model_.decoder_params());
  header_.meta["source"] = "tiersim VAE decoder generator (comfy/ldm/modules/diffusionmodules/model.py at a125cd84)";
  const std::uint64_t a = activation_bytes(dtype_);
  // The decoder's weights in the order its forward reads them.
  const std::uint64_t top = model_.channels.back();
  const std::int32_t levels = static_cast<std::int32_t>(model_.channels.size());
  AeWeights weights(header_, a);
  weights.conv(-1, "decoder.conv_in", model_.latent_channels, top, 3);
  weights.resnet(0, "decoder.mid.block_1.", top, top);
  weights.attention(0, "decoder.mid.attn_1.", top);
  weights.resnet(0, "decoder.mid.block_2.", top, top);
  std::uint64_t c = top;
  for (std::int32_t i = levels - 1; i >= 0; --i) {
    const std::int32_t g = levels - i;  // groups 1..levels from the lowest resolution up
    const std::string p = "decoder.up." + std::to_string(i) + ".";
    for (std::uint64_t b = 0; b <= model_.res_blocks; ++b) {
      weights.resnet(g, p + "block." + std::to_string(b) + ".", c, model_.channels[static_cast<std::size_t>(i)]);
      c = model_.channels[static_cast<std::size_t>(i)];
    }
    if (i != 0) weights.conv(g, p + "upsample.conv", c, c, 3);
  }
  weights.norm(levels + 1, "decoder.norm_out", c);
  weights.conv(levels + 1, "decoder.conv_out", c, model_.out_channels, 3);
  convs_ = std::move(weights.convs);
  norms_ = std::move(weights.norms);
  // Live at the widest point (the first block at full resolution): its input, the upsampled tensor's conv
  // output, the norm's output, conv1, norm2 and conv2, the shortcut and the sum, at the largest channel count
  // reaching full resolution; and at the mid attention, q, k, v, their transposed copies and the output.
  const std::uint64_t f = model_.downscale(), px = width_ * height_ * images_, lat = px / (f * f);
  const std::uint64_t full = px * std::max(model_.channels[0], model_.channels.size() > 1 ? model_.channels[1] : 0);
  act_ = trace::append_tensor(header_, TensorKind::Activation, a * std::max(6 * full, 9 * lat * top), -1, "activations");
  trace::assign_components(header_, "vae");
}

bool VaeDecoderTraceGenerator::next(trace::Step& out) {
  if (done_) return false;
  done_ = true;
  const std::uint64_t f = model_.downscale(), B = images_;
  const std::uint64_t lat = (width_ / f) * (height_ / f);  // latent pixels per image
  out.kind = trace::StepKind::Prefill;
  out.tokens = static_cast<std::uint32_t>(std::min<std::uint64_t>(B * lat, 0xffffffffu));
  out.ops.clear();
  AeOps ops(out, header_, act_, activation_bytes(dtype_), B, model_.groups, convs_, norms_);
  const std::uint64_t top = model_.channels.back();
  std::uint64_t px = B * lat;
  ops.conv(-1, model_.latent_channels, top, 3, px);
  ops.resnet(0, top, top, px);
  ops.attention(0, top, lat);
  ops.resnet(0, top, top, px);
  std::uint64_t c = top;
  const std::int32_t levels = static_cast<std::int32_t>(model_.channels.size());
  for (std::int32_t i = levels - 1; i >= 0; --i) {
    const std::int32_t g = levels - i;
    const std::uint64_t o = model_.channels[static_cast<std::size_t>(i)];
    for (std::uint64_t b = 0; b <= model_.res_blocks; ++b) {
      ops.resnet(g, c, o, px);
      c = o;
    }
    if (i != 0) {
      ops.elementwise(g, 0, c * px, 4 * c * px, 1);  // nearest 2x
      px *= 4;
      ops.conv(g, c, c, 3, px);
    }
  }
  // norm_out, SiLU (out of place), conv_out
  ops.group_norm(levels + 1, c, px);
  ops.silu(levels + 1, c, px);
  ops.conv(levels + 1, c, model_.out_channels, 3, px);
  return true;
}

}  // namespace tiersim::model
