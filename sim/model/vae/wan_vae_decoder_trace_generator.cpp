#include "model/vae/wan_vae_decoder_trace_generator.hpp"

#include <algorithm>
#include <stdexcept>

#include "core/error.hpp"
#include "trace/transient_lifetimes.hpp"

namespace tiersim::model {

using trace::OpKind;
using trace::TensorAccess;

namespace {

// Where an activation lives and how big one frame of it is: a transient value, or a workspace (the latent).
struct Act {
  std::uint32_t id = 0;
  std::uint64_t channels = 0, frames = 0;
  std::uint64_t height = 0, width = 0;  // one frame's pixels
  std::uint64_t pixels() const { return height * width; }
  std::uint64_t elems() const { return channels * frames * pixels(); }
};

}  // namespace

// One decoder call's ops (comfy/ldm/wan/vae.py Decoder3d.forward with feat_cache), built by the generator.
class WanVaeDecoderCall {
 public:
  WanVaeDecoderCall(trace::Step& out, trace::Header& header, DitValues& values, DitParameters& parameters,
                    std::map<std::string, std::uint32_t>& weights, std::map<std::string, std::uint32_t>& caches,
                    bool may_declare, std::uint64_t index, bool only_call, std::uint64_t a)
      : out_(out), header_(header), values_(values), parameters_(parameters), weights_(weights), caches_(caches),
        may_declare_(may_declare), only_call_(only_call), a_(a), cached_(index == 0 ? 0 : index == 1 ? 1 : 2),
        prefix_(index == 0 ? "first." : index == 1 ? "second." : "next.") {}

  // A new transient of `channels` x `frames` at `like`'s pixels (or the given ones), named under this call's kind.
  Act value(const std::string& name, std::uint64_t channels, std::uint64_t frames, std::uint64_t height,
            std::uint64_t width) {
    Act v{0, channels, frames, height, width};
    v.id = values_(prefix_ + name, v.elems() * a_);
    return v;
  }
  Act like(const std::string& name, const Act& x, std::uint64_t channels = 0, std::uint64_t frames = 0) {
    return value(name, channels ? channels : x.channels, frames ? frames : x.frames, x.height, x.width);
  }
  TensorAccess all(const Act& x) const { return {x.id, x.elems() * a_}; }
  TensorAccess last_frames(const Act& x, std::uint64_t frames) const { return {x.id, x.channels * frames * x.pixels() * a_}; }
  trace::Op& add(OpKind kind, std::int32_t group, std::uint64_t flops, std::vector<TensorAccess> reads,
                 std::vector<TensorAccess> writes, std::uint32_t launches = 1) {
    return trace::append_op(out_, kind, group, flops, std::move(reads), std::move(writes), launches);
  }
  // A module's weight (and bias) by its state-dict name, declared by the first build that uses it (a time_conv's from
  // the second call on).
  std::uint32_t weight(const std::string& name, std::int32_t group, std::vector<std::uint64_t> parts) {
    const auto it = weights_.find(name);
    if (it != weights_.end()) return it->second;
    if (!may_declare_) throw std::logic_error("Wan VAE weight '" + name + "' was not declared when the calls were built");
    const std::uint32_t id = parameters_.add(header_, group, name, std::move(parts));
    weights_.emplace(name, id);
    return id;
  }
  // A CausalConv3d's feat_cache slot: its input's last two frames, kept between calls.
  // Declared by the first build that uses it (a time_conv's from the second call on).
  std::uint32_t cache(const std::string& slot, std::uint64_t channels, std::uint64_t pixels) {
    const auto it = caches_.find(slot);
    if (it != caches_.end()) return it->second;
    if (!may_declare_) throw std::logic_error("Wan VAE cache '" + slot + "' was not declared when the calls were built");
    const std::uint32_t id =
        trace::append_tensor(header_, trace::TensorKind::Activation, 2 * channels * pixels * a_, -1, "feat_cache." + slot);
    caches_.emplace(slot, id);
    return id;
  }
  TensorAccess weight_access(std::uint32_t id) const { return {id, header_.tensors[id].bytes}; }
  // Holds a transient through `op` (a workspace is alive anyway).
  void keep(trace::Op& op, const Act& x) const {
    if (header_.tensors[x.id].kind == trace::TensorKind::Transient) op.keeps.push_back(x.id);
  }

