#include "model/qwen_image/qwen_image_trace_generator.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "model/diffusion/dit_ops.hpp"

namespace tiersim::model {

using trace::OpKind;
using trace::StepKind;
using trace::TensorAccess;
using trace::TensorKind;

std::uint64_t qwen_image_tokens(const GenerationOptions::Image& image) {
  return static_cast<std::uint64_t>(image.height / 16) * (image.width / 16);
}

std::vector<QwenImageTraceGenerator::Pass> QwenImageTraceGenerator::passes(const GenerationOptions& o) {
  const auto& im = o.image;
  if (!im.guided()) return {{o.batch, im.text_tokens}};
  if (im.negative_tokens == im.text_tokens && !im.cfg_separate) return {{2ull * o.batch, im.text_tokens}};
  return {{o.batch, im.text_tokens}, {o.batch, im.negative_tokens}};
}

QwenImageTraceGenerator::QwenImageTraceGenerator(const QwenImageConfig& model, const GenerationOptions& options)
    : model_(model), options_(options) {
  const auto& im = options_.image;
  const WeightDtype d = options_.dtype;
  // supported_models.py QwenImage: supported_inference_dtypes [bfloat16, float32] (fp16 overflows in this model).
  if (d != WeightDtype::Bf16 && d != WeightDtype::Fp8 && d != WeightDtype::Fp32)
    throw InputError("", 0, "--dtype",
                     std::string("'") + dtype_name(options_) + "' is not modelled for Qwen-Image: bf16, fp32, or fp8 "
                     "(ComfyUI's qwen_image_fp8_e4m3fn weights, cast to bf16 before each Linear); ComfyUI runs it in "
                     "bf16 or fp32 only (supported_models.py QwenImage); GGUF files are modelled for FLUX only (ComfyUI-GGUF's "
                     "quantizer, tools/lcpp.patch, has image-model rules for FLUX and SD alone)");
  check_image_options(options_, "Qwen-Image");
  if ((im.guided() && im.negative_tokens < 1) || im.negative_tokens > 4096)
    throw InputError("", 0, "--negative-tokens", "must be from 1 to 4096");
  // The image stream's tokens: the latent's and a reference image's (Qwen-Image-Edit), cut off after proj_out.
  const std::uint64_t h = model_.hidden(), I = qwen_image_tokens(im) + im.reference_tokens();
  std::uint64_t widest_rows = 0;
  for (const Pass& p : passes(options_)) {
    const std::uint64_t S = I + p.text_tokens;
    // The largest products a pass forms: its widest Linear's FLOPs and the attention's.
    checked_product(checked_product(checked_product(2 * p.batch, S, "--resolution", "a Linear's FLOPs"), 6 * h,
                                    "--resolution", "a Linear's FLOPs"),
                    std::max(h, model_.context_dim), "--resolution", "a Linear's FLOPs");
    checked_product(checked_product(checked_product(4 * p.batch, S, "--resolution", "the attention's FLOPs"), S,
                                    "--resolution", "the attention's FLOPs"),
                    h, "--resolution", "the attention's FLOPs");
    widest_rows = std::max(widest_rows, p.batch * S);
  }

  header_.meta["model"] = model_.name;
  header_.meta["family"] = "qwen-image";
  header_.meta["dtype"] = d == WeightDtype::Fp32 ? "fp32" : "bf16";
  header_.meta["weight_dtype"] = dtype_name(options_);
  header_.meta["batch"] = std::to_string(options_.batch);
  header_.meta["parameters"] = std::to_string(model_.total_params());
  header_.meta["resolution"] = std::to_string(im.width) + "x" + std::to_string(im.height);
  header_.meta["steps"] = std::to_string(im.steps);
  if (im.guided()) header_.meta["cfg"] = format_scale(im.cfg);
  // A negative prompt of another length runs on its own (CONDRegular); one of the same length shares the batch unless
  // ComfyUI's memory estimate says otherwise (cfg_separate).
  if (im.guided() && im.cfg_separate) header_.meta["cfg_separate"] = "1";
  else if (passes(options_).size() > 1) header_.meta["negative_tokens"] = std::to_string(im.negative_tokens);
  // ComfyUI's QwenImage: memory_usage_factor 1.8 (supported_models.py), the latent [batch, 16, 1, H / 8, W / 8] and a
  // reference latent's (model_base.QwenImage memory_usage_factor_conds: ref_latents).
  set_comfy_memory_per_cond(header_, comfy_memory_required(static_cast<double>(options_.batch) * (im.height / 8) * (im.width / 8) +
                                                               static_cast<double>(im.reference_height / 8) * (im.reference_width / 8),
                                                           d, 1.8));
  header_.meta["image_tokens"] = std::to_string(qwen_image_tokens(im));
  header_.meta["text_tokens"] = std::to_string(im.text_tokens);
  if (im.has_reference()) {
    header_.meta["reference"] = std::to_string(im.reference_width) + "x" + std::to_string(im.reference_height);
    header_.meta["reference_tokens"] = std::to_string(im.reference_tokens());
  }
  header_.meta["hidden_size"] = std::to_string(h);
  header_.meta["source"] = "tiersim Qwen-Image generator (ComfyUI's QwenImageTransformer2DModel; comfy/ldm/qwen_image at a125cd84)";

  // Leaf modules with weights in ComfyUI's registration order (QwenImageTransformer2DModel.__init__): group -1 the
  // inputs, 0..L-1 the blocks, L the final layer. Inside a block: img_mod, img_mlp, txt_mod, txt_mlp, then attn
  // (the weightless LayerNorms between them own nothing).
  const std::uint64_t m = model_.mlp_hidden(), hd = model_.head_dim;
  const std::uint64_t norm = norm_bytes_per_param(d);
  time_[0] = add_linear(-1, "time_text_embed.timestep_embedder.linear_1", QwenImageConfig::kTimestepChannels, h);
  time_[1] = add_linear(-1, "time_text_embed.timestep_embedder.linear_2", h, h);
  txt_norm_ = add_tensor(TensorKind::Weight, model_.context_dim * norm, -1, "txt_norm");
  img_in_ = add_linear(-1, "img_in", model_.in_channels, h);
  txt_in_ = add_linear(-1, "txt_in", model_.context_dim, h);
  for (std::uint64_t b = 0; b < model_.layers; ++b) {
    const auto g = static_cast<std::int32_t>(b);
    const std::string p = "transformer_blocks." + std::to_string(b) + ".";
    Block blk{};
    for (Stream* s : {&blk.img, &blk.txt}) {
      const std::string side = s == &blk.img ? "img" : "txt";
      s->mod = add_linear(g, p + side + "_mod.1", h, 6 * h);
      s->mlp_in = add_linear(g, p + side + "_mlp.net.0.proj", h, m);
      s->mlp_out = add_linear(g, p + side + "_mlp.net.2", m, h);
    }
    const std::string a = p + "attn.";
    blk.img.q_norm = add_tensor(TensorKind::Weight, hd * norm, g, a + "norm_q");
    blk.img.k_norm = add_tensor(TensorKind::Weight, hd * norm, g, a + "norm_k");
    blk.txt.q_norm = add_tensor(TensorKind::Weight, hd * norm, g, a + "norm_added_q");
    blk.txt.k_norm = add_tensor(TensorKind::Weight, hd * norm, g, a + "norm_added_k");
    blk.img.q = add_linear(g, a + "to_q", h, h);
    blk.img.k = add_linear(g, a + "to_k", h, h);
    blk.img.v = add_linear(g, a + "to_v", h, h);
    blk.txt.q = add_linear(g, a + "add_q_proj", h, h);
    blk.txt.k = add_linear(g, a + "add_k_proj", h, h);
    blk.txt.v = add_linear(g, a + "add_v_proj", h, h);
    blk.img.out = add_linear(g, a + "to_out.0", h, h);
    blk.txt.out = add_linear(g, a + "to_add_out", h, h);
    blocks_.push_back(blk);
  }
  const auto last = static_cast<std::int32_t>(model_.layers);
  final_modulation_ = add_linear(last, "norm_out.linear", h, 2 * h);
  proj_out_ = add_linear(last, "proj_out", h, model_.out_features());

  // Live activations at the widest point of a block, per token row (image and text alike): the stream's x, its
  // modulated norm, q, k and v, their joint concatenations, the rotary embedding's two products and its output,
  // the attention output: 16 elements of the width; the MLP's (x, the modulated norm, the 4d hidden and GELU's
  // output: 10) is narrower. Plus the rotary table (2 x head_dim elements per row) and, for fp8 weights, the bf16
  // copy of the largest Linear. The widest pass, as the passes run one after the other. An estimate of PyTorch's
  // working set, not its allocator's peak.
  const std::uint64_t act = activation_bytes(d);
  std::uint64_t widest_linear = 0;
  for (const auto& t : header_.tensors) widest_linear = std::max(widest_linear, t.bytes);
  act_ = add_tensor(TensorKind::Activation,
                    checked_product(widest_rows, h * 16 * act + 2 * hd * act, "--resolution", "the activation workspace") +
                        (d == WeightDtype::Fp8 ? 2 * widest_linear : 0),
                    -1, "activations");
}

std::uint32_t QwenImageTraceGenerator::add_tensor(TensorKind kind, std::uint64_t bytes, std::int32_t group,
                                                  std::string name) {
  return trace::append_tensor(header_, kind, bytes, group, std::move(name));
}

std::uint32_t QwenImageTraceGenerator::add_linear(std::int32_t group, const std::string& name, std::uint64_t in,
                                                  std::uint64_t out) {
  return add_tensor(TensorKind::Weight, linear_bytes(in, out, options_.dtype), group, name);
}

bool QwenImageTraceGenerator::next(trace::Step& out) {
  if (steps_done_ >= options_.image.steps) return false;
  out.kind = StepKind::Iteration;
  out.ops.clear();
  std::uint64_t rows = 0, latent_rows = 0;
  for (const Pass& p : passes(options_)) {
    build_pass(out, p);
    rows += p.batch * (qwen_image_tokens(options_.image) + options_.image.reference_tokens() + p.text_tokens);
    latent_rows += p.batch * qwen_image_tokens(options_.image);
  }
  // Once per iteration, over every pass's output: the guidance's combination and the sampler's update of the latent
  // (ComfyUI's model wrapper and an Euler step: about ten small kernels).
  const std::uint64_t o = model_.out_features();
  DitOps ops(out, header_, act_, options_.dtype, nullptr, options_.fp8_scaled);
  ops.add(OpKind::Elementwise, static_cast<std::int32_t>(blocks_.size()), 10 * latent_rows * o,
          {ops.act(3 * latent_rows * o)}, {ops.act(2 * latent_rows * o)}, 10);
  out.tokens = static_cast<std::uint32_t>(std::min<std::uint64_t>(rows, 0xffffffffu));
  ++steps_done_;
  return true;
}

void QwenImageTraceGenerator::build_pass(trace::Step& out, const Pass& pass) const {
  // The image stream's rows: the latent's and a reference image's (Qwen-Image-Edit: ComfyUI's ReferenceLatent), which
  // run through every block, norm_out and proj_out and are cut off after them (out[:, :num_embeds]).
  const std::uint64_t image = qwen_image_tokens(options_.image), ref = options_.image.reference_tokens();
  const std::uint64_t B = pass.batch, per_image = image + ref + pass.text_tokens;
  const std::uint64_t Si = B * (image + ref), St = B * pass.text_tokens, S = Si + St;
  const std::uint64_t h = model_.hidden(), m = model_.mlp_hidden(), hd = model_.head_dim, T = QwenImageConfig::kTimestepChannels;
  const std::uint64_t lat = model_.in_channels;  // packed latent elements per image token
  DitOps ops(out, header_, act_, options_.dtype, nullptr, options_.fp8_scaled);
  auto act = [&](std::uint64_t elems) { return ops.act(elems); };
  auto raw = [&](std::uint64_t bytes) { return ops.raw(bytes); };
  auto add = [&](OpKind k, std::int32_t group, std::uint64_t flops, std::vector<TensorAccess> reads,
                 std::vector<TensorAccess> writes, std::uint32_t launches) {
    ops.add(k, group, flops, std::move(reads), std::move(writes), launches);
  };
  auto silu = [&](std::int32_t g) { add(OpKind::Elementwise, g, 4 * B * h, {act(B * h)}, {act(B * h)}, DitLaunches::silu); };

  // Inputs (_forward): process_img's patch packing (one copy of the latent), the position ids and EmbedND's rotary
  // table (per axis arange/linspace, pow, einsum, cos/sin, stack, the cast to the model's dtype: about 38 kernels),
  // img_in, txt_norm and txt_in on the text, the timestep's sinusoid (6 kernels) through linear_1, SiLU, linear_2.
  add(OpKind::Elementwise, -1, 0, {act(Si * lat)}, {act(Si * lat)}, 1);
  // A reference latent: packed as the image's (above) and appended to it (torch.cat, one copy of both).
  if (ref > 0) add(OpKind::Elementwise, -1, 0, {act(Si * lat)}, {act(Si * lat)}, 1);
  add(OpKind::Other, -1, 8 * S * hd, {act(S * 3)}, {raw(S * hd * 12)}, 38);
  ops.linear(-1, img_in_, Si, lat, h);
  ops.rms_norm(-1, txt_norm_, St, model_.context_dim);
  ops.linear(-1, txt_in_, St, model_.context_dim, h);
  add(OpKind::Elementwise, -1, 8 * B * T, {act(B)}, {act(B * T)}, 6);
  ops.linear(-1, time_[0], B, T, h);
  silu(-1);
  ops.linear(-1, time_[1], B, h, h);

  for (std::size_t bi = 0; bi < blocks_.size(); ++bi) {
    const Block& blk = blocks_[bi];
    const auto g = static_cast<std::int32_t>(bi);
    // QwenImageTransformerBlock.forward: both modulations (SiLU, Linear(d, 6d)), the first modulated norms, the
    // attention's projections and q/k norms per stream, q, k, v concatenated (text first), the rotary embedding of q
    // and k (apply_rotary_emb in the model's dtype: two products and their sum, three kernels each), SDPA over each
    // image's joint sequence (the text mask is dropped when it is all ones), the output projections.
    for (const Stream* s : {&blk.img, &blk.txt}) {
      silu(g);
      ops.linear(g, s->mod, B, h, 6 * h);
    }
    for (const auto& [s, rows] : {std::pair<const Stream&, std::uint64_t>{blk.img, Si}, {blk.txt, St}}) {
      ops.modulated_norm(g, rows, h, DitLaunches::modulated_norm);
    }
    for (const auto& [s, rows] : {std::pair<const Stream&, std::uint64_t>{blk.img, Si}, {blk.txt, St}}) {
      for (const std::uint32_t w : {s.q, s.k, s.v}) ops.linear(g, w, rows, h, h);
    }
    for (const auto& [s, rows] : {std::pair<const Stream&, std::uint64_t>{blk.img, Si}, {blk.txt, St}}) {
      for (const std::uint32_t w : {s.q_norm, s.k_norm}) ops.rms_norm(g, w, rows, h);
    }
    add(OpKind::Elementwise, g, 0, {act(3 * S * h)}, {act(3 * S * h)}, 3 * DitLaunches::concat);
    const std::uint64_t qk = 2 * S * h;
    add(OpKind::Rope, g, 3 * qk, {act(3 * qk)}, {act(3 * qk)}, 2 * 3);
    ops.attention(g, B, model_.heads, per_image, per_image, hd);
    // Then per stream (image, then text): the output projection and its gated residual (multiply, add), the second
    // modulated norm, the MLP (Linear, GELU tanh, Linear) and its gated residual in one addcmul.
    for (const auto& [s, rows] : {std::pair<const Stream&, std::uint64_t>{blk.img, Si}, {blk.txt, St}}) {
      ops.linear(g, s.out, rows, h, h);
      add(OpKind::Elementwise, g, 2 * rows * h, {act(3 * rows * h)}, {act(2 * rows * h)}, DitLaunches::gated_residual);
    }
    for (const auto& [s, rows] : {std::pair<const Stream&, std::uint64_t>{blk.img, Si}, {blk.txt, St}}) {
      ops.modulated_norm(g, rows, h, DitLaunches::modulated_norm);
      ops.linear(g, s.mlp_in, rows, h, m);
      add(OpKind::Elementwise, g, 8 * rows * m, {act(rows * m)}, {act(rows * m)}, DitLaunches::gelu);
      ops.linear(g, s.mlp_out, rows, m, h);
      add(OpKind::Elementwise, g, 2 * rows * h, {act(3 * rows * h)}, {act(rows * h)}, 1);
    }
  }
  // norm_out (LastLayer: SiLU, Linear(d, 2d), LayerNorm, addcmul) and proj_out on the image rows, then the unpacking.
  const auto last = static_cast<std::int32_t>(blocks_.size());
  silu(last);
  ops.linear(last, final_modulation_, B, h, 2 * h);
  ops.modulated_norm(last, Si, h, DitLaunches::modulated_norm);
  const std::uint64_t o = model_.out_features();
  ops.linear(last, proj_out_, Si, h, o);
  add(OpKind::Elementwise, last, 0, {act(B * image * o)}, {act(B * image * o)}, 1);  // the image's rows, unpacked
}

}  // namespace tiersim::model
