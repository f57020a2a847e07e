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

  // Live activations at the widest point of the forward, per token row: in the self-attention x, its
  // modulated norm, q, k, v, q or k in fp32 for the rotary embedding (one at a time) and the output:
  // (6a + 8) bytes per element of the width; in the FFN x, the modulated norm, the hidden and GELU's output;
  // at the start the fp32 patch embedding's input and output. The widest of the three, not their sum (a
  // first version summed them and read 2.3x the measured peak: results/validation/diffusion); plus the text
  // context through its projections and, for fp8 weights, the bf16 copy of the largest Linear.
  const std::uint64_t a = activation_bytes(d);
  const std::uint64_t rows = checked_product(B, T, "--resolution", "the activation workspace");
  const std::uint64_t per_row = std::max({h * (6 * a + 8), 2 * a * (h + model_.ffn_dim),
                                          4 * (16 * model_.patch_volume() + h) + a * h});
  std::uint64_t widest = 0;
  for (const auto& t : header_.tensors) widest = std::max(widest, t.bytes);
  act_ = add_tensor(TensorKind::Activation,
                    checked_product(rows, per_row, "--resolution", "the activation workspace") +
                        B * im.text_tokens * h * a * 4 + (d == WeightDtype::Fp8 ? 2 * widest : 0),
                    -1, "activations");
}

std::uint32_t WanTraceGenerator::add_tensor(TensorKind kind, std::uint64_t bytes, std::int32_t group, std::string name) {
  return trace::append_tensor(header_, kind, bytes, group, std::move(name));
}

std::uint32_t WanTraceGenerator::add_linear(std::int32_t group, const std::string& name, std::uint64_t in,
                                            std::uint64_t out) {
  return add_tensor(TensorKind::Weight, linear_bytes(in, out, options_.dtype), group, name);
}

bool WanTraceGenerator::next(trace::Step& out) {
  if (steps_done_ >= options_.image.steps) return false;
  build_iteration(out);
  ++steps_done_;
  return true;
}

