#pragma once
// Which expert a read of a generated Hugging Face MoE trace is: transformers 5 keeps a layer's experts in one fused
// mlp.experts.gate_up_proj, and an expert's gate projection reads its slice's first half (trace_generator.cpp).
#include <cstdint>
#include <optional>
#include <string>

#include "trace/trace.hpp"

namespace tiersim::testing {

// The expert whose gate projection `r` is in layer `layer` (its slice's first half of gate_up_proj), else nothing.
inline std::optional<std::uint64_t> gate_read_expert(const trace::Header& h, const trace::TensorAccess& r, int layer) {
  const std::string fused = "model.layers." + std::to_string(layer) + ".mlp.experts.gate_up_proj";
  if (h.tensors[r.tensor].name != fused || r.bytes == 0 || r.offset % (2 * r.bytes) != 0) return std::nullopt;
  return r.offset / (2 * r.bytes);
}

}  // namespace tiersim::testing
