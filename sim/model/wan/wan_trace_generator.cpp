#include "model/wan/wan_trace_generator.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "model/diffusion/dit_ops.hpp"

namespace tiersim::model {

using trace::OpKind;
using trace::StepKind;
using trace::TensorKind;

std::uint64_t wan_video_tokens(const WanConfig& m, const GenerationOptions::Image& im) {
  const std::uint64_t latent_frames = (im.frames - 1) / 4 + 1;
  return (latent_frames / m.patch[0]) * (im.height / m.vae_spatial / m.patch[1]) * (im.width / m.vae_spatial / m.patch[2]);
}

WanTraceGenerator::WanTraceGenerator(const WanConfig& model, const GenerationOptions& options)
    : model_(model), options_(options) {
  const auto& im = options_.image;
  const WeightDtype d = options_.dtype;
  if (d != WeightDtype::Bf16 && d != WeightDtype::Fp16 && d != WeightDtype::Fp8 && d != WeightDtype::Fp32)
    throw InputError("", 0, "--dtype",
                     std::string("'") + dtype_name(options_) + "' is not modelled for a Wan transformer: bf16, fp16, "
                     "fp32, or fp8 (ComfyUI's fp8_e4m3fn weights, cast to bf16 before each Linear); GGUF files are modelled "
                     "for FLUX only");
  const std::uint64_t px = model_.vae_spatial * model_.patch[1], py = model_.vae_spatial * model_.patch[2];
  // patch[1] is the height's, patch[2] the width's (WanModel's patch_size (t, h, w)).
  if (im.width < py || im.height < px || im.width > 16384 || im.height > 16384 || im.width % py != 0 ||
      im.height % px != 0)
    throw InputError("", 0, "--resolution",
                     "width must be a multiple of " + std::to_string(py) + " and height of " + std::to_string(px) +
                         ", up to 16384 (the VAE's /" + std::to_string(model_.vae_spatial) + " and the patch), got " +
                         std::to_string(im.width) + "x" +
                         std::to_string(im.height));
  if (im.frames < 1 || im.frames > 100001 || (im.frames - 1) % 4 != 0 || ((im.frames - 1) / 4 + 1) % model_.patch[0] != 0)
    throw InputError("", 0, "--frames", "a Wan video has 4k + 1 frames (1, 5, ..., 81; the VAE compresses time 4x), got " +
                                            std::to_string(im.frames));
  if (im.steps < 1 || im.steps > 100000) throw InputError("", 0, "--steps", "must be from 1 to 100000");
  if (im.text_tokens < 1 || im.text_tokens > 4096) throw InputError("", 0, "--text-tokens", "must be from 1 to 4096");
  if (options_.batch < 1 || options_.batch > 4096) throw InputError("", 0, "--batch", "videos per iteration: 1 to 4096");
  if (im.has_reference())
    throw InputError("", 0, "--reference", "is a reference image for FLUX.1 Kontext or Qwen-Image-Edit; a Wan model takes none");
  if (im.start_image && model_.vae_spatial != 16)
    throw InputError("", 0, "--start-image",
                     "is Wan 2.2 TI2V-5B's image-to-video (a 48-channel model); Wan 2.1's image-to-video is another "
                     "model (a CLIP image context), not modelled");
  if (model_.two_experts()) {
    switch_step_ = im.switch_step ? im.switch_step : im.steps / 2;
    if (switch_step_ < 1 || switch_step_ >= im.steps)
      throw InputError("", 0, "--switch-step",
                       "the low-noise expert takes over at a step from 1 to " + std::to_string(im.steps - 1) +
                           " of the " + std::to_string(im.steps) + " steps (each expert runs at least one), got " +
                           std::to_string(switch_step_));
  } else if (im.switch_step) {
    throw InputError("", 0, "--switch-step",
                     "is for a model with two experts (Wan 2.2 A14B: its config's boundary_ratio); " + model_.name +
                         " is one transformer");
  }
  const std::uint64_t B = im.guided_batch(options_.batch), T = wan_video_tokens(model_, im), h = model_.dim();
  // The largest Linear's FLOPs: 2 x rows (video or text) x its widest in x out.
  const std::uint64_t widest_linear = std::max({h * model_.ffn_dim, h * h, model_.text_dim * h,
                                                model_.patch_volume() * model_.in_channels * h});
  checked_product(checked_product(2 * B, std::max<std::uint64_t>(T, im.text_tokens), "--resolution", "a Linear's FLOPs"),
                  widest_linear, "--resolution", "a Linear's FLOPs");
  checked_product(checked_product(checked_product(4 * B, T, "--resolution", "the attention's FLOPs"), T, "--resolution",
                                  "the attention's FLOPs"),
                  h, "--resolution", "the attention's FLOPs");

  header_.meta["model"] = model_.name;
  header_.meta["family"] = "wan";
  header_.meta["dtype"] = d == WeightDtype::Fp32 ? "fp32" : d == WeightDtype::Fp16 ? "fp16" : "bf16";
  header_.meta["weight_dtype"] = dtype_name(options_);
  header_.meta["batch"] = std::to_string(options_.batch);
  header_.meta["parameters"] = std::to_string(model_.total_params());
  header_.meta["resolution"] = std::to_string(im.width) + "x" + std::to_string(im.height);
  header_.meta["frames"] = std::to_string(im.frames);
  if (im.start_image) header_.meta["start_image"] = "1";
  header_.meta["steps"] = std::to_string(im.steps);
  // Both experts have this one shape: the trace is one transformer's, each iteration either expert's.
  if (model_.two_experts()) header_.meta["switch_step"] = std::to_string(switch_step_);
  if (im.guided()) header_.meta["cfg"] = format_scale(im.cfg);
  if (im.forwards() > 1) header_.meta["cfg_separate"] = "1";
  // ComfyUI's WAN21_T2V (and WAN22_T2V, its subclass) sets memory_usage_factor = dim / 2222; the latent is
  // [batch, channels, latent frames, H / s, W / s].
  set_comfy_memory_per_cond(header_, comfy_memory_required(static_cast<double>(options_.batch) * ((im.frames - 1) / 4 + 1) *
                                                               (im.height / model_.vae_spatial) * (im.width / model_.vae_spatial),
                                                           d, static_cast<double>(h) / 2222.0));
  header_.meta["image_tokens"] = std::to_string(T);
  header_.meta["text_tokens"] = std::to_string(im.text_tokens);
  header_.meta["hidden_size"] = std::to_string(h);
  header_.meta["source"] = "tiersim Wan generator (ComfyUI's WanModel modules; comfy/ldm/wan at a125cd84)";

  // ComfyUI's registration order (WanModel.__init__): group -1 the embeddings, 0..L-1 the blocks, L the head.
  const std::uint64_t norm = norm_bytes_per_param(d);
  // The Conv3d patch embedding is built in fp32 whatever the model's dtype (model.py: dtype=torch.float32).
  patch_embedding_ = add_tensor(TensorKind::Weight, 4 * model_.patch_embedding_params(), -1, "patch_embedding");
  text_embedding_[0] = add_linear(-1, "text_embedding.0", model_.text_dim, h);
  text_embedding_[1] = add_linear(-1, "text_embedding.2", h, h);
  time_embedding_[0] = add_linear(-1, "time_embedding.0", model_.freq_dim, h);
  time_embedding_[1] = add_linear(-1, "time_embedding.2", h, h);
  time_projection_ = add_linear(-1, "time_projection.1", h, 6 * h);
  for (std::uint64_t b = 0; b < model_.layers; ++b) {
    const auto g = static_cast<std::int32_t>(b);
    const std::string p = "blocks." + std::to_string(b) + ".";
    Block blk;
    blk.modulation = add_tensor(TensorKind::Weight, 6 * h * norm, g, p + "modulation");
    for (const char* kind : {"self_attn", "cross_attn"}) {
      Attention& at = kind[0] == 's' ? blk.self : blk.cross;
      const std::string q = p + kind + ".";
      at.q = add_linear(g, q + "q", h, h);
      at.k = add_linear(g, q + "k", h, h);
      at.v = add_linear(g, q + "v", h, h);
      at.o = add_linear(g, q + "o", h, h);
      at.norm_q = add_tensor(TensorKind::Weight, h * norm, g, q + "norm_q");
      at.norm_k = add_tensor(TensorKind::Weight, h * norm, g, q + "norm_k");
      if (kind[0] == 's' && model_.cross_attn_norm) blk.norm3 = add_tensor(TensorKind::Weight, 2 * h * norm, g, p + "norm3");
    }
    blk.ffn_in = add_linear(g, p + "ffn.0", h, model_.ffn_dim);
    blk.ffn_out = add_linear(g, p + "ffn.2", model_.ffn_dim, h);
    blocks_.push_back(blk);
  }
  const auto last = static_cast<std::int32_t>(model_.layers);
  head_modulation_ = add_tensor(TensorKind::Weight, 2 * h * norm, last, "head.modulation");
  head_ = add_linear(last, "head.head", h, model_.patch_volume() * model_.out_channels);

  // Activations as ComfyUI's forward makes them: each a transient value (trace kind tmp) named by the forward below
  // and declared by building it once; the planner derives when each is alive. Only the sampler's state stays for the
  // whole run: the noisy latent and the model's outputs it combines (its two reads and writes of latents a forward)
  // and the encoded prompt (umT5's output, text_dim wide), per forward.
  const std::uint64_t a = activation_bytes(d), fw = im.forwards();
  const std::uint64_t latent = checked_product(B * T, model_.patch_volume() * model_.in_channels, "--resolution", "the latent");
  sampler_ = add_tensor(TensorKind::Activation,
                        checked_product(fw, (2 * latent + B * im.text_tokens * model_.text_dim) * a, "--resolution",
                                        "the sampler's latents"),
                        -1, "sampler (latents and the encoded prompt)");
  checked_product(B * T, model_.ffn_dim * a, "--resolution", "an activation");
  values_.declare_into(&header_);
  trace::Step first;
  build_iteration(first);
  values_.declare_into(nullptr);
  set_transient_peak(header_, first);
  trace::assign_components(header_, "dit");
}

std::uint32_t WanTraceGenerator::add_tensor(TensorKind kind, std::uint64_t bytes, std::int32_t group, std::string name) {
  return trace::append_tensor(header_, kind, bytes, group, std::move(name));
}

std::uint32_t WanTraceGenerator::add_linear(std::int32_t group, const std::string& name, std::uint64_t in, std::uint64_t out) {
  return parameters_.add(header_, group, name, linear_parameter_bytes(in, out, options_.dtype));
}

bool WanTraceGenerator::next(trace::Step& out) {
  if (steps_done_ >= options_.image.steps) return false;
  build_iteration(out);
  ++steps_done_;
  return true;
}

void WanTraceGenerator::build_iteration(trace::Step& out) {
  const auto& im = options_.image;
  const std::uint64_t B = im.guided_batch(options_.batch), T = wan_video_tokens(model_, im), L = im.text_tokens;
  const std::uint64_t h = model_.dim(), heads = model_.heads, hd = model_.head_dim, ffn = model_.ffn_dim;
  const std::uint64_t rows = B * T, text_rows = B * L, pv = model_.patch_volume();
  const std::uint64_t latent = rows * pv * model_.in_channels;  // latent elements
  out.kind = StepKind::Iteration;
  out.tokens = static_cast<std::uint32_t>(std::min<std::uint64_t>(rows, 0xffffffffu));
  out.ops.clear();
  DitOps ops(out, header_, options_.dtype, values_, nullptr, options_.fp8_scaled);
  const std::uint64_t a = ops.act_bytes();
  // With a start image the timestep is one per latent frame (model_base.WAN22.process_timestep): the time MLPs and
  // the modulations run on B x F rows, and every modulation a block (or the head) applies is expanded to its tokens
  // (comfy/ldm/wan/model.py repeat_e: torch.repeat_interleave) where it is used, read in full by its addcmul.
  const std::uint64_t F = im.start_image ? (im.frames - 1) / 4 + 1 : 1, BF = B * F;
  const std::uint64_t R = rows * h;  // elements of one token-wide activation
  // The residual stream: a block's input stays alive until the block returns (forward_orig's `x = block(x, ...)`
  // holds it), so its output is another value: the blocks alternate between two.
  const std::uint32_t stream[2] = {ops.value("x", R), ops.value("x'", R)};
  const std::uint32_t x_attn = ops.value("x + self_attn", R), x_cross = ops.value("x + cross_attn", R);
  const std::uint32_t normed = ops.value("norm(x)", R), modulated = ops.value("modulated norm(x)", R);
  const std::uint32_t q0 = ops.value("q(x)", R), q1 = ops.value("norm_q(q(x))", R), k0 = ops.value("k(x)", R),
                      k1 = ops.value("norm_k(k(x))", R), f32 = ops.value("rope: x.to(fp32)", R, 4),
                      rotated = ops.value("rope: x_out (fp32)", R, 4), q = ops.value("q", R), k = ops.value("k", R), v = ops.value("v(x)", R),
                      sdpa = ops.value("sdpa", R), attn = ops.value("attention", R), y = ops.value("y", R);
  const std::uint32_t ctx = ops.value("context", text_rows * h), cq0 = ops.value("cross q(x)", R), cq = ops.value("cross q", R),
                      ck0 = ops.value("cross k(context)", text_rows * h), ck = ops.value("cross k", text_rows * h),
                      cv = ops.value("cross v", text_rows * h), csdpa = ops.value("cross sdpa", R), cattn = ops.value("cross attention", R),
                      cy = ops.value("cross_attn(x)", R);
  const std::uint32_t hidden = ops.value("ffn.0(x)", rows * ffn), gelu = ops.value("gelu", rows * ffn);
  const std::uint32_t e0 = ops.value("e0 (time_projection)", BF * 6 * h), e = ops.value("e (time_embedding)", BF * h),
                      e6 = ops.value("block e", BF * 6 * h);
  const std::uint32_t freqs = ops.value("rope table", T * hd * 8, 1);
  // Per-frame modulations expanded to the tokens (start image only): a shift, a scale and its 1 + scale at a norm,
  // a gate at a residual.
  const std::uint32_t shift = F > 1 ? ops.value("repeat_e(shift)", R) : 0, scale = F > 1 ? ops.value("repeat_e(scale)", R) : 0,
                      scale1 = F > 1 ? ops.value("1 + repeat_e(scale)", R) : 0, gate = F > 1 ? ops.value("repeat_e(gate)", R) : 0;
  // repeat_e at a modulated norm (two chunks of `chunks` read: shift and scale, then 1 + scale) and at a gated residual.
  auto expand_norm = [&](std::int32_t g, std::uint32_t chunks) {
    // 1 + scale reads the expanded scale; the norm's addcmul reads the shift and 1 + scale (counted here).
    ops.add(OpKind::Elementwise, g, R, {{chunks, 2 * BF * h * a}}, {ops.at(shift, R), ops.at(scale, R), ops.at(scale1, R)}, 3)
        .reread_bytes = 3 * R * a;
  };
  // repeat_e of a gate; its addcmul reads the expanded gate again, counted here as well as in the residual (a double
  // count from before the generator named its values, kept so that the validated iterations' times stay as they were).
  auto expand_gate = [&](std::int32_t g) {
    ops.add(OpKind::Elementwise, g, 0, {ops.at(e6, BF * h)}, {ops.at(gate, R)}, 1).reread_bytes = R * a;
  };
  // The gated residual addcmul(x, y, gate): the gate read per token, from the block's e (one row per video) or its
  // expanded value.
  auto gated_residual = [&](std::int32_t g, std::uint32_t x, std::uint32_t in, std::uint32_t to) -> trace::Op& {
    trace::Op& op = ops.add(OpKind::Elementwise, g, 2 * R, {ops.at(x, R), ops.at(in, R)}, {ops.at(to, R)}, 1);
    if (F > 1) {
      op.reads.push_back(ops.at(gate, R));
    } else {
      op.reads.push_back(ops.at(e6, BF * h));
      op.reread_bytes = R * a - BF * h * a;
    }
    return op;
  };

  // One forward, or two (the positive and the negative prompt one after the other when ComfyUI does not batch them).
  for (std::uint32_t forward = 0; forward < im.forwards(); ++forward) {
    // Embeddings (forward_orig): the latent cast to fp32 and the Conv3d patch embedding (cuDNN, TF32 allowed
    // by PyTorch's default), cast back; the timestep's sinusoid, time_embedding, time_projection; the text
    // through text_embedding; the rotary table over (t, h, w) ids (rope_encode, EmbedND: about 30 kernels).
    const std::uint32_t lat32 = ops.value("x.float()", latent, 4), patch32 = ops.value("patch_embedding(x)", R, 4);
    ops.add(OpKind::Elementwise, -1, latent, {ops.at(sampler_, latent)}, {ops.at(lat32, latent, 4)}, 1);
    ops.add(OpKind::Gemm, -1, 2 * rows * pv * model_.in_channels * h, {ops.whole(patch_embedding_), ops.at(lat32, latent, 4)},
            {ops.at(patch32, R, 4)}, 1, "tf32");
    ops.add(OpKind::Elementwise, -1, R, {ops.at(patch32, R, 4)}, {ops.at(stream[0], R)}, 2);  // .to(dtype), flatten
    const std::uint32_t sinusoid = ops.value("sinusoid", BF * model_.freq_dim), t1 = ops.value("time_embedding.0", BF * h),
                        t2 = ops.value("time_embedding.1", BF * h), t3 = ops.value("time_projection.0", BF * h);
    ops.add(OpKind::Elementwise, -1, 8 * BF * model_.freq_dim, {ops.at(sampler_, BF)}, {ops.at(sinusoid, BF * model_.freq_dim)}, 6);
    ops.linear(-1, time_embedding_[0], BF, model_.freq_dim, h, sinusoid, t1);
    ops.add(OpKind::Elementwise, -1, 4 * BF * h, {ops.at(t1, BF * h)}, {ops.at(t2, BF * h)}, DitLaunches::silu);
    ops.linear(-1, time_embedding_[1], BF, h, h, t2, e);
    ops.add(OpKind::Elementwise, -1, 4 * BF * h, {ops.at(e, BF * h)}, {ops.at(t3, BF * h)}, DitLaunches::silu);
    ops.linear(-1, time_projection_, BF, h, 6 * h, t3, e0);
    const std::uint32_t c0 = ops.value("text_embedding.0", text_rows * h), c1 = ops.value("text_embedding.1", text_rows * h);
    ops.linear(-1, text_embedding_[0], text_rows, model_.text_dim, h, sampler_, c0);  // the encoded prompt
    ops.add(OpKind::Elementwise, -1, 8 * text_rows * h, {ops.at(c0, text_rows * h)}, {ops.at(c1, text_rows * h)}, DitLaunches::gelu);
    ops.linear(-1, text_embedding_[1], text_rows, h, h, c1, ctx);
    ops.add(OpKind::Other, -1, 8 * T * hd, {ops.at(sampler_, T * 3)}, {ops.at(freqs, T * hd * 8, 1)}, 30);

    for (std::size_t i = 0; i < blocks_.size(); ++i) {
      const Block& blk = blocks_[i];
      const auto g = static_cast<std::int32_t>(i);
      const std::uint32_t x = stream[i % 2], next = stream[(i + 1) % 2];
      // e = (modulation + e0).chunk(6): the parameter cast to the activations' dtype and added.
      ops.add(OpKind::Elementwise, g, BF * 6 * h, {ops.whole(blk.modulation), ops.at(e0, BF * 6 * h)}, {ops.at(e6, BF * 6 * h)}, 2);
      // Self-attention on the modulated norm, which stays alive (the call's argument) until self_attn returns.
      if (F > 1) expand_norm(g, e6);
      {
        trace::Op& op = ops.modulated_norm(g, rows, h, DitLaunches::modulated_norm, x, normed, modulated);
        if (F > 1) op.keeps = {shift, scale1};
      }
      // q first, then k (qkv_fn_q, qkv_fn_k): each through its Linear, RMSNorm over the width and apply_rope1, whose
      // fp32 intermediates are freed when the sub-function returns.
      ops.linear(g, blk.self.q, rows, h, h, modulated, q0);
      ops.rms_norm(g, blk.self.norm_q, rows, h, q0, q1);
      ops.rope(g, R, DitLaunches::rope, q1, f32, rotated, q, freqs, B * heads);
      ops.linear(g, blk.self.k, rows, h, h, modulated, k0);
      ops.rms_norm(g, blk.self.norm_k, rows, h, k0, k1);
      ops.rope(g, R, DitLaunches::rope, k1, f32, rotated, k, freqs, B * heads);
      ops.linear(g, blk.self.v, rows, h, h, modulated, v);
      ops.attention(g, B, heads, T, T, hd, q, k, v, sdpa, attn);
      ops.linear(g, blk.self.o, rows, h, h, attn, y).keeps = {q, k, modulated};  // self_attn's locals and argument
      if (F > 1) expand_gate(g);
      gated_residual(g, x, y, x_attn);  // x = addcmul(x, y, e2); del y
      // Cross-attention to the text: norm3 (LayerNorm with weights), q over the video, k and v over the text.
      std::uint32_t cross_in = x_attn;
      if (model_.cross_attn_norm) {
        ops.add(OpKind::Norm, g, 8 * R, {ops.whole(blk.norm3), ops.at(x_attn, R)}, {ops.at(normed, R)}, 1);
        cross_in = normed;
      }
      ops.linear(g, blk.cross.q, rows, h, h, cross_in, cq0);
      ops.rms_norm(g, blk.cross.norm_q, rows, h, cq0, cq);
      ops.linear(g, blk.cross.k, text_rows, h, h, ctx, ck0);
      ops.rms_norm(g, blk.cross.norm_k, text_rows, h, ck0, ck);
      ops.linear(g, blk.cross.v, text_rows, h, h, ctx, cv);
      ops.attention(g, B, heads, T, L, hd, cq, ck, cv, csdpa, cattn);
      ops.linear(g, blk.cross.o, rows, h, h, cattn, cy).keeps = {cross_in};
      ops.add(OpKind::Elementwise, g, R, {ops.at(x_attn, R), ops.at(cy, R)}, {ops.at(x_cross, R)}, 1);  // x = x + cross
      // FFN on the modulated norm (alive until ffn returns), gated back: addcmul(x, y, e5).
      if (F > 1) expand_norm(g, e6);
      {
        trace::Op& op = ops.modulated_norm(g, rows, h, DitLaunches::modulated_norm, x_cross, normed, modulated);
        if (F > 1) op.keeps = {shift, scale1};
      }
      ops.linear(g, blk.ffn_in, rows, h, ffn, modulated, hidden);
      ops.add(OpKind::Elementwise, g, 8 * rows * ffn, {ops.at(hidden, rows * ffn)}, {ops.at(gelu, rows * ffn)}, DitLaunches::gelu);
      ops.linear(g, blk.ffn_out, rows, ffn, h, gelu, y).keeps = {modulated};
      if (F > 1) expand_gate(g);
      gated_residual(g, x_cross, y, next).keeps = {x, e6};  // the block's input and its e, until it returns
    }
    // Head: (modulation + e).chunk(2), the modulated norm, the Linear to patch x out_channels.
    const auto last = static_cast<std::int32_t>(blocks_.size());
    const std::uint32_t x = stream[blocks_.size() % 2], eh = ops.value("head e", BF * 2 * h);
    const std::uint32_t out_f = values_("out " + std::to_string(forward), rows * pv * model_.out_channels * a);
    ops.add(OpKind::Elementwise, last, BF * 2 * h, {ops.whole(head_modulation_), ops.at(e, BF * h)}, {ops.at(eh, BF * 2 * h)}, 2);
    if (F > 1) expand_norm(last, eh);
    {
      trace::Op& op = ops.modulated_norm(last, rows, h, DitLaunches::modulated_norm, x, normed, modulated);
      if (F > 1) op.keeps = {shift, scale1};
    }
    ops.linear(last, head_, rows, h, pv * model_.out_channels, modulated, out_f);
  }
  // Unpatchify and the sampler's guidance and Euler step over every forward's output (about ten small kernels).
  const auto last = static_cast<std::int32_t>(blocks_.size());
  const std::uint64_t fw = im.forwards(), out_elems = rows * pv * model_.out_channels;
  std::vector<trace::TensorAccess> reads{ops.at(sampler_, 2 * latent * fw)};
  for (std::uint32_t forward = 0; forward < fw; ++forward)
    reads.push_back(ops.at(values_("out " + std::to_string(forward), out_elems * a), out_elems));
  ops.add(OpKind::Elementwise, last, 5 * 2 * latent * fw, std::move(reads), {ops.at(sampler_, 2 * latent * fw)}, 10);
}

}  // namespace tiersim::model
