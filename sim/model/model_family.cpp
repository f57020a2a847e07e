#include "model/model_family.hpp"

#include "core/error.hpp"
#include "model/config_json.hpp"
#include "model/flux/flux_trace_generator.hpp"
#include "model/model_config.hpp"

namespace tiersim::model {

const char* to_string(ModelFamily f) { return f == ModelFamily::Flux ? "flux" : "decoder"; }

ModelFamily model_family(const std::string& path) {
  const ConfigJson doc = load_config_json(path);
  if (!doc.json.is_object() || !doc.json.contains("_class_name")) return ModelFamily::Decoder;
  const ConfigReader r(doc);
  const auto cls = r.optional_string("_class_name");
  if (*cls == kFluxClass) return ModelFamily::Flux;
  r.fail("_class_name", "unsupported diffusers class '" + *cls + "': " + kFluxClass +
                            " (FLUX.1) is modelled; decoder LLMs are read from their config.json (model_type)");
}

std::unique_ptr<trace::StepSource> generate_trace(const std::string& path, const GenerationOptions& options) {
  if (model_family(path) == ModelFamily::Flux)
    return std::make_unique<FluxTraceGenerator>(load_flux_config(path), options);
  return std::make_unique<LlmTraceGenerator>(load_model_config(path), options);
}

}  // namespace tiersim::model
