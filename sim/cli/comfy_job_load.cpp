#include "cli/comfy_job_load.hpp"

#include <cstdio>
#include <filesystem>

#include "core/error.hpp"
#include "model/shipped_models.hpp"
#include "replay/event_replay.hpp"

namespace tiersim::app {

strategy::StrategySpec comfy_job_load(double free, double memory_required, double minimum, const char* flag) {
  strategy::StrategySpec st;
  char opts[256];
  std::snprintf(opts, sizeof opts, "comfy.lowvram:version=2025-07,free=%.0fB,memory-required=%.0fB,minimum-memory-required=%.0fB",
                free, memory_required, minimum);
  st.placement = strategy::PartSpec::parse(opts, flag);
  st.offload = strategy::PartSpec::parse("copy:host=pageable", flag);
  st.custom = true;
  return st;
}

std::string job_component(const std::string& model_path, const char* file, const char* flag) {
  // A shipped model's companions ship beside it: named as it is (t5-v1_1-xxl.json -> t5-v1_1-xxl).
  if (model::shipped_model(model_path)) {
    const std::string name = std::filesystem::path(file).stem().string();
    if (model::shipped_model(name)) return name;
  }
  const std::filesystem::path p = std::filesystem::path(model_path).parent_path() / file;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec))
    throw InputError(p.string(), 0, flag, std::string("the job reads ") + file + " beside the model's config; it is not there");
  return p.string();
}

double comfy_job_stage_seconds(const RunInputs& in, trace::StepSource& source, const strategy::StrategySpec& load) {
  const placement::Placement placement = strategy::compose(source.header(), in.hw, load);
  return result::summarize(replay::run_event_engine(in.setup(), placement, source)).total_seconds;
}

}  // namespace tiersim::app