  // RMS_norm (F.normalize over the channels, times sqrt(dim), times gamma, plus 0): the input held to the end.
  Act rms_norm(std::int32_t g, const std::string& name, const Act& x) {
    const std::uint32_t gamma = weight(name + ".gamma", g, {x.channels * a_});
    const Act norm = like(name + ".norm", x, 1), clamped = like(name + ".clamp", x, 1);
    add(OpKind::Norm, g, 2 * x.elems(), {all(x)}, {all(norm)});  // linalg_vector_norm
    add(OpKind::Elementwise, g, norm.elems(), {all(norm)}, {all(clamped)});  // clamp_min (expand_as: a view)
    const Act div = like(name + ".div", x), scaled = like(name + ".scaled", x), gammad = like(name + ".gamma_mul", x),
              sum = like(name + ".out", x);
    add(OpKind::Elementwise, g, x.elems(), {all(x), all(clamped)}, {all(div)});
    add(OpKind::Elementwise, g, x.elems(), {all(div)}, {all(scaled)});
    add(OpKind::Elementwise, g, x.elems(), {all(scaled), weight_access(gamma)}, {all(gammad)});
    keep(add(OpKind::Elementwise, g, x.elems(), {all(gammad)}, {all(sum)}), x);  // + 0
    return sum;
  }
  Act silu(std::int32_t g, const std::string& name, const Act& x) {
    const Act y = like(name, x);
    add(OpKind::Elementwise, g, 4 * x.elems(), {all(x)}, {all(y)});
    return y;
  }
  // A convolution's cuDNN call (transposes inside) and PyTorch's separate in-place bias add.
  Act convolution(std::int32_t g, const std::string& name, const trace::ConvShape& shape, const Act& input,
                  std::uint64_t out_frames, std::uint64_t out_height, std::uint64_t out_width) {
    const std::uint64_t kernel_volume = shape.volume();
    const std::uint32_t w = weight(name, g, {shape.in * shape.out * kernel_volume * a_, shape.out * a_});
    const Act y = value(name + ".out", shape.out, out_frames, out_height, out_width);
    // cuDNN runs these NCDHW (NCHW) bf16 convolutions with NHWC kernels (nhwckrsc_nhwc), transposing the input and
    // the filter into its workspace and the output out of it (nchwToNhwcKernel, nhwcToNchwKernel in the kernel
    // tables of results/validation/wan-vae); a 1x1 one runs without them. The workspace is PyTorch's allocation for
    // the call: a value alive through the convolution (no traffic of its own: the transposes' time is in the rate).
    std::vector<TensorAccess> writes{all(y)};
    if (kernel_volume > 1) {
      const Act workspace = value(name + ".cudnn_workspace", 1, 1, 1,
                                  input.elems() + y.elems() + shape.in * shape.out * kernel_volume);
      writes.push_back({workspace.id, 0});
    }
    trace::Op& op = add(OpKind::Gemm, g, 2 * kernel_volume * shape.in * shape.out * out_frames * out_height * out_width,
                        {weight_access(w), all(input)}, std::move(writes));
    op.conv = shape;
    add(OpKind::Elementwise, g, y.elems(), {all(y)}, {all(y)});  // output.add_(bias)
    return y;
  }
  static trace::ConvShape conv_shape(std::uint32_t kt, std::uint32_t kh, std::uint64_t in, std::uint64_t out) {
    trace::ConvShape s;
    s.kernel[0] = kt, s.kernel[1] = kh, s.kernel[2] = kh;
    s.in = static_cast<std::uint32_t>(in), s.out = static_cast<std::uint32_t>(out);
    return s;
  }

