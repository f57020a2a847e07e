#include "model/flux/flux_trace_generator.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "model/diffusion/dit_ops.hpp"
#include "model/diffusion/gguf_dit.hpp"

namespace tiersim::model {

using trace::OpKind;
using trace::StepKind;
using trace::TensorAccess;
using trace::TensorKind;

std::uint64_t flux_image_tokens(const GenerationOptions::Image& image) {
  return static_cast<std::uint64_t>(image.height / 16) * (image.width / 16);
}

FluxTraceGenerator::FluxTraceGenerator(const FluxConfig& model, const GenerationOptions& options)
    : model_(model), options_(options) {
  const auto& im = options_.image;
  const WeightDtype d = options_.dtype;
  const bool gguf = d == WeightDtype::Gguf && is_dit_gguf_file_type(options_.gguf);
  if (d != WeightDtype::Bf16 && d != WeightDtype::Fp16 && d != WeightDtype::Fp8 && d != WeightDtype::Fp32 && !gguf)
    throw InputError("", 0, "--dtype",
                     std::string("'") + dtype_name(options_) + "' is not modelled for a FLUX transformer: bf16, fp16, "
                     "fp32, fp8 (ComfyUI's fp8_e4m3fn weights, cast to bf16 before each Linear), or a GGUF file as "
                     "ComfyUI-GGUF runs it: " + kDitGgufFileTypes);
  check_image_options(options_, "FLUX");
  // The largest products the steps form: attention FLOPs and the activation workspace.
  const std::uint64_t S = flux_image_tokens(im) + im.reference_tokens() + im.text_tokens, h = model_.hidden();
  // ... and the largest Linear's: 2 x rows x (3d + 4d) x d (linear1; the other Linears are smaller).
  checked_product(checked_product(checked_product(2 * im.guided_batch(options_.batch), S, "--resolution",
                                                  "a Linear's FLOPs"),
                                  7 * h, "--resolution", "a Linear's FLOPs"),
                  std::max(h, model_.context_dim), "--resolution", "a Linear's FLOPs");
  checked_product(checked_product(checked_product(4 * im.guided_batch(options_.batch), S, "--resolution", "the attention's FLOPs"), S,
                          "--resolution", "the attention's FLOPs"),
              h, "--resolution", "the attention's FLOPs");

  header_.meta["model"] = model_.name;
  header_.meta["family"] = "flux";
  header_.meta["dtype"] = d == WeightDtype::Fp32 ? "fp32" : d == WeightDtype::Fp16 ? "fp16" : "bf16";
  header_.meta["weight_dtype"] = dtype_name(options_);
  header_.meta["batch"] = std::to_string(options_.batch);
  header_.meta["parameters"] = std::to_string(model_.total_params());
  header_.meta["resolution"] = std::to_string(im.width) + "x" + std::to_string(im.height);
  header_.meta["steps"] = std::to_string(im.steps);
  if (im.guided()) header_.meta["cfg"] = format_scale(im.cfg);
  if (im.forwards() > 1) header_.meta["cfg_separate"] = "1";
  // ComfyUI's Flux: memory_usage_factor 3.1 (supported_models.py), the latent [batch, 16, H / 8, W / 8] and a reference
  // latent's [1, 16, h / 8, w / 8] (model_base.Flux memory_usage_factor_conds: ref_latents).
  set_comfy_memory_per_cond(header_, comfy_memory_required(static_cast<double>(options_.batch) * (im.height / 8) * (im.width / 8) +
                                                               static_cast<double>(im.reference_height / 8) * (im.reference_width / 8),
                                                           d, 3.1));
  header_.meta["image_tokens"] = std::to_string(flux_image_tokens(im));
  header_.meta["text_tokens"] = std::to_string(im.text_tokens);
  if (im.has_reference()) {
    header_.meta["reference"] = std::to_string(im.reference_width) + "x" + std::to_string(im.reference_height);
    header_.meta["reference_tokens"] = std::to_string(im.reference_tokens());
  }
  header_.meta["hidden_size"] = std::to_string(h);
  header_.meta["source"] = "tiersim FLUX generator (ComfyUI's Flux modules; comfy/ldm/flux at a125cd84)";
  if (gguf) header_.meta["weight_copy"] = "sync";  // ComfyUI-GGUF's layers copy their own weights

  // Leaf modules in ComfyUI's registration order (Flux.__init__): groups -1 (inputs), 0..D-1 (double
  // blocks), D..D+S-1 (single blocks), D+S (final layer).
  const std::uint64_t m = model_.mlp_hidden(), hd = model_.head_dim;
  const auto D = static_cast<std::int32_t>(model_.double_blocks);
  const auto Sg = static_cast<std::int32_t>(model_.single_blocks);
  img_in_ = add_linear(-1, "img_in", model_.in_channels, h);
  time_in_[0] = add_linear(-1, "time_in.in_layer", FluxConfig::kTimestepChannels, h);
  time_in_[1] = add_linear(-1, "time_in.out_layer", h, h);
  vector_in_[0] = add_linear(-1, "vector_in.in_layer", model_.pooled_dim, h);
  vector_in_[1] = add_linear(-1, "vector_in.out_layer", h, h);
  if (model_.guidance_embeds) {
    guidance_in_[0] = add_linear(-1, "guidance_in.in_layer", FluxConfig::kTimestepChannels, h);
    guidance_in_[1] = add_linear(-1, "guidance_in.out_layer", h, h);
  }
  txt_in_ = add_linear(-1, "txt_in", model_.context_dim, h);
  const std::uint64_t norm_bytes = hd * norm_bytes_per_param(d);
  for (std::int32_t b = 0; b < D; ++b) {
    const std::string p = "double_blocks." + std::to_string(b) + ".";
    DoubleBlock blk{};
    for (const char* side : {"img", "txt"}) {
      Stream& s = side[0] == 'i' ? blk.img : blk.txt;
      const std::string q = p + side;
      s.mod = add_linear(b, q + "_mod.lin", h, 6 * h);
      s.qkv = add_linear(b, q + "_attn.qkv", h, 3 * h);
      s.q_norm = add_tensor(TensorKind::Weight, norm_bytes, b, q + "_attn.norm.query_norm");
      s.k_norm = add_tensor(TensorKind::Weight, norm_bytes, b, q + "_attn.norm.key_norm");
      s.proj = add_linear(b, q + "_attn.proj", h, h);
      s.mlp_in = add_linear(b, q + "_mlp.0", h, m);
      s.mlp_out = add_linear(b, q + "_mlp.2", m, h);
    }
    double_.push_back(blk);
  }
  for (std::int32_t b = 0; b < Sg; ++b) {
    const std::string p = "single_blocks." + std::to_string(b) + ".";
    SingleBlock blk{};
    blk.linear1 = add_linear(D + b, p + "linear1", h, 3 * h + m);
    blk.linear2 = add_linear(D + b, p + "linear2", h + m, h);
    blk.q_norm = add_tensor(TensorKind::Weight, norm_bytes, D + b, p + "norm.query_norm");
    blk.k_norm = add_tensor(TensorKind::Weight, norm_bytes, D + b, p + "norm.key_norm");
    blk.modulation = add_linear(D + b, p + "modulation.lin", h, 3 * h);
    single_.push_back(blk);
  }
  final_linear_ = add_linear(D + Sg, "final_layer.linear", h, model_.out_channels);
  final_modulation_ = add_linear(D + Sg, "final_layer.adaLN_modulation.1", h, 2 * h);

  // Live activations of a single block, the widest point of the forward: the stream x, its modulated norm,
  // linear1's output (3d + 4d), q and k in fp32 for the rotary embedding, the attention output, GELU's
  // output, their concatenation (5d) and linear2's output; plus the rotary table and, for fp8 weights, the
  // bf16 copy of the largest Linear (GGUF weights: its dequantized result and bf16 copy). An estimate of PyTorch's working set, not its allocator's peak.
  const std::uint64_t a = activation_bytes(d);
  const std::uint64_t rows = checked_product(im.guided_batch(options_.batch), S, "--resolution", "the activation workspace");
  std::uint64_t widest_linear = 0;
  for (const auto& t : header_.tensors) widest_linear = std::max(widest_linear, t.bytes);
  const std::uint64_t cast_copy = d == WeightDtype::Fp8 ? 2 * widest_linear : widest_dequant_;
  act_ = add_tensor(TensorKind::Activation,
                    checked_product(rows, h * (20 * a + 16) + hd * 8, "--resolution", "the activation workspace") + cast_copy,
                    -1, "activations");
}

std::uint32_t FluxTraceGenerator::add_tensor(TensorKind kind, std::uint64_t bytes, std::int32_t group, std::string name) {
  return trace::append_tensor(header_, kind, bytes, group, std::move(name));
}

std::uint32_t FluxTraceGenerator::add_linear(std::int32_t group, const std::string& name, std::uint64_t in,
                                            std::uint64_t out) {
  if (options_.dtype != WeightDtype::Gguf) return add_tensor(TensorKind::Weight, linear_bytes(in, out, options_.dtype), group, name);
  // The weight in its stored type, the bias in F32.
  const gguf::QuantType& type = flux_weight_type(name, in, options_.gguf);
  const std::uint32_t id = add_tensor(TensorKind::Weight, gguf::tensor_bytes(type, in * out) + 4 * out, group, name);
  gguf_types_.resize(id + 1, nullptr);
  gguf_types_[id] = &type;
  const std::uint64_t result_bytes = std::string(type.name) == "BF16" ? 4 : 2;  // dequantize_blocks_BF16 gives fp32
  widest_dequant_ = std::max(widest_dequant_, (in * out + out) * (result_bytes + 2));
  return id;
}

bool FluxTraceGenerator::next(trace::Step& out) {
  if (steps_done_ >= options_.image.steps) return false;
  build_iteration(out);
  ++steps_done_;
  return true;
}

void FluxTraceGenerator::build_iteration(trace::Step& out) const {
  const WeightDtype d = options_.dtype;
  // Under classifier-free guidance (cfg above 1) the negative prompt's pass runs in the same batch, or after it.
  const std::uint64_t B = options_.image.guided_batch(options_.batch);
  // The image stream's rows: the latent's tokens and a reference image's (Kontext), which run through every block and
  // the final layer and are cut off after it (Flux._forward: out[:, :img_tokens]).
  const std::uint64_t So = B * flux_image_tokens(options_.image);
  const std::uint64_t Si = So + B * options_.image.reference_tokens(), St = B * options_.image.text_tokens;
  const std::uint64_t S = Si + St;  // rows of the joint sequence, all images
  const std::uint64_t h = model_.hidden(), m = model_.mlp_hidden(), heads = model_.heads, hd = model_.head_dim;
  const std::uint64_t per_image = S / B;
  const auto D = static_cast<std::int32_t>(model_.double_blocks);
  const auto Sg = static_cast<std::int32_t>(model_.single_blocks);

  out.kind = StepKind::Iteration;
  out.tokens = static_cast<std::uint32_t>(std::min<std::uint64_t>(S, 0xffffffffu));
  out.ops.clear();
  DitOps ops(out, header_, act_, d, &gguf_types_, options_.fp8_scaled);
  auto act = [&](std::uint64_t elems) { return ops.act(elems); };
  auto raw = [&](std::uint64_t bytes) { return ops.raw(bytes); };
  auto add = [&](OpKind k, std::int32_t group, std::uint64_t flops, std::vector<TensorAccess> reads,
                 std::vector<TensorAccess> writes, std::uint32_t launches) {
    ops.add(k, group, flops, std::move(reads), std::move(writes), launches);
  };
  auto linear = [&](std::int32_t g, std::uint32_t w, std::uint64_t rows, std::uint64_t in, std::uint64_t outd) {
    ops.linear(g, w, rows, in, outd);
  };
  auto modulation = [&](std::int32_t g, std::uint32_t w, std::uint64_t outd) {
    add(OpKind::Elementwise, g, 4 * B * h, {act(B * h)}, {act(B * h)}, DitLaunches::silu);
    linear(g, w, B, h, outd);
  };
  // LayerNorm without weights, then x * (1 + scale) + shift.
  auto modulated_norm = [&](std::int32_t g, std::uint64_t rows) {
    ops.modulated_norm(g, rows, h, DitLaunches::modulated_norm);
  };
  auto gated_residual = [&](std::int32_t g, std::uint64_t rows) {
    add(OpKind::Elementwise, g, 2 * rows * h, {act(3 * rows * h)}, {act(2 * rows * h)}, DitLaunches::gated_residual);
  };
  auto qk_norm = [&](std::int32_t g, std::uint32_t q_norm, std::uint32_t k_norm, std::uint64_t rows) {
    for (const std::uint32_t w : {q_norm, k_norm}) ops.rms_norm(g, w, rows, h);
  };
  // Rotary embedding of q and k in fp32 as flux/math.py attention() writes it inline: q.to(fp32), two
  // multiplies by the table, their sum, type_as(v): five kernels each, reading a + 28 and writing a + 16
  // bytes per element; then SDPA over each image's joint sequence (no mask: every token attends to all),
  // and its output made [rows, heads x head_dim] again.
  auto attention = [&](std::int32_t g) {
    const std::uint64_t a = ops.act_bytes(), qk = 2 * S * h;
    add(OpKind::Rope, g, 6 * qk, {raw(qk * (a + 28))}, {raw(qk * (a + 16))}, 2 * 5);
    ops.attention(g, B, heads, per_image, per_image, hd);
  };

  // One forward, or two (the positive and the negative prompt one after the other when ComfyUI does not batch them).
  for (std::uint32_t forward = 0; forward < options_.image.forwards(); ++forward) {
    // Inputs (forward_orig): img_in, the timestep (and guidance) embedders, vector_in, txt_in, the rotary
    // table over the position ids (EmbedND: per axis linspace, pow, einsum, cos/sin, stack; about 30 kernels).
    // A reference latent patchified (process_img's rearrange) and appended to the image's (torch.cat): two copies.
    if (Si > So) add(OpKind::Elementwise, -1, 0, {act((2 * Si - So) * model_.in_channels)}, {act((2 * Si - So) * model_.in_channels)}, 2);
    linear(-1, img_in_, Si, model_.in_channels, h);
    add(OpKind::Elementwise, -1, 8 * B * FluxConfig::kTimestepChannels, {act(B)}, {act(B * FluxConfig::kTimestepChannels)}, 6);
    linear(-1, time_in_[0], B, FluxConfig::kTimestepChannels, h);
    add(OpKind::Elementwise, -1, 4 * B * h, {act(B * h)}, {act(B * h)}, DitLaunches::silu);
    linear(-1, time_in_[1], B, h, h);
    if (model_.guidance_embeds) {
      add(OpKind::Elementwise, -1, 8 * B * FluxConfig::kTimestepChannels, {act(B)}, {act(B * FluxConfig::kTimestepChannels)}, 6);
      linear(-1, guidance_in_[0], B, FluxConfig::kTimestepChannels, h);
      add(OpKind::Elementwise, -1, 4 * B * h, {act(B * h)}, {act(B * h)}, DitLaunches::silu);
      linear(-1, guidance_in_[1], B, h, h);
    }
    linear(-1, vector_in_[0], B, model_.pooled_dim, h);
    add(OpKind::Elementwise, -1, 4 * B * h, {act(B * h)}, {act(B * h)}, DitLaunches::silu);
    linear(-1, vector_in_[1], B, h, h);
    add(OpKind::Elementwise, -1, 2 * B * h, {act(3 * B * h)}, {act(B * h)}, 2);  // vec sums
    linear(-1, txt_in_, St, model_.context_dim, h);
    add(OpKind::Other, -1, 8 * S * hd, {act(S * 3)}, {raw(S * hd * 8)}, 30);

    for (std::int32_t b = 0; b < D; ++b) {
      const DoubleBlock& blk = double_[static_cast<std::size_t>(b)];
      modulation(b, blk.img.mod, 6 * h);
      modulation(b, blk.txt.mod, 6 * h);
      modulated_norm(b, Si);
      linear(b, blk.img.qkv, Si, h, 3 * h);
      qk_norm(b, blk.img.q_norm, blk.img.k_norm, Si);
      modulated_norm(b, St);
      linear(b, blk.txt.qkv, St, h, 3 * h);
      qk_norm(b, blk.txt.q_norm, blk.txt.k_norm, St);
      add(OpKind::Elementwise, b, 0, {act(3 * S * h)}, {act(3 * S * h)}, 3 * DitLaunches::concat);  // cat(txt, img) q, k, v
      attention(b);
      for (const auto& [s, rows] : {std::pair<const Stream&, std::uint64_t>{blk.img, Si}, {blk.txt, St}}) {
        linear(b, s.proj, rows, h, h);
        gated_residual(b, rows);
        modulated_norm(b, rows);
        linear(b, s.mlp_in, rows, h, m);
        add(OpKind::Elementwise, b, 8 * rows * m, {act(rows * m)}, {act(rows * m)}, DitLaunches::gelu);
        linear(b, s.mlp_out, rows, m, h);
        gated_residual(b, rows);
      }
      if (d == WeightDtype::Fp16)  // layers.py: txt = nan_to_num(txt) in fp16
        add(OpKind::Elementwise, b, St * h, {act(St * h)}, {act(St * h)}, 1);
    }
    // img = cat(txt, img), then the single blocks over the joint sequence.
    add(OpKind::Elementwise, D, 0, {act(S * h)}, {act(S * h)}, DitLaunches::concat);
    for (std::int32_t b = 0; b < Sg; ++b) {
      const SingleBlock& blk = single_[static_cast<std::size_t>(b)];
      const std::int32_t g = D + b;
      modulation(g, blk.modulation, 3 * h);
      modulated_norm(g, S);
      linear(g, blk.linear1, S, h, 3 * h + m);
      qk_norm(g, blk.q_norm, blk.k_norm, S);
      attention(g);
      add(OpKind::Elementwise, g, 8 * S * m, {act(S * m)}, {act(S * m)}, DitLaunches::gelu);
      add(OpKind::Elementwise, g, 0, {act(S * (h + m))}, {act(S * (h + m))}, DitLaunches::concat);
      linear(g, blk.linear2, S, h + m, h);
      gated_residual(g, S);
      if (d == WeightDtype::Fp16) add(OpKind::Elementwise, g, S * h, {act(S * h)}, {act(S * h)}, 1);
    }
    // Final layer on the image rows.
    const std::int32_t last = D + Sg;
    modulation(last, final_modulation_, 2 * h);
    modulated_norm(last, Si);
    linear(last, final_linear_, Si, h, model_.out_channels);
  }
  // The sampler's update of every forward's latent (ComfyUI's model wrapper and an Euler step: about ten small kernels).
  const std::uint64_t latent = So * model_.out_channels * options_.image.forwards();
  add(OpKind::Elementwise, D + Sg, 10 * latent, {act(3 * latent)}, {act(2 * latent)}, 10);
}

}  // namespace tiersim::model
