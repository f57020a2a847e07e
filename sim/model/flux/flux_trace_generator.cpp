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

  // Activations as ComfyUI's Flux makes them: each a transient value (trace kind tmp) named by the forward below and
  // declared by building it once; the planner derives when each is alive. Only the sampler's state stays for the whole
  // run: the latents (with a reference's), the model's outputs it combines, the encoded prompts (T5's output and
  // CLIP's pooled vector) and the position ids, per forward.
  const std::uint64_t a = activation_bytes(d), B = im.guided_batch(options_.batch), fw = im.forwards();
  const std::uint64_t Si = B * (flux_image_tokens(im) + im.reference_tokens()), St = B * im.text_tokens;
  sampler_ = add_tensor(TensorKind::Activation,
                        checked_product(fw * a, 2 * Si * model_.in_channels + St * model_.context_dim + B * model_.pooled_dim +
                                                    3 * (Si + St) + B,
                                        "--resolution", "the sampler's latents") +
                            2 * fw * a * B * flux_image_tokens(im) * model_.out_channels,
                        -1, "sampler (latents and the encoded prompt)");
  checked_product(B * S, (3 * h + m) * 4, "--resolution", "an activation");
  values_.declare_into(&header_);
  trace::Step first;
  build_iteration(first);
  values_.declare_into(nullptr);
  set_transient_peak(header_, first);
  trace::assign_components(header_, "dit");
}

std::uint32_t FluxTraceGenerator::add_tensor(TensorKind kind, std::uint64_t bytes, std::int32_t group, std::string name) {
  return trace::append_tensor(header_, kind, bytes, group, std::move(name));
}

std::uint32_t FluxTraceGenerator::add_linear(std::int32_t group, const std::string& name, std::uint64_t in,
                                            std::uint64_t out) {
  if (options_.dtype != WeightDtype::Gguf)
    return parameters_.add(header_, group, name, linear_parameter_bytes(in, out, options_.dtype));
  // The weight in its stored type, the bias in F32.
  const gguf::QuantType& type = flux_weight_type(name, in, options_.gguf);
  const std::uint32_t id = parameters_.add(header_, group, name, {gguf::tensor_bytes(type, in * out), 4 * out});
  gguf_types_.resize(id + 1, nullptr);
  gguf_types_[id] = &type;
  return id;
}

bool FluxTraceGenerator::next(trace::Step& out) {
  if (steps_done_ >= options_.image.steps) return false;
  build_iteration(out);
  ++steps_done_;
  return true;
}