  // A cached CausalConv3d (kernel 3, padding 1) as the decoder calls it: the new cache cloned from the input's last
  // frames (with the old cache's last frame before it where the input has one frame), then torch.cat([old cache,
  // x]) and F.pad of the frames still missing and one pixel around, the convolution, the bias. The input is held by
  // the caller until the convolution returns.
  Act cached_conv(std::int32_t g, const std::string& name, const Act& x, std::uint64_t out_channels) {
    const std::uint64_t kept = std::min<std::uint64_t>(2, x.frames);
    Act fresh = like(name + ".cache_x", x, 0, kept);
    add(OpKind::Elementwise, g, 0, {last_frames(x, kept)}, {all(fresh)});  // x[:, :, -2:].clone()
    // A decode of one latent frame has one call: its clones stay in feat_map until WanVAE.decode returns.
    if (only_call_) held_.push_back(fresh.id);
    const std::uint32_t slot = only_call_ ? 0 : cache(name, x.channels, x.pixels());
    if (kept < 2 && cached_ > 0) {  // torch.cat([feat_cache[idx][:, :, -1], cache_x], 2)
      const Act two = like(name + ".cache_x2", x, 0, 2);
      add(OpKind::Elementwise, g, 0, {{slot, x.channels * x.pixels() * a_}, all(fresh)}, {all(two)});
      fresh = two;
    }
    Act joined = x;
    if (cached_ > 0) {  // torch.cat([cache_x, x], dim=2): the old cache, then released
      joined = like(name + ".cat", x, 0, x.frames + cached_);
      add(OpKind::Elementwise, g, 0, {{slot, x.channels * cached_ * x.pixels() * a_}, all(x)}, {all(joined)})
          .keeps.push_back(fresh.id);
    }
    // F.pad: constant_pad_nd fills the whole padded tensor, then copies the input into it.
    const Act padded = value(name + ".pad", x.channels, x.frames + 2, x.height + 2, x.width + 2);
    trace::Op& pad = add(OpKind::Elementwise, g, 0, {all(joined)}, {all(padded)}, 2);
    pad.reread_bytes = padded.elems() * a_;  // the fill's write before the copy's
    keep(pad, fresh);
    Act y = convolution(g, name, conv_shape(3, 3, x.channels, out_channels), padded, x.frames, x.height, x.width);
    keep(out_.ops.back(), x);
    keep(out_.ops.back(), fresh);
    return y;
  }

  // ResidualBlock: RMS_norm, SiLU, cached 3x3x3, RMS_norm, SiLU, cached 3x3x3; the 1x1x1 shortcut of the input where
  // the channels change (a CausalConv3d without cache: F.pad of nothing is a clone); the sum.
  Act residual(std::int32_t g, const std::string& name, const Act& x, std::uint64_t out_channels) {
    const Act h1 = cached_conv(g, name + ".residual.2", silu(g, name + ".residual.1", rms_norm(g, name + ".residual.0", x)),
                               out_channels);
    const Act h2 = cached_conv(g, name + ".residual.6", silu(g, name + ".residual.4", rms_norm(g, name + ".residual.3", h1)),
                               out_channels);
    Act shortcut = x;
    if (x.channels != out_channels) {
      const Act copy = like(name + ".shortcut.pad", x);
      add(OpKind::Elementwise, g, 0, {all(x)}, {all(copy)});
      shortcut = convolution(g, name + ".shortcut", conv_shape(1, 1, x.channels, out_channels), copy, x.frames, x.height,
                             x.width);
    }
    const Act sum = like(name + ".out", h2);
    add(OpKind::Elementwise, g, sum.elems(), {all(h2), all(shortcut)}, {all(sum)});
    return sum;
  }

  // AttentionBlock over one frame (the middle, where a call has one frame): RMS_norm, to_qkv (1x1 Conv2d), each of
  // q, k, v viewed (B, 1, C, HW), transposed and made contiguous, SDPA (one head of C over every pixel), the output
  // transposed back, proj (1x1 Conv2d), the residual sum. The chunk views keep to_qkv's output until the block returns.
  Act attention(std::int32_t g, const std::string& name, const Act& x) {
    const std::uint64_t c = x.channels, n = x.frames * x.pixels();
    const Act normed = rms_norm(g, name + ".norm", x);
    const Act qkv = convolution(g, name + ".to_qkv", conv_shape(0, 1, c, 3 * c), normed, x.frames, x.height, x.width);
    const Act q = like(name + ".q", x), k = like(name + ".k", x), v = like(name + ".v", x);
    add(OpKind::Elementwise, g, 0, {all(qkv)}, {all(q), all(k), all(v)}, 3);
    const Act o = like(name + ".sdpa", x), t = like(name + ".sdpa_t", x);
    trace::Op& sdpa = add(OpKind::Attention, g, 4 * x.frames * x.pixels() * x.pixels() * c, {all(q), all(k), all(v)}, {all(o)});
    sdpa.unmasked = true;
    add(OpKind::Elementwise, g, 0, {all(o)}, {all(t)});  // transpose(2, 3).reshape
    const Act p = convolution(g, name + ".proj", conv_shape(0, 1, c, c), t, x.frames, x.height, x.width);
    const Act sum = like(name + ".out", x);
    keep(add(OpKind::Elementwise, g, n * c, {all(p), all(x)}, {all(sum)}), qkv);
    return sum;
  }

