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

  // Activations as ComfyUI's QwenImageTransformer2DModel makes them: each a transient value (trace kind tmp) named by
  // the forward below and declared by building one iteration; the planner derives when each is alive. Only the
  // sampler's state stays for the whole run: the latents (with a reference's), the encoded prompts (Qwen2.5-VL's
  // hidden states, context_dim wide), the position ids and the model's outputs it combines.
  const std::uint64_t a = activation_bytes(d), lat = model_.in_channels, o = model_.out_features();
  std::uint64_t sampler = 0;
  for (const Pass& p : passes(options_))
    sampler += p.batch * (I * lat + p.text_tokens * model_.context_dim + 3 * (I + p.text_tokens) + 1 +
                          2 * qwen_image_tokens(im) * o);
  sampler_ = add_tensor(TensorKind::Activation, checked_product(sampler, a, "--resolution", "the sampler's latents"), -1,
                        "sampler (latents and the encoded prompts)");
  checked_product(widest_rows, 4 * h * 4, "--resolution", "an activation");
  values_.declare_into(&header_);
  trace::Step first;
  build_iteration(first);
  values_.declare_into(nullptr);
  set_transient_peak(header_, first);
  trace::assign_components(header_, "dit");
}

std::uint32_t QwenImageTraceGenerator::add_tensor(TensorKind kind, std::uint64_t bytes, std::int32_t group,
                                                  std::string name) {
  return trace::append_tensor(header_, kind, bytes, group, std::move(name));
}

std::uint32_t QwenImageTraceGenerator::add_linear(std::int32_t group, const std::string& name, std::uint64_t in, std::uint64_t out) {
  return parameters_.add(header_, group, name, linear_parameter_bytes(in, out, options_.dtype));
}

bool QwenImageTraceGenerator::next(trace::Step& out) {
  if (steps_done_ >= options_.image.steps) return false;
  build_iteration(out);
  ++steps_done_;
  return true;
}

void QwenImageTraceGenerator::build_iteration(trace::Step& out) {
  out.kind = StepKind::Iteration;
  out.ops.clear();
  std::uint64_t rows = 0, latent_rows = 0;
  const std::vector<Pass> all = passes(options_);
  for (std::size_t i = 0; i < all.size(); ++i) {
    build_pass(out, all[i], i);
    rows += all[i].batch * (qwen_image_tokens(options_.image) + options_.image.reference_tokens() + all[i].text_tokens);
    latent_rows += all[i].batch * qwen_image_tokens(options_.image);
  }
  // Once per iteration, over every pass's output: the guidance's combination and the sampler's update of the latent
  // (ComfyUI's model wrapper and an Euler step: about ten small kernels).
  const std::uint64_t o = model_.out_features();
  DitOps ops(out, header_, options_.dtype, values_, nullptr, options_.fp8_scaled);
  const std::uint64_t a = ops.act_bytes();
  std::vector<TensorAccess> reads{{sampler_, 2 * latent_rows * o * a}};
  for (std::size_t i = 0; i < all.size(); ++i) {
    const std::uint64_t b = all[i].batch * qwen_image_tokens(options_.image) * o * a;
    reads.push_back({values_("pass " + std::to_string(i) + ": out", b), b});
  }
  ops.add(OpKind::Elementwise, static_cast<std::int32_t>(blocks_.size()), 10 * latent_rows * o, std::move(reads),
          {{sampler_, 2 * latent_rows * o * a}}, 10);
  out.tokens = static_cast<std::uint32_t>(std::min<std::uint64_t>(rows, 0xffffffffu));
}

