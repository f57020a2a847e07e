#include "model/shipped_models.hpp"

#include <filesystem>

#include "config/embedded_models.hpp"
#include "config/nearest_names.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "model/hf_snapshot.hpp"

namespace tiersim::model {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A word written as a name, not as a path: what a missing file is then taken for.
bool reads_as_name(const std::string& spec) {
  return !spec.empty() && spec.find('/') == std::string::npos && !ends_with(spec, ".json") && !ends_with(spec, ".gguf");
}

}  // namespace

const config::EmbeddedFile* shipped_model(const std::string& spec) {
  std::error_code ec;
  if (spec.empty() || std::filesystem::exists(spec, ec)) return nullptr;
  for (const auto& f : config::embedded_models())
    if (f.name == spec) return &f;
  return nullptr;
}

std::vector<std::string> shipped_model_names() {
  std::vector<std::string> out;
  for (const auto& f : config::embedded_models()) out.push_back(f.name);
  return out;
}

ModelText read_model_text(const std::string& spec, const std::string& what) {
  if (const auto* f = shipped_model(spec)) return {f->text, "model:" + f->name};
  if (is_snapshot_dir(spec)) {  // a Hugging Face snapshot: its config.json
    const std::string config = model_config_file(spec);
    return {io::read_file(config, "", what), config};
  }
  std::error_code ec;
  if (reads_as_name(spec) && !std::filesystem::exists(spec, ec)) {
    std::string near;
    for (const auto& n : config::nearest_names(spec, shipped_model_names(), 3)) near += (near.empty() ? "" : ", ") + n;
    throw InputError(spec, 0, "--model",
                     "no such file, and not a shipped model name (nearest: " + near + "; 'sim models' lists them)");
  }
  return {io::read_file(spec, "", what), spec};
}

}  // namespace tiersim::model