  // Resample: upsample3d's time_conv (from the second call: the cache's clone, the (3, 1, 1) convolution to twice the
  // channels, torch.stack of its halves: twice the frames), then per frame a nearest-exact 2x upsample and a 3x3
  // Conv2d to half the channels. The input is held by the caller until it returns.
  Act upsample(std::int32_t g, const std::string& name, const Act& x, bool temporal) {
    Act y = x;
    if (temporal && cached_ > 0) {
      const std::uint32_t slot = cache(name, x.channels, x.pixels());
      const std::uint64_t kept = std::min<std::uint64_t>(2, x.frames);
      Act fresh = like(name + ".cache_x", x, 0, kept);
      add(OpKind::Elementwise, g, 0, {last_frames(x, kept)}, {all(fresh)});
      if (kept < 2) {  // before it: zeros (the second call) or the old cache's last frame
        const Act two = like(name + ".cache_x2", x, 0, 2);
        if (cached_ == 1) add(OpKind::Elementwise, g, 0, {all(fresh)}, {all(two)}, 2);  // zeros_like, cat
        else add(OpKind::Elementwise, g, 0, {{slot, x.channels * x.pixels() * a_}, all(fresh)}, {all(two)});
        fresh = two;
      }
      Act joined = x;
      if (cached_ == 2) {  // time_conv(x, feat_cache[idx]): cat with the cache, then F.pad of nothing: a clone
        joined = like(name + ".time_conv.cat", x, 0, x.frames + 2);
        add(OpKind::Elementwise, g, 0, {{slot, 2 * x.channels * x.pixels() * a_}, all(x)}, {all(joined)})
          .keeps.push_back(fresh.id);
      }
      const Act padded = like(name + ".time_conv.pad", x, 0, x.frames + 2);  // the second call pads two zero frames
      trace::Op& pad = add(OpKind::Elementwise, g, 0, {all(joined)}, {all(padded)}, cached_ == 2 ? 1 : 2);
      keep(pad, fresh);
      const Act tc = convolution(g, name + ".time_conv", conv_shape(3, 1, x.channels, 2 * x.channels), padded, x.frames,
                                 x.height, x.width);
      keep(out_.ops.back(), fresh);
      y = like(name + ".stack", x, 0, 2 * x.frames);
      add(OpKind::Elementwise, g, 0, {all(tc)}, {all(y)});  // torch.stack((x[:, 0], x[:, 1]), 3)
    }
    Act frames = y;
    if (y.frames > 1) {  // rearrange 'b c t h w -> (b t) c h w': a copy where t > 1
      frames = like(name + ".frames", y);
      add(OpKind::Elementwise, g, 0, {all(y)}, {all(frames)});
    }
    const Act up = value(name + ".upsample", y.channels, y.frames, 2 * y.height, 2 * y.width);
    add(OpKind::Elementwise, g, 0, {all(frames)}, {all(up)});  // nn.Upsample(nearest-exact)
    Act out = convolution(g, name + ".resample.1", conv_shape(0, 3, y.channels, y.channels / 2), up, y.frames, up.height,
                          up.width);
    keep(out_.ops.back(), frames);
    keep(out_.ops.back(), x);
    return out;  // rearrange back: a view
  }

 private:
  trace::Step& out_;
  trace::Header& header_;
  DitValues& values_;
  DitParameters& parameters_;
  std::map<std::string, std::uint32_t>& weights_;
  std::map<std::string, std::uint32_t>& caches_;
  bool may_declare_, only_call_;
  std::uint64_t a_;
  std::vector<std::uint32_t> held_;  // the only call's cache clones, alive to its end
  std::uint64_t cached_;  // frames each slot's cache holds when this call starts
  std::string prefix_;

