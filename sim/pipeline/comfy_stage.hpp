#pragma once
// One node of a ComfyUI job: its model loaded by ComfyUI's model management (comfy_model_management.hpp), the moves
// that load makes priced as synchronous pageable copies over the host link, and the node's compute time. The image
// job (image_job.hpp) and the two-expert sampler job (expert_job.hpp) are sequences of these.
#include <vector>

#include "hardware/profile.hpp"
#include "pipeline/comfy_model_management.hpp"

namespace tiersim::pipeline {

struct StageCost {
  bool ran = true;
  double budget_free = 0;  // the free memory its model's load budget was taken from (its own bytes counted)
  double compute_seconds = 0;
  double h2d_bytes = 0, d2h_bytes = 0, transfer_seconds = 0;
  std::vector<ModelMove> moves;
};

// load_models_gpu for `model` with the node's memory estimates, then `compute` seconds of its own work. Each
// model's copy is one synchronous stream of its leaves, one after another (`link`'s pageable curves; an unload at its
// d2h_fresh_pageable curve where the profile has one: the host memory is allocated by the move).
StageCost comfy_stage(ComfyModelManager& manager, std::size_t model, double memory_required,
                      double minimum_memory_required, double compute, const hw::HostLinkSpec& link);

}  // namespace tiersim::pipeline
