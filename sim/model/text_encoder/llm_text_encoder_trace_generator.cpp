#include "model/text_encoder/llm_text_encoder_trace_generator.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "model/text_encoder/fp32_linear.hpp"

namespace tiersim::model {

using trace::OpKind;
using trace::TensorAccess;
using trace::TensorKind;

namespace {
constexpr std::uint64_t kF32 = 4;       // every activation (SDClipModel calls the transformer with dtype=float32)
constexpr std::uint64_t kMaxTokens = 32768;
}  // namespace

LlmTextEncoderTraceGenerator::LlmTextEncoderTraceGenerator(const LlmTextEncoderConfig& model, std::uint64_t tokens,
                                                           WeightDtype weights, bool scaled, const std::string& key)
    : model_(model), tokens_(tokens), weights_(weights), scaled_(scaled) {
  if (tokens_ < 1 || tokens_ > kMaxTokens)
    throw InputError("", 0, key, "the text encoder's tokens must be from 1 to 32,768");
  const bool plain = weights_ == WeightDtype::Bf16 || weights_ == WeightDtype::Fp16 || weights_ == WeightDtype::Fp32;
  if (scaled_ ? weights_ != WeightDtype::Fp8 : !plain)
    throw InputError("", 0, "--text-encoder-dtype",
                     "a Qwen2.5-VL text encoder's checkpoint is bf16, fp16, fp32 or fp8_scaled (ComfyUI's "
                     "qwen_2.5_vl_7b.safetensors and qwen_2.5_vl_7b_fp8_scaled.safetensors)");
  header_.meta["model"] = model_.name;
  header_.meta["family"] = "qwen2_5_vl";
  header_.meta["dtype"] = "fp32";
  header_.meta["weight_dtype"] = scaled_ ? "fp8_scaled" : to_string(weights_);
  header_.meta["batch"] = "1";
  header_.meta["prompt_tokens"] = std::to_string(tokens_);
  header_.meta["parameters"] = std::to_string(model_.params());
  header_.meta["source"] =
      "tiersim text encoder generator (comfy/text_encoders/llama.py Llama2_ and qwen_image.py at a125cd84)";
  const std::uint64_t d = model_.hidden, in = model_.inner(), kv = model_.kv_inner(), ff = model_.ff;
  const auto L = static_cast<std::int32_t>(model_.layers);
  embedding_ = add_plain(-1, "model.embed_tokens", model_.vocab * d);
  for (std::int32_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    norms_.push_back(add_plain(l, p + "input_layernorm", d));
    linears_.push_back(add_linear(l, p + "self_attn.q_proj", d, in, model_.qkv_bias));
    linears_.push_back(add_linear(l, p + "self_attn.k_proj", d, kv, model_.qkv_bias));
    linears_.push_back(add_linear(l, p + "self_attn.v_proj", d, kv, model_.qkv_bias));
    linears_.push_back(add_linear(l, p + "self_attn.o_proj", in, d, false));
    norms_.push_back(add_plain(l, p + "post_attention_layernorm", d));
    linears_.push_back(add_linear(l, p + "mlp.gate_proj", d, ff, false));
    linears_.push_back(add_linear(l, p + "mlp.up_proj", d, ff, false));
    linears_.push_back(add_linear(l, p + "mlp.down_proj", ff, d, false));
  }
  final_norm_ = add_plain(L, "model.norm", d);
  // The vision tower (qwen_vl.py), loaded with the model and never read by a text prompt: one tensor a module.
  const LlmTextEncoderConfig::Vision& v = model_.vision;
  if (v.depth > 0) {
    const std::int32_t vl = L + 1;
    const std::uint64_t vd = v.hidden;
    add_plain(vl, "visual.patch_embed.proj", v.in_channels * v.temporal_patch * v.patch * v.patch * vd);
    for (std::uint64_t b = 0; b < v.depth; ++b) {
      const std::string p = "visual.blocks." + std::to_string(b) + ".";
      add_plain(vl, p + "norm1", vd);
      add_plain(vl, p + "norm2", vd);
      add_linear(vl, p + "attn.qkv", vd, 3 * vd, true);
      add_linear(vl, p + "attn.proj", vd, vd, true);
      add_linear(vl, p + "mlp.gate_proj", vd, v.ff, true);
      add_linear(vl, p + "mlp.up_proj", vd, v.ff, true);
      add_linear(vl, p + "mlp.down_proj", v.ff, vd, true);
    }
    add_plain(vl, "visual.merger.ln_q", vd);
    add_linear(vl, "visual.merger.mlp.0", v.merged(), v.merged(), true);
    add_linear(vl, "visual.merger.mlp.2", v.merged(), v.out_hidden, true);
  }
  // Live at the widest point, fp32: at the MLP the residual stream, its norm, gate, SiLU, up and their product and
  // the largest weight's fp32 copy (a scaled checkpoint's weight-side scale makes a second once the input has more
  // elements than the weight: down_proj's and o_proj's from more rows than the hidden width); at attention q, k, v,
  // the rotated q and k, k and v repeated to every head, the output, and the S x S mask with its padded copy.
  const std::uint64_t S = tokens_;
  const std::uint64_t weight_copies = scaled_ && S > d ? 2 : 1;
  const std::uint64_t mlp = 2 * S * d + 4 * S * ff + weight_copies * d * ff;
  const std::uint64_t attention = 2 * S * d + 6 * S * in + 4 * S * kv + 3 * S * S + weight_copies * d * in;
  act_ = trace::append_tensor(header_, TensorKind::Activation, kF32 * std::max(mlp, attention), -1, "activations");
  trace::assign_components(header_, "text_encoder");
}

std::uint32_t LlmTextEncoderTraceGenerator::add_plain(std::int32_t layer, const std::string& name, std::uint64_t params) {
  // A scaled checkpoint keeps everything but the Linears in bf16 (the model's dtype, its norms').
  return trace::append_tensor(header_, TensorKind::Weight,
                              scaled_ ? 2 * params : matrix_bytes(params, weights_), layer, name);
}

LlmTextEncoderTraceGenerator::Linear LlmTextEncoderTraceGenerator::add_linear(std::int32_t layer, const std::string& name,
                                                                              std::uint64_t in, std::uint64_t out,
                                                                              bool bias) {
  const std::uint64_t params = in * out + (bias ? out : 0);
  // scaled_fp8_ops' Linear: weight and bias made in fp8 (override_dtype), and a float32 scale_weight.
  const std::uint64_t bytes = scaled_ ? params + 4 : matrix_bytes(params, weights_);
  return {trace::append_tensor(header_, TensorKind::Weight, bytes, layer, name), in, out, bias};
}

void LlmTextEncoderTraceGenerator::linear(trace::Step& out, std::int32_t layer, const Linear& l) const {
  append_fp32_linear(out, layer, {{l.tensor, header_.tensors[l.tensor].bytes}, l.in, l.out, l.bias}, tokens_,
                     scaled_ ? "fp8" : weights_ == WeightDtype::Fp32 ? "" : to_string(weights_), scaled_, act_);
}

void LlmTextEncoderTraceGenerator::norm(trace::Step& out, std::int32_t layer, std::uint32_t weight) const {
  // comfy/rmsnorm.py rms_norm: cast_to(weight, fp32) (a kernel unless stored so), then F.rms_norm.
  const std::uint64_t row = kF32 * tokens_ * model_.hidden;
  const bool cast = scaled_ || weights_ != WeightDtype::Fp32;
  trace::append_op(out, OpKind::Norm, layer, 4 * tokens_ * model_.hidden,
                   {{weight, header_.tensors[weight].bytes}, {act_, row}}, {{act_, row}}, cast ? 2 : 1);
}

bool LlmTextEncoderTraceGenerator::next(trace::Step& out) {
  if (done_) return false;
  done_ = true;
  const std::uint64_t S = tokens_, d = model_.hidden, in = model_.inner(), kv = model_.kv_inner(), ff = model_.ff;
  const std::uint64_t H = model_.heads, hd = model_.head_dim, row = kF32 * S * d;
  out.kind = trace::StepKind::Prefill;
  out.tokens = static_cast<std::uint32_t>(S);
  out.ops.clear();
  auto add = [&](OpKind kind, std::int32_t layer, std::uint64_t flops, std::uint64_t read, std::uint64_t written,
                 std::uint32_t launches) {
    trace::append_op(out, kind, layer, flops, {{act_, read}}, {{act_, written}}, launches);
  };
  // process_tokens: the rows looked up in the table's dtype (a 16-bit table is not cast), then .to(float32).
  const std::uint64_t wb = scaled_ ? 2 : header_.tensors[embedding_].bytes / (model_.vocab * d);
  trace::append_op(out, OpKind::Embedding, -1, 0, {{embedding_, wb * S * d}}, {{act_, wb * S * d}}, 1);
  if (wb != kF32) add(OpKind::Elementwise, -1, S * d, wb * S * d, row, 1);
  // precompute_freqs_cis: the inverse frequencies, the positions' product, cat, cos and sin (about ten kernels).
  add(OpKind::Other, -1, 2 * S * hd, kF32 * hd, 4 * kF32 * S * hd, 10);
  // The mask: 1 - mask expanded to S x S, to(bool), masked_fill (a copy and a fill), the causal mask (fill_, triu_),
  // the sum in place.
  add(OpKind::Elementwise, -1, 4 * S * S, 5 * kF32 * S * S, 5 * kF32 * S * S, 8);
  std::size_t li = 0;
  for (std::int32_t l = 0; l < static_cast<std::int32_t>(model_.layers); ++l) {
    const auto ul = static_cast<std::size_t>(l);
    norm(out, l, norms_[2 * ul]);
    for (int k = 0; k < 3; ++k) linear(out, l, linears_[li++]);
    // apply_rope on q and k: x * cos, rotate_half (neg, cat), * sin, the sum: five kernels each.
    add(OpKind::Rope, l, 3 * S * (in + kv), 6 * kF32 * S * (in + kv), 4 * kF32 * S * (in + kv), 10);
    // k and v repeat_interleave'd from the key-value heads to every head (the repeats, their offsets, a gather).
    add(OpKind::Elementwise, l, 0, 2 * kF32 * S * kv, 2 * kF32 * S * in, 6);
    // SDPA with the fp32 mask (PyTorch pads a mask whose rows are not a multiple of 16 first): every key scored.
    trace::append_op(out, OpKind::Attention, l, 4 * H * S * S * hd, {{act_, kF32 * (3 * S * in + S * S)}},
                     {{act_, kF32 * S * in}}, 2);
    linear(out, l, linears_[li++]);                     // o_proj
    add(OpKind::Elementwise, l, S * d, 2 * row, row, 1);  // the residual add
    norm(out, l, norms_[2 * ul + 1]);
    linear(out, l, linears_[li++]);                                   // gate_proj
    add(OpKind::Elementwise, l, 4 * S * ff, kF32 * S * ff, kF32 * S * ff, 1);  // SiLU
    linear(out, l, linears_[li++]);                                   // up_proj
    add(OpKind::Elementwise, l, S * ff, 2 * kF32 * S * ff, kF32 * S * ff, 1);  // gate * up
    linear(out, l, linears_[li++]);                                   // down_proj
    add(OpKind::Elementwise, l, S * d, 2 * row, row, 1);  // the residual add
  }
  norm(out, static_cast<std::int32_t>(model_.layers), final_norm_);
  return true;
}

}  // namespace tiersim::model