void QwenImageTraceGenerator::build_pass(trace::Step& out, const Pass& pass, std::size_t index) {
  // The image stream's rows: the latent's and a reference image's (Qwen-Image-Edit: ComfyUI's ReferenceLatent), which
  // run through every block, norm_out and proj_out and are cut off after them (out[:, :num_embeds]).
  const std::uint64_t image = qwen_image_tokens(options_.image), ref = options_.image.reference_tokens();
  const std::uint64_t B = pass.batch, per_image = image + ref + pass.text_tokens;
  const std::uint64_t Si = B * (image + ref), St = B * pass.text_tokens, S = Si + St;
  const std::uint64_t h = model_.hidden(), m = model_.mlp_hidden(), hd = model_.head_dim, T = QwenImageConfig::kTimestepChannels;
  const std::uint64_t lat = model_.in_channels;  // packed latent elements per image token
  DitOps ops(out, header_, options_.dtype, values_, nullptr, options_.fp8_scaled);
  const std::uint64_t a = ops.act_bytes();
  // A pass's values (its rows differ from another pass's: the negative prompt's length).
  const std::string pre = "pass " + std::to_string(index) + ": ";
  auto value = [&](const std::string& name, std::uint64_t elems, std::uint64_t bytes_per = 0) {
    return ops.value(pre + name, elems, bytes_per);
  };
  auto add = [&](OpKind k, std::int32_t group, std::uint64_t flops, std::vector<TensorAccess> reads,
                 std::vector<TensorAccess> writes, std::uint32_t launches) -> trace::Op& {
    return ops.add(k, group, flops, std::move(reads), std::move(writes), launches);
  };
  const std::uint32_t temb = value("temb", B * h), silu_temb = value("silu(temb)", B * h),
                      pe = value("rotary table", S * hd * 12, 1);
  auto silu = [&](std::int32_t g) {
    add(OpKind::Elementwise, g, 4 * B * h, {ops.at(temb, B * h)}, {ops.at(silu_temb, B * h)}, DitLaunches::silu);
  };
  // Per stream (image, text): the block's input (held by the caller until the block returns), then two new values
  // (each residual makes one): three in rotation. The block's locals: both norms and modulated norms, the attention's
  // output projection, the modulation parameters.
  struct StreamValues {
    std::uint64_t rows;
    std::uint32_t x[3], mod, normed, modulated, q0, k0, q, k, v, attn_out, gated, normed2, modulated2, hidden, gelu, mlp;
  };
  auto stream_values = [&](const std::string& p, std::uint64_t r) {
    auto v = [&](const char* n, std::uint64_t elems) { return value(p + n, elems); };
    return StreamValues{r, {v(" x", r * h), v(" x'", r * h), v(" x''", r * h)}, v(" mod_params", B * 6 * h),
                        v(" normed", r * h), v(" modulated", r * h), v(" to_q", r * h), v(" to_k", r * h),
                        v(" query", r * h), v(" key", r * h), v(" value", r * h), v(" attn_output", r * h), v(" gate1 * attn_output", r * h),
                        v(" normed2", r * h), v(" modulated2", r * h), v(" mlp.proj", r * m), v(" mlp.gelu", r * m),
                        v(" mlp", r * h)};
  };
  StreamValues sv[2] = {stream_values("img", Si), stream_values("txt", St)};
  const std::uint32_t jq = value("joint_query", S * h), jk = value("joint_key", S * h), jv = value("joint_value", S * h),
                      p1 = value("rope: f0 * t0", S * h), p2 = value("rope: f1 * t1", S * h),
                      rq = value("joint_query (rotated)", S * h), rk = value("joint_key (rotated)", S * h),
                      sdpa = value("sdpa", S * h), joint = value("joint_hidden_states", S * h);

  // Inputs (_forward): process_img's patch packing (one copy of the latent), the position ids and EmbedND's rotary
  // table (per axis arange/linspace, pow, einsum, cos/sin, stack, the cast to the model's dtype: about 38 kernels),
  // img_in, txt_norm and txt_in on the text, the timestep's sinusoid (6 kernels) through linear_1, SiLU, linear_2.
  std::uint32_t packed = value("packed latent", Si * lat);
  add(OpKind::Elementwise, -1, 0, {ops.at(sampler_, Si * lat)}, {ops.at(packed, Si * lat)}, 1);
  // A reference latent: packed as the image's (above) and appended to it (torch.cat, one copy of both).
  if (ref > 0) {
    const std::uint32_t joined = value("cat(latent, reference)", Si * lat);
    add(OpKind::Elementwise, -1, 0, {ops.at(packed, Si * lat)}, {ops.at(joined, Si * lat)}, 1);
    packed = joined;
  }
  add(OpKind::Other, -1, 8 * S * hd, {ops.at(sampler_, S * 3)}, {ops.at(pe, S * hd * 12, 1)}, 38);
  ops.linear(-1, img_in_, Si, lat, h, packed, sv[0].x[0]);
  const std::uint32_t txt_normed = value("txt_norm", St * model_.context_dim);
  ops.rms_norm(-1, txt_norm_, St, model_.context_dim, sampler_, txt_normed);
  ops.linear(-1, txt_in_, St, model_.context_dim, h, txt_normed, sv[1].x[0]);
  const std::uint32_t ts = value("timestep sinusoid", B * T), t1 = value("timestep linear_1", B * h);
  add(OpKind::Elementwise, -1, 8 * B * T, {ops.at(sampler_, B)}, {ops.at(ts, B * T)}, 6);
  ops.linear(-1, time_[0], B, T, h, ts, t1);
  add(OpKind::Elementwise, -1, 4 * B * h, {ops.at(t1, B * h)}, {ops.at(silu_temb, B * h)}, DitLaunches::silu);
  ops.linear(-1, time_[1], B, h, h, silu_temb, temb);

  for (std::size_t bi = 0; bi < blocks_.size(); ++bi) {
    const Block& blk = blocks_[bi];
    const auto g = static_cast<std::int32_t>(bi);
    const std::size_t in = bi % 3, mid = (bi + 1) % 3, next = (bi + 2) % 3;
    const Stream* w[2] = {&blk.img, &blk.txt};
    // QwenImageTransformerBlock.forward: both modulations (SiLU, Linear(d, 6d)), the first modulated norms, the
    // attention's projections and q/k norms per stream, q, k, v concatenated (text first), the rotary embedding of q
    // and k (apply_rotary_emb in the model's dtype: two products and their sum, three kernels each), SDPA over each
    // image's joint sequence (the text mask is dropped when it is all ones), the output projections.
    for (int s = 0; s < 2; ++s) {
      silu(g);
      ops.linear(g, w[s]->mod, B, h, 6 * h, silu_temb, sv[s].mod);
    }
    for (auto& v : sv) ops.modulated_norm(g, v.rows, h, DitLaunches::modulated_norm, v.x[in], v.normed, v.modulated);
    for (int s = 0; s < 2; ++s) {
      ops.linear(g, w[s]->q, sv[s].rows, h, h, sv[s].modulated, sv[s].q0);
      ops.linear(g, w[s]->k, sv[s].rows, h, h, sv[s].modulated, sv[s].k0);
      ops.linear(g, w[s]->v, sv[s].rows, h, h, sv[s].modulated, sv[s].v);
    }
    for (int s = 0; s < 2; ++s) {
      ops.rms_norm(g, w[s]->q_norm, sv[s].rows, h, sv[s].q0, sv[s].q);
      ops.rms_norm(g, w[s]->k_norm, sv[s].rows, h, sv[s].k0, sv[s].k);
    }
    add(OpKind::Elementwise, g, 0,
        {ops.at(sv[1].q, St * h), ops.at(sv[0].q, Si * h), ops.at(sv[1].k, St * h), ops.at(sv[0].k, Si * h), ops.at(sv[1].v, St * h),
         ops.at(sv[0].v, Si * h)},
        {ops.at(jq, S * h), ops.at(jk, S * h), ops.at(jv, S * h)}, 3 * DitLaunches::concat);
    {
      const std::uint64_t n = S * h, table = header_.tensors[pe].bytes;
      trace::Op& rope = add(OpKind::Rope, g, 3 * 2 * n, {ops.at(jq, n), ops.at(jk, n), {pe, table}},
                            {ops.at(p1, n), ops.at(p2, n), ops.at(rq, n), ops.at(p1, n), ops.at(p2, n), ops.at(rk, n)}, 2 * 3);
      rope.reread_bytes = 4 * n * a - table;
    }
    ops.attention(g, B, model_.heads, per_image, per_image, hd, rq, rk, jv, sdpa, joint);
    // Then per stream (image, then text): the output projection and its gated residual (multiply, add), the second
    // modulated norm, the MLP (Linear, GELU tanh, Linear) and its gated residual in one addcmul. The attention's locals
    // (each stream's q, k, v, the joint ones and its output) live until its text projection returns.
    for (int s = 0; s < 2; ++s) {
      trace::Op& proj = ops.linear(g, w[s]->out, sv[s].rows, h, h, joint, sv[s].attn_out);
      if (s == 1) proj.keeps = {sv[0].q, sv[0].k, sv[0].v, sv[1].q, sv[1].k, sv[1].v, rq, rk, jv};
      const std::uint64_t r = sv[s].rows;
      add(OpKind::Elementwise, g, 2 * r * h, {ops.at(sv[s].attn_out, r * h), ops.at(sv[s].x[in], r * h)},
          {ops.at(sv[s].gated, r * h), ops.at(sv[s].x[mid], r * h)}, DitLaunches::gated_residual)
          .reread_bytes = r * h * a;  // gate * output (a temporary), then the add reads it
    }
    for (int s = 0; s < 2; ++s) {
      const std::uint64_t r = sv[s].rows;
      ops.modulated_norm(g, r, h, DitLaunches::modulated_norm, sv[s].x[mid], sv[s].normed2, sv[s].modulated2);
      ops.linear(g, w[s]->mlp_in, r, h, m, sv[s].modulated2, sv[s].hidden);
      add(OpKind::Elementwise, g, 8 * r * m, {ops.at(sv[s].hidden, r * m)}, {ops.at(sv[s].gelu, r * m)}, DitLaunches::gelu);
      ops.linear(g, w[s]->mlp_out, r, m, h, sv[s].gelu, sv[s].mlp);
      trace::Op& last_op = add(OpKind::Elementwise, g, 2 * r * h, {ops.at(sv[s].x[mid], r * h), ops.at(sv[s].mlp, r * h)},
                               {ops.at(sv[s].x[next], r * h)}, 1);
      last_op.reread_bytes = r * h * a;  // the gate, read per token
      if (s == 1)
        last_op.keeps = {sv[0].x[in], sv[1].x[in], sv[0].mod, sv[1].mod, sv[0].normed, sv[0].modulated, sv[1].normed,
                         sv[1].modulated, sv[0].attn_out, sv[1].attn_out, sv[0].normed2, sv[0].modulated2,
                         sv[1].normed2, sv[1].modulated2};
    }
  }
  // norm_out (LastLayer: SiLU, Linear(d, 2d), LayerNorm, addcmul) and proj_out on the image rows, then the unpacking.
  const auto last = static_cast<std::int32_t>(blocks_.size());
  const std::size_t final_x = (blocks_.size() * 2) % 3;
  const std::uint32_t final_mod = value("norm_out mod", B * 2 * h), proj = value("proj_out", Si * model_.out_features()),
                      out_pass = value("out", B * image * model_.out_features());
  silu(last);
  ops.linear(last, final_modulation_, B, h, 2 * h, silu_temb, final_mod);
  ops.modulated_norm(last, Si, h, DitLaunches::modulated_norm, sv[0].x[final_x], sv[0].normed, sv[0].modulated);
  const std::uint64_t o = model_.out_features();
  ops.linear(last, proj_out_, Si, h, o, sv[0].modulated, proj);
  add(OpKind::Elementwise, last, 0, {ops.at(proj, B * image * o)}, {ops.at(out_pass, B * image * o)}, 1)  // the image's rows, unpacked
      .keeps = {sv[1].x[final_x]};  // the text stream: _forward's local
}

}  // namespace tiersim::model
