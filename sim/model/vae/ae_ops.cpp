#include "model/vae/ae_ops.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace tiersim::model {

using trace::OpKind;
using trace::TensorAccess;
using trace::TensorKind;

void begin_ae_header(trace::Header& header, const VaeConfig& model, std::uint64_t width, std::uint64_t height,
                     std::uint64_t images, WeightDtype dtype, const std::string& size_key, const std::string& verb) {
  const std::uint64_t f = model.downscale();
  if (width < f || height < f || width > 16384 || height > 16384 || width % f != 0 || height % f != 0)
    throw InputError("", 0, size_key,
                     "the VAE " + verb + "s sides that are multiples of " + std::to_string(f) + " up to 16384");
  if (images < 1 || images > 4096) throw InputError("", 0, "--batch", "images per " + verb + ": 1 to 4096");
  if (dtype != WeightDtype::Bf16 && dtype != WeightDtype::Fp16 && dtype != WeightDtype::Fp32)
    throw InputError("", 0, "--vae-dtype", "the VAE runs in bf16, fp16 or fp32");
  header.meta["model"] = model.name;
  header.meta["family"] = "vae";
  header.meta["dtype"] = to_string(dtype);
  header.meta["weight_dtype"] = to_string(dtype);
  header.meta["batch"] = std::to_string(images);
  header.meta["resolution"] = std::to_string(width) + "x" + std::to_string(height);
}

void AeWeights::conv(std::int32_t g, const std::string& name, std::uint64_t in, std::uint64_t out, std::uint64_t k) {
  convs.push_back(trace::append_tensor(header_, TensorKind::Weight, (in * out * k * k + out) * a_, g, name));
}

void AeWeights::norm(std::int32_t g, const std::string& name, std::uint64_t c) {
  norms.push_back(trace::append_tensor(header_, TensorKind::Weight, 2 * c * a_, g, name));
}

void AeWeights::resnet(std::int32_t g, const std::string& prefix, std::uint64_t in, std::uint64_t out) {
  norm(g, prefix + "norm1", in);
  conv(g, prefix + "conv1", in, out, 3);
  norm(g, prefix + "norm2", out);
  conv(g, prefix + "conv2", out, out, 3);
  if (in != out) conv(g, prefix + "nin_shortcut", in, out, 1);
}

void AeWeights::attention(std::int32_t g, const std::string& prefix, std::uint64_t c) {
  norm(g, prefix + "norm", c);
  for (const char* n : {"q", "k", "v", "proj_out"}) conv(g, prefix + n, c, c, 1);
}

AeOps::AeOps(trace::Step& out, const trace::Header& header, std::uint32_t act, std::uint64_t dtype_bytes,
             std::uint64_t images, std::uint64_t groups, const std::vector<std::uint32_t>& convs,
             const std::vector<std::uint32_t>& norms)
    : out_(out), header_(header), act_(act), a_(dtype_bytes), images_(images), groups_(groups), convs_(convs),
      norms_(norms) {}

void AeOps::add(OpKind kind, std::int32_t g, std::uint64_t flops, std::vector<TensorAccess> reads,
                std::vector<TensorAccess> writes, std::uint32_t launches) {
  trace::append_op(out_, kind, g, flops, std::move(reads), std::move(writes), launches);
}

void AeOps::conv(std::int32_t g, std::uint64_t in, std::uint64_t o, std::uint64_t k, std::uint64_t pixels,
                 std::uint64_t in_pixels) {
  const std::uint64_t read = in * (in_pixels ? in_pixels : pixels);
  const std::uint32_t w = convs_[ci_++];
  const TensorAccess weights{w, header_.tensors[w].bytes};
  if (k == 3) add(OpKind::Elementwise, g, 0, {weights, act(read)}, {weights, act(read)}, 2);
  add(OpKind::Gemm, g, 2 * k * k * in * o * pixels, {weights, act(read)}, {act(o * pixels)}, 1);
  if (k == 3) add(OpKind::Elementwise, g, 0, {act(o * pixels)}, {act(o * pixels)}, 1);
  add(OpKind::Elementwise, g, o * pixels, {act(o * pixels)}, {act(o * pixels)}, 1);  // + bias
}

void AeOps::group_norm(std::int32_t g, std::uint64_t c, std::uint64_t pixels) {
  const std::uint32_t w = norms_[ni_++];
  add(OpKind::Norm, g, 3 * c * pixels, {act(c * pixels)}, {}, 1);
  out_.ops.back().blocks = static_cast<std::uint32_t>(std::min<std::uint64_t>(images_ * groups_, 0x7fffffffu));
  add(OpKind::Norm, g, 5 * c * pixels, {{w, header_.tensors[w].bytes}, act(c * pixels)}, {act(c * pixels)}, 2);
}

void AeOps::norm_silu(std::int32_t g, std::uint64_t c, std::uint64_t pixels) {
  group_norm(g, c, pixels);
  add(OpKind::Elementwise, g, 4 * c * pixels, {act(c * pixels)}, {act(c * pixels)}, 1);
}

void AeOps::resnet(std::int32_t g, std::uint64_t in, std::uint64_t o, std::uint64_t pixels) {
  norm_silu(g, in, pixels);
  conv(g, in, o, 3, pixels);
  norm_silu(g, o, pixels);
  conv(g, o, o, 3, pixels);
  if (in != o) conv(g, in, o, 1, pixels);
  add(OpKind::Elementwise, g, o * pixels, {act(2 * o * pixels)}, {act(o * pixels)}, 1);  // x + h
}

void AeOps::attention(std::int32_t g, std::uint64_t c, std::uint64_t pixels) {
  const std::uint64_t px = images_ * pixels;
  group_norm(g, c, px);
  for (int k = 0; k < 3; ++k) conv(g, c, c, 1, px);
  add(OpKind::Elementwise, g, 0, {act(3 * c * px)}, {act(3 * c * px)}, 3);
  add(OpKind::Attention, g, 4 * images_ * pixels * pixels * c, {act(3 * c * px)}, {act(c * px)}, 1);
  add(OpKind::Elementwise, g, 0, {act(c * px)}, {act(c * px)}, 1);
  conv(g, c, c, 1, px);
  add(OpKind::Elementwise, g, c * px, {act(2 * c * px)}, {act(c * px)}, 1);
}

void AeOps::silu(std::int32_t g, std::uint64_t c, std::uint64_t pixels) {
  add(OpKind::Elementwise, g, 4 * c * pixels, {act(c * pixels)}, {act(c * pixels)}, 1);
}

void AeOps::elementwise(std::int32_t g, std::uint64_t flops, std::uint64_t read, std::uint64_t written,
                        std::uint32_t launches) {
  add(OpKind::Elementwise, g, flops, {act(read)}, {act(written)}, launches);
}

}  // namespace tiersim::model
