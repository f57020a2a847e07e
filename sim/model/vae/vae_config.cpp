#include "model/vae/vae_config.hpp"

#include <set>

#include "core/error.hpp"
#include "model/config_json.hpp"

namespace tiersim::model {

namespace {
std::uint64_t conv(std::uint64_t in, std::uint64_t out, std::uint64_t k) { return in * out * k * k + out; }
std::uint64_t group_norm(std::uint64_t c) { return 2 * c; }
std::uint64_t resnet(std::uint64_t in, std::uint64_t out) {
  return group_norm(in) + conv(in, out, 3) + group_norm(out) + conv(out, out, 3) + (in != out ? conv(in, out, 1) : 0);
}
std::uint64_t attention(std::uint64_t c) { return group_norm(c) + 4 * conv(c, c, 1); }
}  // namespace

std::uint64_t VaeConfig::decoder_params() const {
  // Decoder: conv_in z -> top; mid (two ResnetBlocks around an AttnBlock); per level from the top down,
  // res_blocks + 1 ResnetBlocks to that level's channels and, but for the last, an Upsample's 3x3 conv;
  // norm_out and conv_out.
  const std::uint64_t top = channels.back();
  std::uint64_t p = conv(latent_channels, top, 3) + 2 * resnet(top, top) + attention(top);
  std::uint64_t c = top;
  for (std::size_t i = channels.size(); i-- > 0;) {
    for (std::uint64_t b = 0; b <= res_blocks; ++b) {
      p += resnet(c, channels[i]);
      c = channels[i];
    }
    if (i != 0) p += conv(c, c, 3);
  }
  return p + group_norm(c) + conv(c, out_channels, 3);
}

std::uint64_t VaeConfig::params() const {
  // Encoder: conv_in, per level res_blocks ResnetBlocks and, but for the last, a Downsample's strided 3x3
  // conv; mid; norm_out and conv_out to 2z (mean and log-variance).
  std::uint64_t p = conv(in_channels, channels.front(), 3);
  std::uint64_t c = channels.front();
  for (std::size_t i = 0; i < channels.size(); ++i) {
    for (std::uint64_t b = 0; b < res_blocks; ++b) {
      p += resnet(c, channels[i]);
      c = channels[i];
    }
    if (i + 1 != channels.size()) p += conv(c, c, 3);
  }
  p += 2 * resnet(c, c) + attention(c) + group_norm(c) + conv(c, 2 * latent_channels, 3);
  if (quant_convs) p += conv(2 * latent_channels, 2 * latent_channels, 1) + conv(latent_channels, latent_channels, 1);
  return p + decoder_params();
}

namespace {

constexpr Bound kChannel{"block_out_channels", 65536, "65,536"};
constexpr Bound kLayers{"layers_per_block", 64, "64"};
constexpr Bound kLatent{"latent_channels", 4096, "4,096"};
constexpr Bound kIn{"in_channels", 64, "64"};
constexpr Bound kOut{"out_channels", 64, "64"};
constexpr Bound kGroups{"norm_num_groups", 4096, "4,096"};

VaeConfig read_vae(const ConfigJson& doc) {
  const nlohmann::json& j = doc.json;
  if (!j.is_object()) throw InputError(doc.file, 1, "", "expected a JSON object of AutoencoderKL config fields");
  const ConfigReader r(doc);
  static const std::set<std::string> known{
      "_class_name", "block_out_channels", "layers_per_block", "latent_channels", "in_channels", "out_channels",
      "norm_num_groups", "act_fn", "down_block_types", "up_block_types", "mid_block_add_attention",
      "use_quant_conv", "use_post_quant_conv"};
  // Provenance, and what scales latents or diffusers' own dtype handling (ComfyUI decodes in its vae_dtype).
  static const std::set<std::string> ignored{"_diffusers_version", "_name_or_path", "sample_size", "scaling_factor",
                                             "shift_factor", "force_upcast", "latents_mean", "latents_std", "name",
                                             "source", "description"};
  r.refuse_unknown(known, ignored, "AutoencoderKL config");
  const auto cls = r.optional_string("_class_name");
  if (!cls || *cls != "AutoencoderKL") r.fail("_class_name", "must be AutoencoderKL");
  VaeConfig c;
  const auto name = r.optional_string("name");
  const auto path = r.optional_string("_name_or_path");
  c.name = name ? *name : path ? *path : "VAE";
  const nlohmann::json& ch = j.contains("block_out_channels") ? j["block_out_channels"] : nlohmann::json();
  if (!ch.is_array() || ch.size() < 2 || ch.size() > 8)
    r.fail("block_out_channels", "must list 2 to 8 channel counts, one per resolution level");
  for (const auto& v : ch) {
    if (!v.is_number_unsigned() || v.get<std::uint64_t>() < 1 || v.get<std::uint64_t>() > kChannel.max)
      r.fail("block_out_channels", "each must be an integer from 1 to 65,536");
    c.channels.push_back(v.get<std::uint64_t>());
  }
  c.res_blocks = r.count(kLayers);
  c.latent_channels = r.count(kLatent);
  c.in_channels = r.has("in_channels") ? r.count(kIn) : 3;
  c.out_channels = r.has("out_channels") ? r.count(kOut) : 3;
  c.groups = r.has("norm_num_groups") ? r.count(kGroups) : 32;
  for (const std::uint64_t v : c.channels)
    if (v % c.groups != 0) r.fail("norm_num_groups", "must divide every block_out_channels entry (GroupNorm)");
  if (r.has("act_fn") && j["act_fn"] != "silu") r.fail("act_fn", "must be silu (ComfyUI's nonlinearity is swish)");
  if (!r.optional_bool("mid_block_add_attention", true))
    r.fail("mid_block_add_attention", "false is not modelled (ComfyUI's Decoder always has the mid attention)");
  for (const char* key : {"down_block_types", "up_block_types"}) {
    if (!r.has(key)) continue;
    const nlohmann::json& types = j[key];
    const std::string want = key[0] == 'd' ? "DownEncoderBlock2D" : "UpDecoderBlock2D";
    if (!types.is_array() || types.size() != c.channels.size())
      r.fail(key, "must list one block per block_out_channels entry");
    for (const auto& t : types)
      if (t != want) r.fail(key, "only " + want + " blocks are modelled (no attention outside the mid block)");
  }
  const bool quant = r.optional_bool("use_quant_conv", true), post = r.optional_bool("use_post_quant_conv", true);
  if (quant != post) r.fail("use_quant_conv", "must equal use_post_quant_conv");
  c.quant_convs = quant;
  return c;
}

}  // namespace

VaeConfig parse_vae_config(const std::string& text, const std::string& file) {
  return read_config_with(parse_config_json(text, file), read_vae);
}

VaeConfig load_vae_config(const std::string& path) { return read_config_with(load_config_json(path, "VAE config"), read_vae); }

}  // namespace tiersim::model
