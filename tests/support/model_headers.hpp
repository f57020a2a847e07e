#pragma once
// Trace headers of the shipped model descriptions (traces/models/NAME.json, any family), generated once
// per test binary and kept: the fixture tests look many cases up against the same few models.
#include <map>
#include <memory>
#include <string>

#include "model/model_family.hpp"

namespace tiersim::testing {

inline const trace::Header& model_header(const std::string& name) {
  static std::map<std::string, std::unique_ptr<trace::StepSource>> cache;
  auto& source = cache[name];
  if (!source) {
    model::GenerationOptions g;
    g.prompt_tokens = 16;
    g.decode_tokens = 1;
    g.image.steps = 1;
    source = model::generate_trace(std::string(TIERSIM_SOURCE_DIR) + "/traces/models/" + name + ".json", g);
  }
  return source->header();
}

}  // namespace tiersim::testing