  friend class WanVaeDecoderTraceGenerator;
};

WanVaeDecoderTraceGenerator::WanVaeDecoderTraceGenerator(const WanVaeConfig& model, std::uint32_t width,
                                                         std::uint32_t height, std::uint32_t frames, WeightDtype dtype)
    : model_(model), width_(width), height_(height), dtype_(dtype) {
  if (width_ < 8 || height_ < 8 || width_ > 16384 || height_ > 16384 || width_ % 8 != 0 || height_ % 8 != 0)
    throw InputError("", 0, "--resolution", "the Wan VAE decodes sides that are multiples of 8 up to 16384");
  if (frames < 1 || frames > 4097 || (frames - 1) % 4 != 0)
    throw InputError("", 0, "--frames", "the Wan VAE decodes 1 + 4k frames (1, 5, ..., 81), up to 4097");
  if (dtype_ != WeightDtype::Bf16 && dtype_ != WeightDtype::Fp16 && dtype_ != WeightDtype::Fp32)
    throw InputError("", 0, "--vae-dtype", "the VAE runs in bf16, fp16 or fp32");
  latent_frames_ = 1 + (frames - 1) / 4;
  const std::uint64_t a = activation_bytes(dtype_);
  {
    // The largest op and tensor a call makes, bounded per level (four frames at most, the padded input, the temporal
    // and spatial upsamples' outputs, the middle's attention), so no count below can wrap: the trace format takes
    // 10^18 FLOPs an op and 1 PiB a tensor.
    long double flops = 0, bytes = 3.0L * frames * width_ * height_ * a;
    const long double lh = height_ / 8, lw = width_ / 8;
    for (std::size_t i = 0; i < model_.dim_mult.size(); ++i) {
      const long double side = static_cast<long double>(std::uint64_t{1} << i), px = lh * lw * side * side;
      const long double c = static_cast<long double>(std::max(model_.level_in(i), model_.level_out(i)));
      flops = std::max({flops, 2 * 27 * c * c * 4 * px, 2 * 3 * c * 2 * c * 4 * px, 2 * 9 * c * c / 2 * 4 * 4 * px});
      bytes = std::max({bytes, 6 * c * (lh * side + 2) * (lw * side + 2) * a, 2 * c * 4 * 4 * px * a});
    }
    flops = std::max(flops, 4 * lh * lw * lh * lw * static_cast<long double>(model_.level_in(0)));
    if (flops > 1e18L || bytes > 1125899906842624.0L)
      throw InputError("", 0, "--resolution",
                       "a decode this large would make an op of over 10^18 FLOPs or a tensor over 1 PiB: beyond the trace "
                       "format's bounds");
  }
  header_.meta["model"] = model_.name;
  header_.meta["family"] = "wan-vae";
  header_.meta["dtype"] = to_string(dtype_);
  header_.meta["weight_dtype"] = to_string(dtype_);
  header_.meta["batch"] = "1";
  header_.meta["resolution"] = std::to_string(width_) + "x" + std::to_string(height_);
  header_.meta["frames"] = std::to_string(frames);
  header_.meta["parameters"] = std::to_string(model_.params());
  header_.meta["source"] = "tiersim Wan VAE decoder generator (comfy/ldm/wan/vae.py WanVAE.decode at a125cd84)";
  // ComfyUI loads the whole VAE; a decode reads the decoder and conv2 only.
  parameters_.add(header_, -1, "encoder (loaded, not read by a decode)", {(model_.params() - model_.decoder_params()) * a});
  const std::uint64_t lh = height_ / 8, lw = width_ / 8;
  latent_ = trace::append_tensor(header_, trace::TensorKind::Activation, model_.z_dim * latent_frames_ * lh * lw * a, -1,
                                 "latent");
  latent_conv_ = trace::append_tensor(header_, trace::TensorKind::Activation, model_.z_dim * latent_frames_ * lh * lw * a,
                                      -1, "latent.conv2");
  video_ = trace::append_tensor(header_, trace::TensorKind::Activation, 3ull * frames * height_ * width_ * a, -1, "video");
  // Build each kind of call once (the first, the second, a later one, and the last's video concatenation), declaring
  // its weights, caches and values; the transient peak is the largest call's.
  values_.declare_into(&header_);
  double peak = 0;
  for (std::uint64_t index : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{2}, latent_frames_ - 1}) {
    if (index >= latent_frames_) continue;
    trace::Step step;
    forward(index, step);
    trace::TransientLifetimes lifetimes;
    if (trace::derive_transient_lifetimes(header_, step, lifetimes))
      throw std::logic_error("the Wan VAE decoder uses a transient value before making it");
    peak = std::max(peak, lifetimes.peak);
  }
  // Every later call's video concatenation (its own size each call) is declared too.
  for (std::uint64_t index = 1; index < latent_frames_; ++index)
    values_("video.cat." + std::to_string(index), 3 * WanVaeConfig::video_frames(index + 1) * height_ * width_ * a);
  values_.declare_into(nullptr);
  building_ = false;
  // A one-frame decode never calls the temporal upsamples: their weights are loaded all the same.
  std::uint64_t read = 0;
  for (const auto& [name, id] : weights_) read += header_.tensors[id].bytes;
  if (read < model_.decoder_params() * a)
    parameters_.add(header_, -1, "decoder (loaded, not read by this decode)", {model_.decoder_params() * a - read});
  char b[32];
  std::snprintf(b, sizeof b, "%.0f", peak);
  header_.meta["transient_peak"] = b;
  trace::assign_components(header_, "vae");
}

