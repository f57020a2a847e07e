#include "model/text_encoder/text_encoder_trace_generator.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "model/text_encoder/fp32_linear.hpp"

namespace tiersim::model {

using trace::OpKind;
using trace::TensorAccess;
using trace::TensorKind;

namespace {
constexpr std::uint64_t kF32 = 4;  // every activation (SDClipModel calls the transformer with dtype=float32)
}

TextEncoderTraceGenerator::TextEncoderTraceGenerator(const TextEncoderConfig& model, std::uint64_t tokens,
                                                     WeightDtype weights, const std::string& key)
    : model_(model), tokens_(tokens), weights_(weights) {
  const bool clip = model_.kind == TextEncoderConfig::Kind::Clip;
  if (tokens_ < 1 || tokens_ > 4096) throw InputError("", 0, key, "the text encoder's tokens must be from 1 to 4,096");
  if (clip && tokens_ > model_.positions)
    throw InputError("", 0, key, "CLIP encodes at most its " + std::to_string(model_.positions) + " positions");
  if (weights_ != WeightDtype::Fp16 && weights_ != WeightDtype::Bf16 && weights_ != WeightDtype::Fp32 &&
      weights_ != WeightDtype::Fp8)
    throw InputError("", 0, "--text-encoder-dtype", "a text encoder's weights are fp16, bf16, fp32 or fp8");
  header_.meta["model"] = model_.name;
  header_.meta["family"] = clip ? "clip_text_model" : "t5";
  header_.meta["dtype"] = "fp32";
  header_.meta["weight_dtype"] = to_string(weights_);
  header_.meta["batch"] = "1";
  header_.meta["prompt_tokens"] = std::to_string(tokens_);
  header_.meta["parameters"] = std::to_string(model_.params());
  header_.meta["source"] = clip ? "tiersim text encoder generator (comfy/clip_model.py at a125cd84)"
                                : "tiersim text encoder generator (comfy/text_encoders/t5.py at a125cd84)";
  const std::uint64_t d = model_.width, in = model_.inner(), ff = model_.ff, nb = norm_bytes_per_param(weights_);
  const auto L = static_cast<std::int32_t>(model_.layers);
  if (clip) {
    embedding_ = add_weight(-1, "text_model.embeddings.token_embedding", model_.vocab * d);
    positions_ = add_weight(-1, "text_model.embeddings.position_embedding", model_.positions * d);
  } else {
    embedding_ = add_weight(-1, "shared", model_.vocab * d);
  }
  for (std::int32_t l = 0; l < L; ++l) {
    const std::string p = clip ? "text_model.encoder.layers." + std::to_string(l) + "."
                               : "encoder.block." + std::to_string(l) + ".";
    const std::string att = clip ? p + "self_attn." : p + "layer.0.SelfAttention.";
    norms_.push_back(trace::append_tensor(header_, TensorKind::Weight, (clip ? 2 : 1) * d * nb, l,
                                          clip ? p + "layer_norm1" : p + "layer.0.layer_norm"));
    const std::uint64_t ab = clip ? 1 : 0;  // CLIP's projections have biases
    for (const char* n : {"q", "k", "v"})
      linears_.push_back(add_weight(l, att + (clip ? std::string(n) + "_proj" : std::string(n)), d * in + ab * in));
    linears_.push_back(add_weight(l, att + (clip ? "out_proj" : "o"), in * d + ab * d));
    if (!clip && (l == 0 || model_.bias_every_layer)) {
      bias_tables_.push_back(add_weight(l, att + "relative_attention_bias", TextEncoderConfig::kBuckets * model_.heads));
    }
    norms_.push_back(trace::append_tensor(header_, TensorKind::Weight, (clip ? 2 : 1) * d * nb, l,
                                          clip ? p + "layer_norm2" : p + "layer.1.layer_norm"));
    if (clip) {
      linears_.push_back(add_weight(l, p + "mlp.fc1", d * ff + ff));
      linears_.push_back(add_weight(l, p + "mlp.fc2", ff * d + d));
    } else {
      const std::string f = p + "layer.1.DenseReluDense.";
      linears_.push_back(add_weight(l, f + (model_.gated ? "wi_0" : "wi"), d * ff));
      if (model_.gated) linears_.push_back(add_weight(l, f + "wi_1", d * ff));
      linears_.push_back(add_weight(l, f + "wo", ff * d));
    }
  }
  norms_.push_back(trace::append_tensor(header_, TensorKind::Weight, (clip ? 2 : 1) * d * nb, L,
                                        clip ? "text_model.final_layer_norm" : "encoder.final_layer_norm"));
  if (clip) projection_ = add_weight(L, "text_projection", d * d);
  // Live at the widest point: the residual stream, the FFN's inputs and outputs (two of width ff), q, k, v and
  // the attention's output, the fp32 copy of the largest weight, and the bias/mask over heads x S x S.
  const std::uint64_t S = tokens_;
  act_ = trace::append_tensor(header_, TensorKind::Activation,
                              kF32 * std::max(S * (3 * d + 3 * ff + 4 * in) + d * ff + model_.heads * S * S,
                                              weights_ == WeightDtype::Fp8 ? model_.vocab * d : 0),
                              -1, "activations");
  trace::assign_components(header_, "text_encoder");
}

std::uint32_t TextEncoderTraceGenerator::add_weight(std::int32_t layer, const std::string& name, std::uint64_t params) {
  return trace::append_tensor(header_, TensorKind::Weight, matrix_bytes(params, weights_), layer, name);
}

void TextEncoderTraceGenerator::elementwise(trace::Step& out, std::int32_t layer, std::uint64_t read,
                                            std::uint64_t written, std::uint32_t launches) const {
  trace::append_op(out, OpKind::Elementwise, layer, written / kF32, {{act_, read}}, {{act_, written}}, launches);
}

void TextEncoderTraceGenerator::linear(trace::Step& out, std::int32_t layer, std::uint32_t weight, std::uint64_t in,
                                       std::uint64_t out_f, bool bias, std::uint64_t rows) const {
  append_fp32_linear(out, layer, {{weight, header_.tensors[weight].bytes}, in, out_f, bias}, rows,
                     weights_ == WeightDtype::Fp32 ? "" : to_string(weights_), false, act_);
}

bool TextEncoderTraceGenerator::next(trace::Step& out) {
  if (done_) return false;
  done_ = true;
  const bool clip = model_.kind == TextEncoderConfig::Kind::Clip;
  const std::uint64_t S = tokens_, d = model_.width, in = model_.inner(), ff = model_.ff, H = model_.heads;
  const std::uint64_t row = kF32 * S * d;
  out.kind = trace::StepKind::Prefill;
  out.tokens = static_cast<std::uint32_t>(S);
  out.ops.clear();
  auto add = [&](OpKind kind, std::int32_t layer, std::uint64_t flops, std::vector<TensorAccess> reads,
                 std::vector<TensorAccess> writes, std::uint32_t launches) {
    trace::append_op(out, kind, layer, flops, std::move(reads), std::move(writes), launches);
  };
  const std::uint64_t wb = header_.tensors[embedding_].bytes / (model_.vocab * d);
  // The embedding: the prompt's rows gathered in the stored dtype, then .to(float32) (manual_cast's Embedding
  // does not cast a 16-bit table; an fp8 one is cast whole to fp32 first, and t5.py then runs nan_to_num); CLIP
  // adds its position table, cast to fp32.
  if (weights_ == WeightDtype::Fp8) {
    trace::append_op(out, OpKind::Elementwise, -1, model_.vocab * d, {{embedding_, header_.tensors[embedding_].bytes}},
                     {{act_, kF32 * model_.vocab * d}})
        .dtype = "fp8";
  }
  add(OpKind::Embedding, -1, 0, {{embedding_, std::max<std::uint64_t>(1, wb) * S * d}}, {{act_, row}}, 2);
  if (weights_ == WeightDtype::Fp8) elementwise(out, -1, row, row, 1);
  if (clip) {
    add(OpKind::Elementwise, -1, S * d, {{positions_, header_.tensors[positions_].bytes}, {act_, row}}, {{act_, row}}, 2);
    add(OpKind::Other, -1, 0, {}, {{act_, kF32 * S * S}}, 2);  // the causal mask: empty, fill_(-inf), triu_
  }
  auto norm = [&](std::int32_t layer, std::uint32_t weight) {
    if (clip) {  // LayerNorm under manual_cast: weight and bias cast to fp32, then layer_norm
      add(OpKind::Norm, layer, 8 * S * d, {{weight, header_.tensors[weight].bytes}, {act_, row}}, {{act_, row}}, 3);
    } else {     // T5LayerNorm: pow, mean, + eps, rsqrt, x * r, the weight cast to fp32, weight * x
      add(OpKind::Norm, layer, 6 * S * d, {{weight, header_.tensors[weight].bytes}, {act_, 4 * row}}, {{act_, 3 * row}}, 7);
    }
  };
  // umT5 as ComfyUI's Wan encoder runs it (comfy/text_encoders/wan.py UMT5XXlModel: enable_attention_masks): T5Stack
  // turns the padding mask into an fp32 S x S mask (1 - mask, masked_fill), which each block adds to its own bias.
  const bool masked = !clip && model_.bias_every_layer;
  if (masked) add(OpKind::Elementwise, -1, S * S, {{act_, kF32 * S}}, {{act_, 2 * kF32 * S * S}}, 4);
  std::size_t li = 0, bi = 0;
  for (std::int32_t l = 0; l < static_cast<std::int32_t>(model_.layers); ++l) {
    norm(l, norms_[2 * static_cast<std::size_t>(l)]);
    for (int k = 0; k < 3; ++k) linear(out, l, linears_[li++], d, in, clip, S);
    if (!clip && (l == 0 || model_.bias_every_layer)) {
      // compute_bias: two aranges, their difference, the bucket arithmetic (about 16 kernels over S x S int64),
      // the table lookup in fp32 (heads wide), permute and contiguous.
      const std::uint32_t table = bias_tables_[bi++];
      add(OpKind::Other, l, 20 * S * S, {{table, header_.tensors[table].bytes}, {act_, 8 * 16 * S * S}},
          {{act_, 8 * 16 * S * S + 2 * kF32 * H * S * S}}, 22);
    }
    if (masked) add(OpKind::Elementwise, l, H * S * S, {{act_, kF32 * (H + 1) * S * S}}, {{act_, kF32 * H * S * S}}, 1);
    if (!clip) elementwise(out, l, kF32 * S * in, kF32 * S * in, 1);  // k * sqrt(d_kv)... the key's scale
    // SDPA with the bias (T5) or the causal mask (CLIP) as an fp32 mask, then the heads merged back.
    add(OpKind::Attention, l, 4 * H * S * S * model_.head_dim,
        {{act_, kF32 * 3 * S * in + kF32 * (clip ? 1 : H) * S * S}}, {{act_, 2 * kF32 * S * in}}, 2);
    linear(out, l, linears_[li++], in, d, clip, S);
    elementwise(out, l, 2 * row, row, 1);  // the residual add
    norm(l, norms_[2 * static_cast<std::size_t>(l) + 1]);
    if (clip) {
      linear(out, l, linears_[li++], d, ff, true, S);
      elementwise(out, l, 2 * kF32 * S * ff, 2 * kF32 * S * ff, 3);  // quick_gelu: x * sigmoid(1.702 x)
      linear(out, l, linears_[li++], ff, d, true, S);
    } else {
      linear(out, l, linears_[li++], d, ff, false, S);
      elementwise(out, l, kF32 * S * ff, kF32 * S * ff, 1);  // GELU (tanh)
      if (model_.gated) {
        linear(out, l, linears_[li++], d, ff, false, S);
        elementwise(out, l, 2 * kF32 * S * ff, kF32 * S * ff, 1);  // gate * linear
      }
      linear(out, l, linears_[li++], ff, d, false, S);
    }
    elementwise(out, l, 2 * row, row, 1);  // the residual add
  }
  norm(static_cast<std::int32_t>(model_.layers), norms_.back());
  if (clip) {
    // The pooled token (its end token's row) through text_projection: one row, fp32 after the weight's cast.
    linear(out, static_cast<std::int32_t>(model_.layers), projection_, d, d, false, 1);
  }
  return true;
}

}  // namespace tiersim::model
