#include "cli/model_list.hpp"

#include <cstdio>

#include "core/error.hpp"
#include "model/config_json.hpp"
#include "model/flux/flux_config.hpp"
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
