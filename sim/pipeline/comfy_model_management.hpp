#pragma once
// ComfyUI's model management between the nodes of a job, as Comfy-Org/ComfyUI a125cd84 runs it on one NVIDIA GPU
// with default flags (experiments/frameworks/comfyui_model_management.md has every rule with its source line):
// - load_models_gpu(model, memory_required, minimum_memory_required): extra = max(I, memory_required + R),
//   min_req = max(I, minimum + R) (R = EXTRA_RESERVED_VRAM 400 MiB, I = minimum_inference_memory 0.8 GiB + R);
//   free_memory(1.1 x the model's bytes not on the GPU + extra), then free_memory(min_req) if still short; then the
//   model is loaded whole if it fits max(128 MiB, free + loaded - min_req), else up to that (model_patcher.py load:
//   largest leaves first; the rest is copied to the GPU at every forward). The budget is comfy_budget.hpp's, which
//   policies' comfy.lowvram places with too.
// - free_memory(X): every other loaded model, the most offloaded first (ties: smaller first; ComfyUI's refcount
//   order is runtime state), is unloaded by what is still missing, partly (smallest leaves first) when that is less
//   than what it has loaded, else whole; stops once free > X.
// - Free memory is the GPU's (its memory less the profile's reserve) less every model's loaded bytes; a node's own
//   activations are gone when the next node loads. Every load is a synchronous host-to-device copy from pageable
//   memory and every unload a device-to-host copy into pageable memory (one copy of each weight: nothing is pinned).
// Bytes are counted whole, not leaf by leaf (ComfyUI moves whole leaves: up to one leaf more, 19-132 MB for FLUX).
#include <cstdint>
#include <string>
#include <vector>

namespace tiersim::pipeline {

struct ModelMove {
  std::string model;
  double h2d = 0;  // bytes loaded to the GPU
  double d2h = 0;  // bytes unloaded to host memory
};

class ComfyModelManager {
 public:
  // `free_bytes`: the GPU's memory free with nothing loaded.
  explicit ComfyModelManager(double free_bytes) : free_(free_bytes) {}
  // Registers a model of `bytes` (not loaded); returns its index.
  std::size_t add(const std::string& name, double bytes);
  // load_models_gpu for one model; the moves it makes, evictions first.
  std::vector<ModelMove> load(std::size_t model, double memory_required, double minimum_memory_required);
  double loaded(std::size_t model) const { return models_[model].loaded; }
  // The free memory the last load's budget was taken from, the model's own loaded bytes counted as free
  // (lowvram_model_memory = free + loaded - min_req).
  double last_budget_free() const { return last_budget_free_; }
  double free_memory() const;

 private:
  struct Model {
    std::string name;
    double bytes = 0, loaded = 0;
    bool current = false;  // in current_loaded_models
  };
  void free_memory(double target, std::size_t keep, std::vector<ModelMove>& moves);
  double free_;
  double last_budget_free_ = 0;
  std::vector<Model> models_;
};

}  // namespace tiersim::pipeline