void WanTraceGenerator::build_iteration(trace::Step& out) const {
  const auto& im = options_.image;
  const std::uint64_t B = im.guided_batch(options_.batch), T = wan_video_tokens(model_, im), L = im.text_tokens;
  const std::uint64_t h = model_.dim(), heads = model_.heads, hd = model_.head_dim, ffn = model_.ffn_dim;
  const std::uint64_t rows = B * T, text_rows = B * L, pv = model_.patch_volume();
  const std::uint64_t latent = rows * pv * model_.in_channels;  // latent elements
  out.kind = StepKind::Iteration;
  out.tokens = static_cast<std::uint32_t>(std::min<std::uint64_t>(rows, 0xffffffffu));
  out.ops.clear();
  DitOps ops(out, header_, act_, options_.dtype, nullptr, options_.fp8_scaled);

  // One forward, or two (the positive and the negative prompt one after the other when ComfyUI does not batch them).
  for (std::uint32_t forward = 0; forward < im.forwards(); ++forward) {
    // Embeddings (forward_orig): the latent cast to fp32 and the Conv3d patch embedding (cuDNN, TF32 allowed
    // by PyTorch's default), cast back; the timestep's sinusoid, time_embedding, time_projection; the text
    // through text_embedding; the rotary table over (t, h, w) ids (rope_encode, EmbedND: about 30 kernels).
    ops.add(OpKind::Elementwise, -1, latent, {ops.act(latent)}, {ops.raw(4 * latent)}, 1);
    ops.add(OpKind::Gemm, -1, 2 * rows * pv * model_.in_channels * h, {ops.whole(patch_embedding_), ops.raw(4 * latent)},
            {ops.raw(4 * rows * h)}, 1, "tf32");
    ops.add(OpKind::Elementwise, -1, rows * h, {ops.raw(4 * rows * h)}, {ops.act(rows * h)}, 2);  // .to(dtype), flatten
    // With a start image the timestep is one per latent frame (model_base.WAN22.process_timestep): the time MLPs and
    // the modulations run on B x F rows, and every modulation a block (or the head) applies is expanded to its tokens
    // (comfy/ldm/wan/model.py repeat_e: torch.repeat_interleave), read in full by the addcmul that uses it.
    const std::uint64_t F = im.start_image ? (im.frames - 1) / 4 + 1 : 1, BF = B * F;
    ops.elementwise(-1, BF, BF * model_.freq_dim, 8, 6);
    ops.linear(-1, time_embedding_[0], BF, model_.freq_dim, h);
    ops.elementwise(-1, BF * h, BF * h, 4, DitLaunches::silu);
    ops.linear(-1, time_embedding_[1], BF, h, h);
    ops.elementwise(-1, BF * h, BF * h, 4, DitLaunches::silu);
    ops.linear(-1, time_projection_, BF, h, 6 * h);
    ops.linear(-1, text_embedding_[0], text_rows, model_.text_dim, h);
    ops.elementwise(-1, text_rows * h, text_rows * h, 8, DitLaunches::gelu);
    ops.linear(-1, text_embedding_[1], text_rows, h, h);
    ops.add(OpKind::Other, -1, 8 * T * hd, {ops.act(T * 3)}, {ops.raw(T * hd * 8)}, 30);

    for (std::size_t i = 0; i < blocks_.size(); ++i) {
      const Block& blk = blocks_[i];
      const auto g = static_cast<std::int32_t>(i);
      // e = (modulation + e0).chunk(6): the parameter cast to the activations' dtype and added.
      ops.add(OpKind::Elementwise, g, BF * 6 * h, {ops.whole(blk.modulation), ops.act(BF * 6 * h)}, {ops.act(BF * 6 * h)}, 2);
      // Per-frame modulations: six repeat_interleave to the tokens and the two `1 + e`, then read by the four addcmul.
      if (F > 1) ops.add(OpKind::Elementwise, g, 2 * rows * h, {ops.act(BF * 6 * h + 2 * rows * h + 6 * rows * h)},
                         {ops.act(8 * rows * h)}, 8);
      ops.modulated_norm(g, rows, h, DitLaunches::modulated_norm);
      // Self-attention: q and k through their Linear, RMSNorm over the whole width and the rotary embedding.
      for (const std::uint32_t w : {blk.self.q, blk.self.k}) {
        ops.linear(g, w, rows, h, h);
        ops.rms_norm(g, w == blk.self.q ? blk.self.norm_q : blk.self.norm_k, rows, h);
        ops.rope(g, rows * h, DitLaunches::rope);
      }
      ops.linear(g, blk.self.v, rows, h, h);
      ops.attention(g, B, heads, T, T, hd);
      ops.linear(g, blk.self.o, rows, h, h);
      ops.elementwise(g, 3 * rows * h, rows * h, 2, 1);  // x = addcmul(x, y, e2)
      // Cross-attention to the text: norm3 (LayerNorm with weights), q over the video, k and v over the text.
      if (model_.cross_attn_norm)
        ops.add(OpKind::Norm, g, 8 * rows * h, {ops.whole(blk.norm3), ops.act(rows * h)}, {ops.act(rows * h)}, 1);
      ops.linear(g, blk.cross.q, rows, h, h);
      ops.rms_norm(g, blk.cross.norm_q, rows, h);
      ops.linear(g, blk.cross.k, text_rows, h, h);
      ops.rms_norm(g, blk.cross.norm_k, text_rows, h);
      ops.linear(g, blk.cross.v, text_rows, h, h);
      ops.attention(g, B, heads, T, L, hd);
      ops.linear(g, blk.cross.o, rows, h, h);
      ops.elementwise(g, 2 * rows * h, rows * h, 1, 1);  // x = x + cross
      // FFN on the modulated norm, gated back: addcmul(x, y, e5).
      ops.modulated_norm(g, rows, h, DitLaunches::modulated_norm);
      ops.linear(g, blk.ffn_in, rows, h, ffn);
      ops.elementwise(g, rows * ffn, rows * ffn, 8, DitLaunches::gelu);
      ops.linear(g, blk.ffn_out, rows, ffn, h);
      ops.elementwise(g, 3 * rows * h, rows * h, 2, 1);
    }
    // Head: (modulation + e).chunk(2), the modulated norm, the Linear to patch x out_channels.
    const auto last = static_cast<std::int32_t>(blocks_.size());
    ops.add(OpKind::Elementwise, last, BF * 2 * h, {ops.whole(head_modulation_), ops.act(BF * h)}, {ops.act(BF * 2 * h)}, 2);
    if (F > 1) ops.add(OpKind::Elementwise, last, rows * h, {ops.act(BF * 2 * h + rows * h + 2 * rows * h)},
                       {ops.act(3 * rows * h)}, 3);
    ops.modulated_norm(last, rows, h, DitLaunches::modulated_norm);
    ops.linear(last, head_, rows, h, pv * model_.out_channels);
  }
  // Unpatchify and the sampler's guidance and Euler step over every forward's latent (about ten small kernels).
  const auto last = static_cast<std::int32_t>(blocks_.size());
  ops.elementwise(last, 3 * latent * im.forwards(), 2 * latent * im.forwards(), 5, 10);
}

}  // namespace tiersim::model
