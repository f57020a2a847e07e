#include "cli/model_list.hpp"

#include <cstdio>

#include "core/error.hpp"
#include "model/config_json.hpp"
#include "model/flux/flux_config.hpp"
#include "model/hf_snapshot.hpp"
#include "model/model_config.hpp"
#include "model/qwen_image/qwen_image_config.hpp"
#include "model/shipped_models.hpp"
#include "model/text_encoder/llm_text_encoder_config.hpp"
#include "model/text_encoder/text_encoder_config.hpp"
#include "model/vae/vae_config.hpp"
#include "model/vae/wan_vae_config.hpp"
#include "model/wan/wan_config.hpp"
#include "report/output_file.hpp"

namespace tiersim::app {
namespace {

// The parameters of the config named `name`, counted by the reader its kind goes to (the one a run uses).
std::uint64_t params_of(const std::string& name, const std::string& kind, bool diffusers) {
  if (diffusers) {
    if (kind == model::kFluxClass) return model::load_flux_config(name).total_params();
    if (kind == model::kWanClass) return model::load_wan_config(name).total_params();
    if (kind == model::kQwenImageClass) return model::load_qwen_image_config(name).total_params();
    if (kind == "AutoencoderKLWan" || kind == "AutoencoderKLQwenImage") return model::load_wan_vae_config(name).params();
    return model::load_vae_config(name).params();
  }
  if (kind == "clip_text_model" || kind == "t5" || kind == "umt5") return model::load_text_encoder_config(name).params();
  if (kind == "qwen2_5_vl") return model::load_llm_text_encoder_config(name).params();
  return model::load_model_config(name).total_params();
}

}  // namespace

std::vector<ShippedModel> shipped_models() {
  std::vector<ShippedModel> out;
  for (const std::string& name : model::shipped_model_names()) {
    const model::ConfigJson doc = model::load_config_json(name);
    const bool diffusers = doc.json.is_object() && doc.json.contains("_class_name");
    const char* key = diffusers ? "_class_name" : "model_type";
    if (!doc.json.is_object() || !doc.json.contains(key) || !doc.json[key].is_string())
      throw InputError(doc.file, 0, key, "a shipped model config must name its family");
    const std::string kind = doc.json[key].get<std::string>();
    out.push_back({name, kind, params_of(name, kind, diffusers)});
  }
  return out;
}

int check_snapshot(const std::string& dir) {
  if (!model::is_snapshot_dir(dir)) throw InputError(dir, 0, "models", "is no folder (give a Hugging Face snapshot's)");
  const model::ConfigJson doc = model::load_config_json(dir);
  const bool diffusers = doc.json.is_object() && doc.json.contains("_class_name");
  const char* key = diffusers ? "_class_name" : "model_type";
  const model::ConfigReader r(doc);
  const auto kind = r.optional_string(key);
  if (!kind) r.fail(key, "missing: the family the config is read by");
  const std::uint64_t params = params_of(dir, *kind, diffusers);
  const auto dtype = r.optional_string("torch_dtype");
  // The checkpoint's bytes at the config's own dtype (transformers' torch_dtype names).
  const std::uint64_t width = !dtype ? 0 : *dtype == "float32" ? 4 : *dtype == "bfloat16" || *dtype == "float16" ? 2 : 0;
  std::printf("%s: %s %s, %llu parameters as tiersim counts them\n", doc.file.c_str(), key, kind->c_str(),
              static_cast<unsigned long long>(params));
  const model::SnapshotWeights w = model::read_snapshot_weights(dir);
  if (w.files.empty()) {
    std::printf("safetensors: none in the folder (nothing to check the config against)\n");
    report::check_stdout("standard output");
    return 0;
  }
  std::string by_dtype;
  for (const auto& [d, b] : w.bytes_by_dtype) by_dtype += (by_dtype.empty() ? "" : ", ") + d + " " + std::to_string(b);
  std::printf("safetensors: %zu file(s), %llu tensors, %llu parameters, %llu bytes (%s)\n", w.files.size(),
              static_cast<unsigned long long>(w.tensors), static_cast<unsigned long long>(w.elements),
              static_cast<unsigned long long>(w.bytes), by_dtype.c_str());
  auto signed_diff = [](std::uint64_t a, std::uint64_t b) {
    return a >= b ? "+" + std::to_string(a - b) : "-" + std::to_string(b - a);
  };
  if (w.elements == params)
    std::printf("parameters: the headers and the config agree\n");
  else
    std::printf("parameters: differ: the headers hold %s against the config's count\n",
                signed_diff(w.elements, params).c_str());
  if (width == 0)
    std::printf("bytes: not checked (torch_dtype %s is not float32, bfloat16 or float16)\n", dtype ? dtype->c_str() : "absent");
  else if (w.bytes == params * width)
    std::printf("bytes: the headers and the config at %s agree (%llu)\n", dtype->c_str(),
                static_cast<unsigned long long>(w.bytes));
  else
    std::printf("bytes: differ: the headers hold %s against the config at %s (%llu)\n",
                signed_diff(w.bytes, params * width).c_str(), dtype->c_str(),
                static_cast<unsigned long long>(params * width));
  report::check_stdout("standard output");
  return 0;
}

int list_models() {
  std::printf("models (--model NAME, or a config.json path)\n");
  std::printf("  %-24s %-30s %16s\n", "name", "model_type / _class_name", "parameters");
  for (const auto& m : shipped_models()) {
    char billions[32];
    std::snprintf(billions, sizeof billions, "%.2f B", static_cast<double>(m.params) / 1e9);
    std::printf("  %-24s %-30s %16llu  %s\n", m.name.c_str(), m.kind.c_str(), static_cast<unsigned long long>(m.params),
                billions);
  }
  report::check_stdout("standard output");
  return 0;
}

}  // namespace tiersim::app
