#include "pipeline/comfy_stage.hpp"

namespace tiersim::pipeline {

StageCost comfy_stage(ComfyModelManager& manager, std::size_t model, double memory_required,
                      double minimum_memory_required, double compute, const hw::HostLinkSpec& link) {
  StageCost c;
  c.compute_seconds = compute;
  c.moves = manager.load(model, memory_required, minimum_memory_required);
  c.budget_free = manager.last_budget_free();
  for (const ModelMove& m : c.moves) {
    c.h2d_bytes += m.h2d;
    c.d2h_bytes += m.d2h;
    if (m.h2d > 0) c.transfer_seconds += link.h2d_pageable.seconds(m.h2d);
    // An unload copies into fresh host memory (the model's .to(offload_device) allocates it): its own rate where measured.
    if (m.d2h > 0) c.transfer_seconds += link.unload_curve().seconds(m.d2h);
  }
  return c;
}

}  // namespace tiersim::pipeline
