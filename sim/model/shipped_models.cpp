#include "model/shipped_models.hpp"

#include <filesystem>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

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

// A Hugging Face repository id, ORG/NAME: one '/', neither side empty, no file ending.
bool reads_as_hub_id(const std::string& spec) {
  const std::size_t slash = spec.find('/');
  return slash != std::string::npos && slash > 0 && slash + 1 < spec.size() && spec.find('/', slash + 1) == std::string::npos &&
         !ends_with(spec, ".json") && !ends_with(spec, ".gguf");
}

// The shipped config copied from repository `id`: the one whose recorded source is that repository's config.json,
// else (a diffusers pipeline) its transformer/config.json. Every shipped file's "source" starts with where it came from
// (read once: the shipped files do not change while the program runs).
const config::EmbeddedFile* shipped_from_repository(const std::string& id) {
  static const std::vector<std::pair<std::string, const config::EmbeddedFile*>> sources = [] {
    std::vector<std::pair<std::string, const config::EmbeddedFile*>> out;
    for (const auto& f : config::embedded_models()) {
      const auto j = nlohmann::json::parse(f.text, nullptr, false);
      if (j.is_object() && j.contains("source") && j["source"].is_string()) out.emplace_back(j["source"].get<std::string>(), &f);
    }
    return out;
  }();
  for (const char* file : {" config.json", " transformer/config.json"})
    for (const auto& [source, f] : sources)
      if (source.rfind(id + file, 0) == 0) return f;
  return nullptr;
}

}  // namespace

const config::EmbeddedFile* shipped_model(const std::string& spec) {
  std::error_code ec;
  if (spec.empty() || std::filesystem::exists(spec, ec)) return nullptr;
  for (const auto& f : config::embedded_models())
    if (f.name == spec) return &f;
  return reads_as_hub_id(spec) ? shipped_from_repository(spec) : nullptr;
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
  if (reads_as_hub_id(spec) && !std::filesystem::exists(spec, ec))
    throw InputError(spec, 0, "--model",
                     "no such file or folder here, and no shipped model comes from that Hugging Face repository "
                     "(tiersim downloads nothing: give the model's config.json or a snapshot folder; 'sim models' "
                     "lists the shipped ones)");
  if (reads_as_name(spec) && !std::filesystem::exists(spec, ec)) {
    std::string near;
    for (const auto& n : config::nearest_names(spec, shipped_model_names(), 3)) near += (near.empty() ? "" : ", ") + n;
    throw InputError(spec, 0, "--model",
                     "no such file, and not a shipped model name (nearest: " + near + "; 'sim models' lists them)");
  }
  return {io::read_file(spec, "", what), spec};
}

}  // namespace tiersim::model