void FluxTraceGenerator::build_iteration(trace::Step& out) {
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
  DitOps ops(out, header_, d, values_, &gguf_types_, options_.fp8_scaled);
  const std::uint64_t a = ops.act_bytes();
  auto add = [&](OpKind k, std::int32_t group, std::uint64_t flops, std::vector<TensorAccess> reads,
                 std::vector<TensorAccess> writes, std::uint32_t launches) -> trace::Op& {
    return ops.add(k, group, flops, std::move(reads), std::move(writes), launches);
  };
  // Values (ComfyUI's layers.py and math.py at a125cd84). The double blocks' streams: a block's img and txt inputs
  // stay alive until it returns (forward_orig's `img, txt = block(img=img, txt=txt, ...)` holds them); img's
  // residuals make new values, txt's (`txt += ...`) work in place. The single blocks' x is updated in place too.
  const std::uint32_t vec = ops.value("vec", B * h), silu_vec = ops.value("silu(vec)", B * h), pe = ops.value("pe", S * hd * 8, 1);
  const std::uint32_t txt = ops.value("txt", St * h), img[2] = {ops.value("img", Si * h), ops.value("img'", Si * h)},
                      x = ops.value("x (joint)", S * h);
  const std::uint32_t mods[2] = {ops.value("img_mod", B * 6 * h), ops.value("txt_mod", B * 6 * h)};
  const std::uint32_t normed = ops.value("norm(x)", S * h), gated = ops.value("apply_mod(y, gate)", S * h);
  struct StreamValues {
    std::uint32_t modulated, qkv, q, k, proj, mlp_in, hidden, gelu, mlp_out;
  };
  auto stream_values = [&](const std::string& p, std::uint64_t rows) {
    auto v = [&](const char* n, std::uint64_t elems) { return values_(p + n, elems * a); };
    return StreamValues{v("_modulated", rows * h), v("_qkv", 3 * rows * h), v("_q", rows * h), v("_k", rows * h),
                        v("_attn.proj", rows * h),  v("_mlp: modulated norm", rows * h), v("_mlp.0", rows * m),
                        v("_mlp.1", rows * m),      v("_mlp.2", rows * h)};
  };
  const StreamValues iv = stream_values("img", Si), tv = stream_values("txt", St);
  const std::uint32_t cq = ops.value("cat(q)", S * h), ck = ops.value("cat(k)", S * h), cv = ops.value("cat(v)", S * h);
  const std::uint32_t q_f32 = ops.value("rope: q.to(fp32)", S * h, 4), pe0 = ops.value("rope: pe[0] * q[0]", S * h, 4),
                      pe1 = ops.value("rope: pe[1] * q[1]", S * h, 4), sum = ops.value("rope: sum", S * h, 4),
                      q_r = ops.value("q", S * h), k_r = ops.value("k", S * h), sdpa = ops.value("sdpa", S * h),
                      attn = ops.value("attn", S * h);
  const std::uint32_t single_mod = ops.value("single mod", B * 3 * h), final_mod = ops.value("final mod", B * 2 * h);
  const std::uint32_t lin1 = ops.value("linear1(x)", S * (3 * h + m)), sq = ops.value("single q", S * h),
                      sk = ops.value("single k", S * h), sgelu = ops.value("mlp_act(mlp)", S * m), cat = ops.value("cat(attn, mlp)", S * (h + m)),
                      lin2 = ops.value("linear2", S * h);

  auto modulation = [&](std::int32_t g, std::uint32_t w, std::uint64_t outd, std::uint32_t to) {
    add(OpKind::Elementwise, g, 4 * B * h, {ops.at(vec, B * h)}, {ops.at(silu_vec, B * h)}, DitLaunches::silu);
    ops.linear(g, w, B, h, outd, silu_vec, to);
  };
  // apply_mod(y, gate) then the residual add: reads y, x and the gated value (written here), writes both; `to` == x
  // works in place.
  auto gated_residual = [&](std::int32_t g, std::uint64_t rows, std::uint32_t y, std::uint32_t from,
                            std::uint32_t to) -> trace::Op& {
    trace::Op& op = add(OpKind::Elementwise, g, 2 * rows * h, {ops.at(y, rows * h), ops.at(from, rows * h)},
                        {ops.at(gated, rows * h), ops.at(to, rows * h)}, DitLaunches::gated_residual);
    op.reread_bytes = rows * h * a;
    return op;
  };
  // Rotary embedding of q and k in fp32 as flux/math.py attention() writes it inline: q.to(fp32), two multiplies by
  // the table, their sum, type_as(v): five kernels each, reading a + 28 and writing a + 16 bytes per element (one op
  // for both: k's fp32 values are q's again); then SDPA over each image's joint sequence, its output made
  // [rows, heads x head_dim] again. The concatenated q, k and v are attention()'s arguments until it returns.
  auto attention = [&](std::int32_t g, std::uint32_t q, std::uint32_t k, std::uint32_t v) {
    const std::uint64_t n = S * h, table = header_.tensors[pe].bytes;
    trace::Op& rope = add(OpKind::Rope, g, 6 * 2 * n, {ops.at(q, n), ops.at(k, n), {pe, table}},
                          {ops.at(q_f32, n, 4), ops.at(pe0, n, 4), ops.at(pe1, n, 4), ops.at(sum, n, 4), ops.at(q_r, n),
                           ops.at(q_f32, n, 4), ops.at(pe0, n, 4), ops.at(pe1, n, 4), ops.at(sum, n, 4), ops.at(k_r, n)},
                          2 * 5);
    rope.reread_bytes = 2 * n * 28 - table;
    ops.attention(g, B, heads, per_image, per_image, hd, q_r, k_r, v, sdpa, attn);
    out.ops.back().keeps = {q, k};
  };

  // One forward, or two (the positive and the negative prompt one after the other when ComfyUI does not batch them).
  for (std::uint32_t forward = 0; forward < options_.image.forwards(); ++forward) {
    // Inputs (forward_orig): img_in, the timestep (and guidance) embedders, vector_in, txt_in, the rotary
    // table over the position ids (EmbedND: per axis linspace, pow, einsum, cos/sin, stack; about 30 kernels).
    // A reference latent patchified (process_img's rearrange) and appended to the image's (torch.cat): two copies.
    std::uint32_t img_input = sampler_;
    if (Si > So) {
      const std::uint32_t ref = ops.value("reference patches", (Si - So) * model_.in_channels);
      img_input = ops.value("cat(img, reference)", Si * model_.in_channels);
      add(OpKind::Elementwise, -1, 0, {ops.at(sampler_, Si * model_.in_channels)},
          {ops.at(ref, (Si - So) * model_.in_channels), ops.at(img_input, Si * model_.in_channels)}, 2)
          .reread_bytes = (Si - So) * model_.in_channels * a;
    }
    ops.linear(-1, img_in_, Si, model_.in_channels, h, img_input, img[0]);
    const std::uint32_t ts = ops.value("timestep_embedding", B * FluxConfig::kTimestepChannels), t1 = ops.value("time_in.in_layer", B * h),
                        t2 = ops.value("time_in.silu", B * h), time_vec = ops.value("time_in", B * h),
                        guidance_vec = ops.value("guidance_in", B * h), v3 = ops.value("vector_in", B * h);
    add(OpKind::Elementwise, -1, 8 * B * FluxConfig::kTimestepChannels, {ops.at(sampler_, B)}, {ops.at(ts, B * FluxConfig::kTimestepChannels)}, 6);
    ops.linear(-1, time_in_[0], B, FluxConfig::kTimestepChannels, h, ts, t1);
    add(OpKind::Elementwise, -1, 4 * B * h, {ops.at(t1, B * h)}, {ops.at(t2, B * h)}, DitLaunches::silu);
    ops.linear(-1, time_in_[1], B, h, h, t2, time_vec);
    if (model_.guidance_embeds) {
      add(OpKind::Elementwise, -1, 8 * B * FluxConfig::kTimestepChannels, {ops.at(sampler_, B)}, {ops.at(ts, B * FluxConfig::kTimestepChannels)}, 6);
      ops.linear(-1, guidance_in_[0], B, FluxConfig::kTimestepChannels, h, ts, t1);
      add(OpKind::Elementwise, -1, 4 * B * h, {ops.at(t1, B * h)}, {ops.at(t2, B * h)}, DitLaunches::silu);
      ops.linear(-1, guidance_in_[1], B, h, h, t2, guidance_vec);
    }
    ops.linear(-1, vector_in_[0], B, model_.pooled_dim, h, sampler_, t1);
    add(OpKind::Elementwise, -1, 4 * B * h, {ops.at(t1, B * h)}, {ops.at(t2, B * h)}, DitLaunches::silu);
    ops.linear(-1, vector_in_[1], B, h, h, t2, v3);
    {  // vec = vec + guidance_in(...) + vector_in(...): two adds
      std::vector<TensorAccess> reads{ops.at(time_vec, B * h), ops.at(v3, B * h)};
      if (model_.guidance_embeds) reads.push_back(ops.at(guidance_vec, B * h));
      add(OpKind::Elementwise, -1, 2 * B * h, std::move(reads), {ops.at(vec, B * h)}, 2).reread_bytes =
          model_.guidance_embeds ? 0 : B * h * a;
    }
    ops.linear(-1, txt_in_, St, model_.context_dim, h, sampler_, txt);
    add(OpKind::Other, -1, 8 * S * hd, {ops.at(sampler_, S * 3)}, {ops.at(pe, S * hd * 8, 1)}, 30);

    for (std::int32_t b = 0; b < D; ++b) {
      const DoubleBlock& blk = double_[static_cast<std::size_t>(b)];
      const std::uint32_t img_in = img[b % 2], img_out = img[(b + 1) % 2];
      modulation(b, blk.img.mod, 6 * h, mods[0]);
      modulation(b, blk.txt.mod, 6 * h, mods[1]);
      // img_modulated, img_qkv, img_q, img_k (and txt's): the block's locals, alive until it returns.
      ops.modulated_norm(b, Si, h, DitLaunches::modulated_norm, img_in, normed, iv.modulated);
      ops.linear(b, blk.img.qkv, Si, h, 3 * h, iv.modulated, iv.qkv);
      ops.rms_norm(b, blk.img.q_norm, Si, h, iv.qkv, iv.q);
      ops.rms_norm(b, blk.img.k_norm, Si, h, iv.qkv, iv.k);
      ops.modulated_norm(b, St, h, DitLaunches::modulated_norm, txt, normed, tv.modulated);
      ops.linear(b, blk.txt.qkv, St, h, 3 * h, tv.modulated, tv.qkv);
      ops.rms_norm(b, blk.txt.q_norm, St, h, tv.qkv, tv.q);
      ops.rms_norm(b, blk.txt.k_norm, St, h, tv.qkv, tv.k);
      add(OpKind::Elementwise, b, 0,
          {ops.at(iv.q, Si * h), ops.at(tv.q, St * h), ops.at(iv.k, Si * h), ops.at(tv.k, St * h), ops.at(iv.qkv, Si * h), ops.at(tv.qkv, St * h)},
          {ops.at(cq, S * h), ops.at(ck, S * h), ops.at(cv, S * h)}, 3 * DitLaunches::concat);  // cat(txt, img) q, k, v
      attention(b, cq, ck, cv);
      for (const auto& [sv, rows, from, to] :
           {std::tuple<const StreamValues&, std::uint64_t, std::uint32_t, std::uint32_t>{iv, Si, img_in, img_out},
            {tv, St, txt, txt}}) {
        ops.linear(b, sv.qkv == iv.qkv ? blk.img.proj : blk.txt.proj, rows, h, h, attn, sv.proj);
        // img = img + apply_mod(proj(img_attn), gate): a new img (the block's input stays); txt += ...: in place.
        const std::uint32_t mid = to == txt ? txt : img_out;
        gated_residual(b, rows, sv.proj, from, mid);
        const Stream& weights = sv.qkv == iv.qkv ? blk.img : blk.txt;
        ops.modulated_norm(b, rows, h, DitLaunches::modulated_norm, mid, normed, sv.mlp_in);
        ops.linear(b, weights.mlp_in, rows, h, m, sv.mlp_in, sv.hidden);
        add(OpKind::Elementwise, b, 8 * rows * m, {ops.at(sv.hidden, rows * m)}, {ops.at(sv.gelu, rows * m)}, DitLaunches::gelu);
        ops.linear(b, weights.mlp_out, rows, m, h, sv.gelu, sv.mlp_out).keeps = {sv.mlp_in};
        // img's second residual makes the block's output from the first's (which it frees); txt's is in place again.
        gated_residual(b, rows, sv.mlp_out, mid, to == txt ? txt : img_out);
      }
      trace::Op* last_op = &out.ops.back();
      if (d == WeightDtype::Fp16)  // layers.py: txt = nan_to_num(txt) in fp16 (into a new tensor: a new value)
        last_op = &add(OpKind::Elementwise, b, St * h, {ops.at(txt, St * h)}, {ops.at(txt, St * h)}, 1);
      last_op->keeps = {img_in, mods[0], mods[1], iv.modulated, iv.qkv, iv.q, iv.k, tv.modulated, tv.qkv, tv.q, tv.k, attn};
    }
    // img = cat(txt, img), then the single blocks over the joint sequence (x += ...: in place).
    add(OpKind::Elementwise, D, 0, {ops.at(txt, St * h), ops.at(img[D % 2], Si * h)}, {ops.at(x, S * h)}, DitLaunches::concat);
    for (std::int32_t b = 0; b < Sg; ++b) {
      const SingleBlock& blk = single_[static_cast<std::size_t>(b)];
      const std::int32_t g = D + b;
      modulation(g, blk.modulation, 3 * h, single_mod);
      ops.modulated_norm(g, S, h, DitLaunches::modulated_norm, x, normed, gated);
      ops.linear(g, blk.linear1, S, h, 3 * h + m, gated, lin1);
      ops.rms_norm(g, blk.q_norm, S, h, lin1, sq);
      ops.rms_norm(g, blk.k_norm, S, h, lin1, sk);
      attention(g, sq, sk, lin1);
      add(OpKind::Elementwise, g, 8 * S * m, {ops.at(lin1, S * m)}, {ops.at(sgelu, S * m)}, DitLaunches::gelu);
      add(OpKind::Elementwise, g, 0, {ops.at(attn, S * h), ops.at(sgelu, S * m)}, {ops.at(cat, S * (h + m))}, DitLaunches::concat);
      ops.linear(g, blk.linear2, S, h + m, h, cat, lin2);
      trace::Op* last_op = &gated_residual(g, S, lin2, x, x);
      if (d == WeightDtype::Fp16) last_op = &add(OpKind::Elementwise, g, S * h, {ops.at(x, S * h)}, {ops.at(x, S * h)}, 1);
      last_op->keeps = {single_mod, lin1, sq, sk, attn};  // the block's locals
    }
    // Final layer on the image rows (the joint sequence's image part, a view).
    const std::int32_t last = D + Sg;
    const std::uint32_t out_f = values_("out " + std::to_string(forward), Si * model_.out_channels * a);
    modulation(last, final_modulation_, 2 * h, final_mod);
    ops.modulated_norm(last, Si, h, DitLaunches::modulated_norm, x, normed, gated);
    ops.linear(last, final_linear_, Si, h, model_.out_channels, gated, out_f).keeps = {txt};  // forward_orig's local
  }
  // The sampler's update of every forward's latent (ComfyUI's model wrapper and an Euler step: about ten small kernels).
  const std::uint64_t fw = options_.image.forwards(), latent = So * model_.out_channels;
  std::vector<TensorAccess> reads{ops.at(sampler_, 2 * latent * fw)};
  for (std::uint32_t forward = 0; forward < fw; ++forward)
    reads.push_back(ops.at(values_("out " + std::to_string(forward), Si * model_.out_channels * a), latent));
  add(OpKind::Elementwise, D + Sg, 10 * latent * fw, std::move(reads), {ops.at(sampler_, 2 * latent * fw)}, 10);
}

}  // namespace tiersim::model
