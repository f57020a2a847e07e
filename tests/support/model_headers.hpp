#pragma once
// Trace headers of the shipped model descriptions (traces/models/NAME.json, any family), generated once
// per test binary and kept: the fixture tests look many cases up against the same few models.
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "model/model_family.hpp"

namespace tiersim::testing {

// The path of a shipped model description: traces/models/NAME.json.
inline std::string model_path(const std::string& name) {
  return std::string(TIERSIM_SOURCE_DIR) + "/traces/models/" + name + ".json";
}

// A header's weight bytes, summed exactly.
inline std::uint64_t weight_bytes(const trace::Header& h) {
  std::uint64_t b = 0;
  for (const auto& t : h.tensors) b += t.kind == trace::TensorKind::Weight ? t.bytes : 0;
  return b;
}

inline const trace::Header& model_header(const std::string& name) {
  static std::map<std::string, std::unique_ptr<trace::StepSource>> cache;
  auto& source = cache[name];
  if (!source) {
    model::GenerationOptions g;
    g.prompt_tokens = 16;
    g.decode_tokens = 1;
    g.image.steps = 1;
    source = model::generate_trace(model_path(name), g);
  }
  return source->header();
}

}  // namespace tiersim::testing
