#pragma once
// Trace headers of the shipped model descriptions (traces/models/NAME.json), generated once per test
// binary and kept: the fixture tests look many cases up against the same few models.
#include <map>
#include <memory>
#include <string>

#include "model/model_config.hpp"
#include "model/trace_generator.hpp"

namespace tiersim::testing {

inline const trace::Header& model_header(const std::string& name) {
  struct Entry {
    model::ModelConfig config;
    std::unique_ptr<model::LlmTraceGenerator> generator;
  };
  static std::map<std::string, std::unique_ptr<Entry>> cache;
  auto& entry = cache[name];
  if (!entry) {
    entry = std::make_unique<Entry>();
    entry->config = model::load_model_config(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/" + name + ".json");
    model::GenerationOptions g;
    g.prompt_tokens = 16;
    g.decode_tokens = 1;
    entry->generator = std::make_unique<model::LlmTraceGenerator>(entry->config, g);
  }
  return entry->generator->header();
}

}  // namespace tiersim::testing
