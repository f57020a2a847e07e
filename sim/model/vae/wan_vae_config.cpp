#include "model/vae/wan_vae_config.hpp"

#include <set>

#include "core/error.hpp"
#include "model/config_json.hpp"

namespace tiersim::model {

namespace {
// Parameters of comfy/ldm/wan/vae.py's modules: a CausalConv3d or Conv2d (weight and bias), RMS_norm (gamma only:
// bias=False everywhere in the VAE), ResidualBlock (RMS_norm, 3x3x3, RMS_norm, 3x3x3, a 1x1x1 shortcut where the
// channels change), AttentionBlock (RMS_norm, to_qkv and proj 1x1 Conv2d).
std::uint64_t conv(std::uint64_t in, std::uint64_t out, std::uint64_t volume) { return in * out * volume + out; }
std::uint64_t residual(std::uint64_t in, std::uint64_t out) {
  return in + conv(in, out, 27) + out + conv(out, out, 27) + (in != out ? conv(in, out, 1) : 0);
}
std::uint64_t attention(std::uint64_t c) { return c + conv(c, 3 * c, 1) + conv(c, c, 1); }
}  // namespace

std::uint64_t WanVaeConfig::level_in(std::size_t level) const {
  // Decoder3d: dims[0] = dim x dim_mult[-1]; "if i == 1 or i == 2 or i == 3: in_dim = in_dim // 2"
  return level == 0 ? dim * dim_mult.back() : level_out(level - 1) / 2;
}

std::uint64_t WanVaeConfig::level_out(std::size_t level) const { return dim * dim_mult[dim_mult.size() - 1 - level]; }

std::uint64_t WanVaeConfig::decoder_params() const {
  const std::uint64_t top = level_in(0);
  std::uint64_t p = conv(z_dim, z_dim, 1);  // WanVAE.conv2, run on the latent before the decoder
  p += conv(z_dim, top, 27) + 2 * residual(top, top) + attention(top);
  const std::size_t levels = dim_mult.size();
  for (std::size_t i = 0; i < levels; ++i) {
    std::uint64_t c = level_in(i);
    for (std::uint64_t b = 0; b <= res_blocks; ++b) {
      p += residual(c, level_out(i));
      c = level_out(i);
    }
    if (i + 1 != levels) {
      p += c * (c / 2) * 9 + c / 2;                      // Resample: Conv2d(dim, dim // 2, 3)
      if (temporal_upsample(i)) p += conv(c, 2 * c, 3);  // time_conv: CausalConv3d(dim, dim * 2, (3, 1, 1))
    }
  }
  const std::uint64_t last = level_out(levels - 1);
  return p + last + conv(last, 3, 27);  // head: RMS_norm, CausalConv3d(out_dim, 3, 3)
}

std::uint64_t WanVaeConfig::params() const {
  // Encoder3d(dim, z_dim * 2): conv1 from RGB, per level num_res_blocks ResidualBlocks and (but the last) a Resample
  // (ZeroPad2d, a stride-2 3x3 Conv2d; time_conv (3, 1, 1) stride 2 where it downsamples time), middle, head to 2z.
  std::vector<std::uint64_t> dims{dim};
  for (const std::uint64_t m : dim_mult) dims.push_back(dim * m);
  std::uint64_t p = conv(3, dims[0], 27);
  std::uint64_t c = dims[0];
  for (std::size_t i = 0; i + 1 < dims.size(); ++i) {
    for (std::uint64_t b = 0; b < res_blocks; ++b) {
      p += residual(c, dims[i + 1]);
      c = dims[i + 1];
    }
    if (i + 1 != dim_mult.size()) {
      p += conv(c, c, 9);
      if (temporal_downsample[i]) p += conv(c, c, 3);
    }
  }
  p += 2 * residual(c, c) + attention(c) + c + conv(c, 2 * z_dim, 27);
  return p + conv(2 * z_dim, 2 * z_dim, 1) + decoder_params();  // WanVAE.conv1 (mean and log-variance)
}

namespace {

constexpr Bound kDim{"base_dim", 4096, "4,096"};
constexpr Bound kZ{"z_dim", 1024, "1,024"};
constexpr Bound kBlocks{"num_res_blocks", 16, "16"};

WanVaeConfig read_wan_vae(const ConfigJson& doc) {
  const nlohmann::json& j = doc.json;
  if (!j.is_object()) throw InputError(doc.file, 1, "", "expected a JSON object of AutoencoderKLWan config fields");
  const ConfigReader r(doc);
  static const std::set<std::string> known{"_class_name", "base_dim", "z_dim", "dim_mult", "num_res_blocks",
                                           "attn_scales", "temperal_downsample", "in_channels", "out_channels",
                                           "is_residual", "patch_size", "decoder_base_dim"};
  // Provenance; training-only dropout; the latents' normalisation (the sampler's latent format applies it) and
  // diffusers' own output clamp and scale factors (derived from the network here).
  static const std::set<std::string> ignored{"_diffusers_version", "_name_or_path", "dropout", "latents_mean",
                                             "latents_std", "clip_output", "scale_factor_temporal",
                                             "scale_factor_spatial", "name", "source", "description"};
  r.refuse_unknown(known, ignored, "AutoencoderKLWan config");
  const auto cls = r.optional_string("_class_name");
  if (!cls || (*cls != "AutoencoderKLWan" && *cls != "AutoencoderKLQwenImage"))
    r.fail("_class_name", "must be AutoencoderKLWan or AutoencoderKLQwenImage");
  WanVaeConfig c;
  c.image_only = *cls == "AutoencoderKLQwenImage";
  const auto name = r.optional_string("name");
  const auto path = r.optional_string("_name_or_path");
  c.name = name ? *name : path ? *path : *cls;
  c.dim = r.count(kDim);
  c.z_dim = r.count(kZ);
  c.res_blocks = r.count(kBlocks);
  const nlohmann::json& mult = j.contains("dim_mult") ? j["dim_mult"] : nlohmann::json();
  // Decoder3d halves the channels entering levels 1, 2 and 3 (`if i == 1 or i == 2 or i == 3`): four levels.
  if (!mult.is_array() || mult.size() != 4)
    r.fail("dim_mult", "must list 4 multipliers (ComfyUI's Decoder3d is written for four levels)");
  c.dim_mult.clear();
  for (const auto& v : mult) {
    if (!v.is_number_unsigned() || v.get<std::uint64_t>() < 1 || v.get<std::uint64_t>() > 64)
      r.fail("dim_mult", "each must be an integer from 1 to 64");
    c.dim_mult.push_back(v.get<std::uint64_t>());
  }
  for (std::size_t i = 0; i < c.dim_mult.size(); ++i) {
    if ((c.dim * c.dim_mult[i]) % 2 != 0) r.fail("dim_mult", "each level's channels must be even (the upsample halves them)");
    if (c.dim * c.dim_mult[i] > 16384)
      r.fail("dim_mult", "a level of base_dim x dim_mult over 16,384 channels is not modelled (Wan's widest: 384)");
  }
  const nlohmann::json& td = j.contains("temperal_downsample") ? j["temperal_downsample"] : nlohmann::json();
  if (!td.is_array() || td.size() != c.dim_mult.size() - 1)
    r.fail("temperal_downsample", "must list 3 booleans, one per downsample");
  c.temporal_downsample.clear();
  for (const auto& v : td) {
    if (!v.is_boolean()) r.fail("temperal_downsample", "each must be true or false");
    c.temporal_downsample.push_back(v.get<bool>());
  }
  // The video VAE compresses time by 4: two temporal upsamples, as in every published config.
  int temporal = 0;
  for (const bool t : c.temporal_downsample) temporal += t ? 1 : 0;
  if (temporal != 2) r.fail("temperal_downsample", "exactly two must be true (4x in time: WanVAE.decode's 1 + 4 (t - 1) frames)");
  if (r.has("attn_scales") && (!j["attn_scales"].is_array() || !j["attn_scales"].empty()))
    r.fail("attn_scales", "attention at upsample scales is not modelled (every published Wan VAE has none: [])");
  for (const char* key : {"in_channels", "out_channels"})
    if (r.has(key) && j[key] != 3) r.fail(key, "must be 3 (ComfyUI's Wan VAE is RGB in and out)");
  if (r.optional_bool("is_residual", false))
    r.fail("is_residual", "true is Wan 2.2's 5B VAE (comfy/ldm/wan/vae2_2.py), not modelled");
  if (r.has("patch_size") && !j["patch_size"].is_null())
    r.fail("patch_size", "a patchified VAE (Wan 2.2's 5B) is not modelled: must be null");
  if (r.has("decoder_base_dim") && !j["decoder_base_dim"].is_null() && j["decoder_base_dim"] != c.dim)
    r.fail("decoder_base_dim", "a decoder wider than the encoder is not modelled: must be null or base_dim");
  return c;
}

}  // namespace

WanVaeConfig parse_wan_vae_config(const std::string& text, const std::string& file) {
  return read_config_with(parse_config_json(text, file), read_wan_vae);
}

WanVaeConfig load_wan_vae_config(const std::string& path) {
  return read_config_with(load_config_json(path, "VAE config"), read_wan_vae);
}

bool is_wan_vae_config(const std::string& path) {
  const ConfigJson doc = load_config_json(path, "VAE config");
  if (!doc.json.is_object() || !doc.json.contains("_class_name") || !doc.json["_class_name"].is_string()) return false;
  const std::string cls = doc.json["_class_name"].get<std::string>();
  return cls == "AutoencoderKLWan" || cls == "AutoencoderKLQwenImage";
}

}  // namespace tiersim::model
