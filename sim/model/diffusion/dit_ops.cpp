#include "model/diffusion/dit_ops.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "core/error.hpp"
#include "model/diffusion/gguf_dit.hpp"
#include "trace/transient_lifetimes.hpp"

namespace tiersim::model {

using trace::OpKind;
using trace::TensorAccess;

std::uint32_t DitValues::operator()(const std::string& name, std::uint64_t bytes) {
  const auto it = ids_.find(name);
  if (it != ids_.end()) {
    if (it->second.second != bytes)
      throw std::logic_error("transient value '" + name + "' named with " + std::to_string(bytes) + " bytes, declared with " +
                             std::to_string(it->second.second));
    return it->second.first;
  }
  if (!header_) throw std::logic_error("transient value '" + name + "' was not declared when the forward was first built");
  const std::uint32_t id = trace::append_tensor(*header_, trace::TensorKind::Transient, bytes, -1, name);
  ids_.emplace(name, std::make_pair(id, bytes));
  return id;
}

DitOps::DitOps(trace::Step& out, const trace::Header& header, WeightDtype dtype, DitValues& values,
               const std::vector<const gguf::QuantType*>* gguf_types, bool scaled)
    : out_(out),
      header_(header),
      dtype_(dtype),
      values_(values),
      gguf_types_(gguf_types),
      scaled_(scaled && dtype == WeightDtype::Fp8),
      a_(activation_bytes(dtype)) {}

TensorAccess DitOps::whole(std::uint32_t tensor) const { return {tensor, header_.tensors[tensor].bytes}; }

trace::Op& DitOps::add(OpKind kind, std::int32_t group, std::uint64_t flops, std::vector<TensorAccess> reads,
                       std::vector<TensorAccess> writes, std::uint32_t launches, const char* dtype) {
  trace::Op& op = trace::append_op(out_, kind, group, flops, std::move(reads), std::move(writes), launches);
  if (dtype) op.dtype = dtype;
  return op;
}

trace::Op& DitOps::linear(std::int32_t group, std::uint32_t weight, std::uint64_t rows, std::uint64_t in,
                          std::uint64_t out, std::uint32_t x, std::uint32_t y) {
  const OpKind kind = rows <= 8 ? OpKind::Gemv : OpKind::Gemm;
  const TensorAccess input{x, rows * in * a_}, output{y, rows * out * a_};
  if (dtype_ == WeightDtype::Bf16 || dtype_ == WeightDtype::Fp16 || dtype_ == WeightDtype::Fp32)
    return add(kind, group, 2 * rows * in * out, {whole(weight), input}, {output}, DitLaunches::linear);
  if (dtype_ != WeightDtype::Fp8 && dtype_ != WeightDtype::Gguf)
    throw std::logic_error("DitOps::linear: bf16, fp16, fp32, fp8 or GGUF weights, not " + header_.tensors[weight].name + "'s");
  // comfy/ops.py cast_bias_weight (ComfyUI-GGUF's ops.py GGMLLayer.cast_bias_weight: the weight dequantized, the F32
  // bias cast): the weight and the bias as bf16 copies, freed when the Linear's forward returns.
  const std::string shape = std::to_string(out) + "x" + std::to_string(in);
  const std::uint32_t cast = values_("cast weight " + shape, 2 * in * out);
  const std::uint32_t bias = values_("cast bias " + std::to_string(out), 2 * out);
  if (dtype_ == WeightDtype::Gguf) {
    const gguf::QuantType* type = gguf_types_ && weight < gguf_types_->size() ? (*gguf_types_)[weight] : nullptr;
    if (!type) throw std::logic_error("a GGUF Linear without its stored type: " + header_.tensors[weight].name);
    const GgufDequant dq = gguf_dequant(*type);
    // The dequantizer's intermediates: a value of the cast alone, its traffic in the cast's measured rate (0 bytes).
    std::vector<TensorAccess> writes{{cast, 2 * in * out}, {bias, 2 * out}};
    if (dq.scratch > 0) writes.push_back({values_(std::string("dequantize ") + type->name + " " + shape, dq.scratch * in * out), 0});
    add(OpKind::Elementwise, group, in * out, {whole(weight)}, std::move(writes), dq.launches + 1, dq.cast_tag).syncs =
        dq.syncs;
  } else {
    add(OpKind::Elementwise, group, in * out, {whole(weight)}, {{cast, 2 * in * out}, {bias, 2 * out}}, 1, "fp8");
  }
  TensorAccess weights{cast, 2 * in * out}, operand = input;
  if (scaled_) {
    // scaled_fp8_ops' forward_comfy_cast_weights: `weight = weight * scale` (a weight-sized value; the cast is freed)
    // when the weight has fewer elements than the input, else `input * scale` (an input-sized one).
    const std::uint64_t n = std::min(in * out, rows * in);
    const bool weight_side = in * out < rows * in;
    const std::uint32_t scaled = values_(weight_side ? "scaled weight " + shape
                                                        : "scaled input " + std::to_string(rows) + "x" + std::to_string(in),
                                            2 * n);
    add(OpKind::Elementwise, group, n, {weight_side ? TensorAccess{cast, 2 * n} : TensorAccess{x, 2 * n}},
        {{scaled, 2 * n}}, 2);
    (weight_side ? weights : operand) = {scaled, 2 * n};
  }
  return add(kind, group, 2 * rows * in * out, {weights, {bias, 2 * out}, operand}, {output}, DitLaunches::linear);
}

void DitOps::rms_norm(std::int32_t group, std::uint32_t weight, std::uint64_t rows, std::uint64_t width,
                      std::uint32_t x, std::uint32_t y) {
  add(OpKind::Norm, group, 4 * rows * width, {whole(weight), {x, rows * width * a_}}, {{y, rows * width * a_}},
      DitLaunches::rms_norm);
}

trace::Op& DitOps::modulated_norm(std::int32_t group, std::uint64_t rows, std::uint64_t width, std::uint32_t launches,
                                  std::uint32_t x, std::uint32_t normed, std::uint32_t out) {
  const std::uint64_t b = rows * width * a_;
  trace::Op& op = add(OpKind::Norm, group, 10 * rows * width, {{x, b}}, {{normed, b}, {out, b}}, launches);
  op.reread_bytes = b;  // the addcmul reads the LayerNorm's output
  return op;
}

void DitOps::rope(std::int32_t group, std::uint64_t elems, std::uint32_t launches, std::uint32_t x, std::uint32_t f32,
                  std::uint32_t rotated, std::uint32_t out, std::uint32_t freqs, std::uint64_t freq_rereads) {
  // Reads: x and the table; then, inside the op, the fp32 copy by the product and by addcmul_, the rotated values by
  // addcmul_ and type_as, and the table's two halves once per (batch x head) (4 bytes an element each). Writes: the
  // fp32 copy, the product, addcmul_ in place, the cast back: a + 24 bytes an element read, a + 12 written.
  const std::uint64_t f = 4 * elems, table = header_.tensors[freqs].bytes;
  trace::Op& op = add(OpKind::Rope, group, 6 * elems, {{x, elems * a_}, {freqs, table}},
                      {{f32, f}, {rotated, f}, {rotated, f}, {out, elems * a_}}, launches);
  op.reread_bytes = 4 * f + freq_rereads * table - table;
}

void DitOps::attention(std::int32_t group, std::uint64_t batch, std::uint64_t heads, std::uint64_t queries,
                       std::uint64_t keys, std::uint64_t head_dim, std::uint32_t q, std::uint32_t k, std::uint32_t v,
                       std::uint32_t sdpa, std::uint32_t out) {
  const std::uint64_t width = heads * head_dim, qb = batch * queries * width * a_, kb = batch * keys * width * a_;
  add(OpKind::Attention, group, 4 * batch * heads * queries * keys * head_dim, {{q, qb}, {k, kb}, {v, kb}},
      {{sdpa, qb}, {out, qb}}, DitLaunches::attention);
  out_.ops.back().unmasked = true;  // optimized_attention without a mask: every query attends to every key
}

std::vector<std::uint64_t> linear_parameter_bytes(std::uint64_t in, std::uint64_t out, WeightDtype dtype) {
  return {matrix_bytes(in * out, dtype), out * norm_bytes_per_param(dtype)};
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

void set_transient_peak(trace::Header& header, const trace::Step& step) {
  trace::TransientLifetimes lifetimes;
  if (trace::derive_transient_lifetimes(header, step, lifetimes))
    throw std::logic_error("a generated forward uses a transient value before making it");
  char b[32];
  std::snprintf(b, sizeof b, "%.0f", lifetimes.peak);
  header.meta["transient_peak"] = b;
}

}  // namespace tiersim::model
