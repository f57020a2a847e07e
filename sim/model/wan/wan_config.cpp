#include "model/wan/wan_config.hpp"

#include <set>

#include "core/error.hpp"
#include "model/config_json.hpp"
#include "model/flux/flux_config.hpp"  // linear_params

namespace tiersim::model {

std::uint64_t WanConfig::block_params() const {
  // WanAttentionBlock: self-attention q, k, v, o Linear(d, d) with RMSNorm(d) weights on q and k; norm3
  // (LayerNorm with weight and bias) when cross_attn_norm; the cross-attention's q, o Linear(d, d) and k, v
  // (d, d) over the text; its q/k RMSNorms; the FFN Linear(d, ffn), Linear(ffn, d); the modulation (6 x d).
  const std::uint64_t d = dim();
  const std::uint64_t attention = 4 * linear_params(d, d) + 2 * d;
  return 2 * attention + (cross_attn_norm ? 2 * d : 0) + linear_params(d, ffn_dim) + linear_params(ffn_dim, d) + 6 * d;
}

std::uint64_t WanConfig::total_params() const {
  const std::uint64_t d = dim();
  const std::uint64_t embeddings = patch_embedding_params() + linear_params(text_dim, d) + linear_params(d, d) +
                                   linear_params(freq_dim, d) + linear_params(d, d) + linear_params(d, 6 * d);
  const std::uint64_t head = linear_params(d, patch_volume() * out_channels) + 2 * d;  // Linear + modulation (2 x d)
  return embeddings + layers * block_params() + head;
}

namespace {

constexpr Bound kHeads{"num_attention_heads", 1024, "1,024"};
constexpr Bound kHeadDim{"attention_head_dim", 1024, "1,024"};
constexpr Bound kFfn{"ffn_dim", 1u << 20, "1,048,576"};
constexpr Bound kLayers{"num_layers", 1000, "1,000"};
constexpr Bound kIn{"in_channels", 4096, "4,096"};
constexpr Bound kOut{"out_channels", 4096, "4,096"};
constexpr Bound kText{"text_dim", 65536, "65,536"};
constexpr Bound kFreq{"freq_dim", 65536, "65,536"};

WanConfig read_wan(const ConfigJson& doc) {
  const nlohmann::json& j = doc.json;
  if (!j.is_object()) throw InputError(doc.file, 1, "", "expected a JSON object of diffusers config fields");
  const ConfigReader r(doc);
  static const std::set<std::string> known{
      "name", "_class_name", "attention_head_dim", "num_attention_heads", "ffn_dim", "num_layers", "in_channels",
      "out_channels", "text_dim", "freq_dim", "patch_size", "cross_attn_norm", "qk_norm", "added_kv_proj_dim",
      "image_dim", "pos_embed_seq_len", "boundary_ratio"};
  // Provenance, the norms' epsilon and the rotary table's length change neither weights nor compute.
  static const std::set<std::string> ignored{"_diffusers_version", "_name_or_path", "source", "description", "eps",
                                             "rope_max_seq_len"};
  r.refuse_unknown(known, ignored, "WanTransformer3DModel config");
  const auto cls = r.optional_string("_class_name");
  if (!cls || *cls != kWanClass) r.fail("_class_name", std::string("must be ") + kWanClass);
  WanConfig c;
  const auto name = r.optional_string("name");
  const auto path = r.optional_string("_name_or_path");
  c.name = name ? *name : path ? *path : "Wan";
  c.heads = r.count(kHeads);
  c.head_dim = r.count(kHeadDim);
  c.ffn_dim = r.count(kFfn);
  c.layers = r.count(kLayers);
  c.in_channels = r.count(kIn);
  c.out_channels = r.has("out_channels") && !j["out_channels"].is_null() ? r.count(kOut) : c.in_channels;
  c.text_dim = r.count(kText);
  c.freq_dim = r.count(kFreq);
  c.cross_attn_norm = r.optional_bool("cross_attn_norm", true);  // diffusers' and ComfyUI's default
  // Image-to-video (a CLIP image context, added k/v projections) and first-last-frame video (a positional embedding
  // of the two frames' tokens) are other models: refused, not ignored.
  for (const char* key : {"added_kv_proj_dim", "image_dim", "pos_embed_seq_len"})
    if (r.has(key) && !j[key].is_null())
      r.fail(key, "is an image-to-video field; only text-to-video Wan and Wan 2.2's TI2V (null) are modelled");
  if (r.has("boundary_ratio") && !j["boundary_ratio"].is_null()) {
    const auto& b = j["boundary_ratio"];
    if (!b.is_number() || !(b.get<double>() > 0) || !(b.get<double>() < 1))
      r.fail("boundary_ratio", "must be a number between 0 and 1 (model_index.json's: where the second expert takes "
                               "over), got " + b.dump());
    c.boundary_ratio = b.get<double>();
  }
  if (c.out_channels == 48) c.vae_spatial = 16;
  else if (c.out_channels != 16)
    r.fail("out_channels", "must be 16 (Wan 2.1's VAE) or 48 (Wan 2.2's, TI2V-5B): ComfyUI knows no other Wan latent");
  if (r.has("qk_norm")) {
    const auto qk = r.optional_string("qk_norm");
    if (*qk != "rms_norm_across_heads") r.fail("qk_norm", "only \"rms_norm_across_heads\" (Wan 2.1) is modelled");
  }
  if (r.has("patch_size")) {
    const auto& p = j["patch_size"];
    bool ok = p.is_array() && p.size() == 3;
    for (std::size_t i = 0; ok && i < 3; ++i) {
      ok = p[i].is_number_unsigned() && p[i].get<std::uint64_t>() >= 1 && p[i].get<std::uint64_t>() <= 16;
      if (ok) c.patch[i] = p[i].get<std::uint64_t>();
    }
    if (!ok) r.fail("patch_size", "must be [frames, height, width], each 1 to 16, got " + p.dump());
  }
  if (c.head_dim < 6 || c.head_dim % 2 != 0)
    r.fail("attention_head_dim", "must be even and at least 6 (the rotary embedding rotates pairs over 3 axes)");
  return c;
}

}  // namespace

WanConfig parse_wan_config(const std::string& text, const std::string& file) {
  return read_config_with(parse_config_json(text, file), read_wan);
}

WanConfig load_wan_config(const std::string& path) { return read_config_with(load_config_json(path), read_wan); }

}  // namespace tiersim::model
