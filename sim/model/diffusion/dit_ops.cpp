#include "model/diffusion/dit_ops.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "core/error.hpp"
#include "model/diffusion/gguf_dit.hpp"

namespace tiersim::model {

using trace::OpKind;
using trace::TensorAccess;

DitOps::DitOps(trace::Step& out, const trace::Header& header, std::uint32_t act, WeightDtype dtype,
               const std::vector<const gguf::QuantType*>* gguf_types, bool scaled)
    : out_(out),
      header_(header),
      act_(act),
      dtype_(dtype),
      gguf_types_(gguf_types),
      scaled_(scaled && dtype == WeightDtype::Fp8),
      a_(activation_bytes(dtype)) {}

TensorAccess DitOps::whole(std::uint32_t tensor) const { return {tensor, header_.tensors[tensor].bytes}; }

void DitOps::add(OpKind kind, std::int32_t group, std::uint64_t flops, std::vector<TensorAccess> reads,
                 std::vector<TensorAccess> writes, std::uint32_t launches, const char* dtype) {
  trace::Op& op = trace::append_op(out_, kind, group, flops, std::move(reads), std::move(writes), launches);
  if (dtype) op.dtype = dtype;
}

void DitOps::linear(std::int32_t group, std::uint32_t weight, std::uint64_t rows, std::uint64_t in, std::uint64_t out) {
  const OpKind kind = rows <= 8 ? OpKind::Gemv : OpKind::Gemm;
  if (dtype_ == WeightDtype::Fp8) {
    // The whole weight and bias cast to a bf16 copy per forward; the product reads the copy.
    const std::uint64_t copy = 2 * (in * out + out);
    add(OpKind::Elementwise, group, in * out, {whole(weight)}, {raw(copy)}, 1, "fp8");
    if (scaled_) {
      // forward_comfy_cast_weights: weight * scale when the weight has fewer elements than the input, else
      // input * scale; each after scale_weight.to(dtype) (a kernel of its own).
      const std::uint64_t n = std::min(in * out, rows * in);
      add(OpKind::Elementwise, group, n, {raw(2 * n)}, {raw(2 * n)}, 2);
    }
    add(kind, group, 2 * rows * in * out, {raw(copy), act(rows * in)}, {act(rows * out)}, DitLaunches::linear);
  } else if (dtype_ == WeightDtype::Gguf) {
    // ComfyUI-GGUF (ops.py GGMLLayer.cast_bias_weight): the weight dequantized and the F32 bias cast into bf16
    // copies per forward (one more kernel), with the dequantizer's blocking copies; the product reads the copies.
    const gguf::QuantType* type = gguf_types_ && weight < gguf_types_->size() ? (*gguf_types_)[weight] : nullptr;
    if (!type) throw std::logic_error("a GGUF Linear without its stored type: " + header_.tensors[weight].name);
    const GgufDequant dq = gguf_dequant(*type);
    const std::uint64_t copy = 2 * (in * out + out);
    add(OpKind::Elementwise, group, in * out, {whole(weight)}, {raw(copy)}, dq.launches + 1, dq.cast_tag);
    out_.ops.back().syncs = dq.syncs;
    add(kind, group, 2 * rows * in * out, {raw(copy), act(rows * in)}, {act(rows * out)}, DitLaunches::linear);
  } else {
    add(kind, group, 2 * rows * in * out, {whole(weight), act(rows * in)}, {act(rows * out)}, DitLaunches::linear);
  }
}

void DitOps::elementwise(std::int32_t group, std::uint64_t read, std::uint64_t written, std::uint64_t flops_per,
                         std::uint32_t launches) {
  add(OpKind::Elementwise, group, flops_per * written, {act(read)}, {act(written)}, launches);
}

void DitOps::modulated_norm(std::int32_t group, std::uint64_t rows, std::uint64_t width, std::uint32_t launches) {
  add(OpKind::Norm, group, 10 * rows * width, {act(2 * rows * width)}, {act(2 * rows * width)}, launches);
}

void DitOps::rms_norm(std::int32_t group, std::uint32_t weight, std::uint64_t rows, std::uint64_t width) {
  add(OpKind::Norm, group, 4 * rows * width, {whole(weight), act(rows * width)}, {act(rows * width)},
      DitLaunches::rms_norm);
}

void DitOps::rope(std::int32_t group, std::uint64_t elems, std::uint32_t launches) {
  // x.to(fp32), freqs[0] * x0, addcmul_(freqs[1], x1), type_as(x): reads a + 24, writes a + 12 bytes per element.
  add(OpKind::Rope, group, 6 * elems, {raw(elems * (a_ + 24))}, {raw(elems * (a_ + 12))}, launches);
}

void DitOps::attention(std::int32_t group, std::uint64_t batch, std::uint64_t heads, std::uint64_t queries,
                       std::uint64_t keys, std::uint64_t head_dim) {
  const std::uint64_t width = heads * head_dim;
  add(OpKind::Attention, group, 4 * batch * heads * queries * keys * head_dim,
      {act(batch * (queries + 2 * keys) * width)}, {act(2 * batch * queries * width)}, DitLaunches::attention);
  out_.ops.back().unmasked = true;  // optimized_attention without a mask: every query attends to every key
}

std::uint64_t linear_bytes(std::uint64_t in, std::uint64_t out, WeightDtype dtype) {
  return matrix_bytes(in * out, dtype) + out * norm_bytes_per_param(dtype);
}

std::string format_scale(double scale) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", scale);
  return buf;
}

void check_image_options(const GenerationOptions& options, const std::string& model) {
  const auto& im = options.image;
  for (const std::uint32_t side : {im.width, im.height})
    if (side < 16 || side > 16384 || side % 16 != 0)
      throw InputError("", 0, "--resolution",
                       "width and height must be multiples of 16 from 16 to 16384 (the VAE's /8 and 2x2 patches), got " +
                           std::to_string(im.width) + "x" + std::to_string(im.height));
  if (im.steps < 1 || im.steps > 100000) throw InputError("", 0, "--steps", "must be from 1 to 100000");
  if (im.text_tokens < 1 || im.text_tokens > 4096) throw InputError("", 0, "--text-tokens", "must be from 1 to 4096");
  if (options.batch < 1 || options.batch > 4096) throw InputError("", 0, "--batch", "images per iteration: 1 to 4096");
  if (im.frames != 1) throw InputError("", 0, "--frames", "is for a video model; " + model + " makes images");
  if (im.has_reference())
    for (const std::uint32_t side : {im.reference_width, im.reference_height})
      if (side < 16 || side > 16384 || side % 16 != 0)
        throw InputError("", 0, "--reference",
                         "the reference image's width and height must be multiples of 16 from 16 to 16384, got " +
                             std::to_string(im.reference_width) + "x" + std::to_string(im.reference_height));
}

std::uint64_t checked_product(std::uint64_t a, std::uint64_t b, const char* key, const char* what) {
  std::uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r) || r > (std::uint64_t{1} << 62))
    throw InputError("", 0, key, std::string(what) + " is beyond 2^62: a smaller image, video or batch");
  return r;
}

double comfy_memory_required(double area, WeightDtype dtype, double memory_usage_factor) {
  const double dtype_bytes = dtype == WeightDtype::Fp32 ? 4.0 : 2.0;
  return area * dtype_bytes * 0.01 * memory_usage_factor * 1048576.0;
}

void set_comfy_memory_per_cond(trace::Header& header, double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f", bytes);
  header.meta["comfy_memory_per_cond"] = b;
}

}  // namespace tiersim::model