bool WanVaeDecoderTraceGenerator::next(trace::Step& out) {
  if (next_ >= latent_frames_) return false;
  out.ops.clear();
  forward(next_++, out);
  return true;
}

void WanVaeDecoderTraceGenerator::forward(std::uint64_t index, trace::Step& out) {
  const std::uint64_t a = activation_bytes(dtype_);
  const std::uint64_t lh = height_ / 8, lw = width_ / 8;
  out.kind = trace::StepKind::Prefill;
  out.tokens = static_cast<std::uint32_t>(std::min<std::uint64_t>(lh * lw, 0xffffffffu));
  WanVaeDecoderCall call(out, header_, values_, parameters_, weights_, caches_, building_, index, latent_frames_ == 1, a);
  if (index == 0) {  // WanVAE.decode: x = self.conv2(z) over the whole latent (F.pad of nothing: a clone)
    const std::uint32_t w = call.weight("conv2", -1, {model_.z_dim * model_.z_dim * a, model_.z_dim * a});
    const std::uint64_t bytes = header_.tensors[latent_].bytes;
    call.add(OpKind::Elementwise, -1, 0, {{latent_, bytes}}, {{latent_conv_, bytes}});
    trace::Op& op = call.add(OpKind::Gemm, -1, 2 * model_.z_dim * model_.z_dim * latent_frames_ * lh * lw,
                             {call.weight_access(w), {latent_conv_, bytes}}, {{latent_conv_, bytes}});
    op.conv = WanVaeDecoderCall::conv_shape(1, 1, model_.z_dim, model_.z_dim);
    call.add(OpKind::Elementwise, -1, 0, {{latent_conv_, bytes}}, {{latent_conv_, bytes}});
  }
  // The decoder's input: x[:, :, i:i + 1] of conv2's output (a view), through conv1 (cached, from z channels).
  Act x{latent_conv_, model_.z_dim, 1, lh, lw};
  x = call.cached_conv(-1, "decoder.conv1", x, model_.level_in(0));
  x = call.residual(0, "decoder.middle.0", x, model_.level_in(0));
  x = call.attention(0, "decoder.middle.1", x);
  x = call.residual(0, "decoder.middle.2", x, model_.level_in(0));
  std::size_t module = 0;
  const std::size_t levels = model_.dim_mult.size();
  for (std::size_t i = 0; i < levels; ++i) {
    const std::int32_t g = static_cast<std::int32_t>(i) + 1;
    for (std::uint64_t b = 0; b <= model_.res_blocks; ++b)
      x = call.residual(g, "decoder.upsamples." + std::to_string(module++), x, model_.level_out(i));
    if (i + 1 != levels)
      x = call.upsample(g, "decoder.upsamples." + std::to_string(module++), x, model_.temporal_upsample(i));
  }
  const std::int32_t head = static_cast<std::int32_t>(levels) + 1;
  x = call.cached_conv(head, "decoder.head.2", call.silu(head, "decoder.head.1", call.rms_norm(head, "decoder.head.0", x)), 3);
  // out = torch.cat([out, out_], 2): the video so far and this call's frames into a new tensor (the first call's
  // output is the video).
  const std::uint64_t before = index == 0 ? 0 : WanVaeConfig::video_frames(index);
  const std::uint64_t after = WanVaeConfig::video_frames(index + 1);
  const std::uint64_t frame = 3 * height_ * width_ * a;
  if (index == 0) {
    trace::Op& op = call.add(OpKind::Elementwise, head, 0, {{x.id, 0}}, {{video_, 0}}, 0);  // no kernel, no bytes
    op.keeps = call.held_;
  } else {
    const std::uint32_t joined = values_("video.cat." + std::to_string(index), after * frame);
    call.add(OpKind::Elementwise, head, 0, {{video_, before * frame}, call.all(x)}, {{joined, after * frame}});
  }
}

}  // namespace tiersim::model
