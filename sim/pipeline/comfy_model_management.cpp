#include "pipeline/comfy_model_management.hpp"

#include <algorithm>
#include <numeric>

#include "pipeline/comfy_budget.hpp"

namespace tiersim::pipeline {

std::size_t ComfyModelManager::add(const std::string& name, double bytes) {
  models_.push_back({name, bytes, 0, false});
  return models_.size() - 1;
}

double ComfyModelManager::free_memory() const {
  double used = 0;
  for (const auto& m : models_) used += m.loaded;
  return free_ - used;
}

void ComfyModelManager::free_memory(double target, std::size_t keep, std::vector<ModelMove>& moves) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < models_.size(); ++i)
    if (i != keep && models_[i].current) order.push_back(i);
  // The most offloaded first; ties (refcount in ComfyUI) by size, the smaller first.
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const double oa = models_[a].bytes - models_[a].loaded, ob = models_[b].bytes - models_[b].loaded;
    if (oa != ob) return oa > ob;
    return models_[a].bytes < models_[b].bytes;
  });
  for (const std::size_t i : order) {
    const double free = free_memory();
    if (free > target) break;
    Model& m = models_[i];
    const double wanted = target - free;
    const double out = wanted < m.loaded ? wanted : m.loaded;  // partially_unload, else detach
    if (out <= 0) continue;
    m.loaded -= out;
    if (m.loaded <= 0) {
      m.loaded = 0;
      m.current = false;
    }
    moves.push_back({m.name, 0, out});
  }
}

std::vector<ModelMove> ComfyModelManager::load(std::size_t index, double memory_required, double minimum_memory_required) {
  std::vector<ModelMove> moves;
  Model& m = models_[index];
  const double extra = comfy::minimum_required(comfy::kReserveLinux, memory_required);
  const double min_req = comfy::minimum_required(comfy::kReserveLinux, minimum_memory_required);
  free_memory(1.1 * (m.bytes - m.loaded) + extra, index, moves);
  if (free_memory() < min_req) free_memory(min_req, index, moves);
  // lowvram_model_memory: what may be loaded in all, leaving min_req free.
  last_budget_free_ = free_memory() + m.loaded;
  const double budget =
      comfy::lowvram_budget(last_budget_free_, min_req, comfy::minimum_inference(comfy::kReserveLinux), true);
  const double target = budget >= m.bytes ? m.bytes : std::max(m.loaded, budget);
  const double in = target - m.loaded;
  m.current = true;
  if (in > 0) {
    m.loaded = target;
    moves.push_back({m.name, in, 0});
  }
  return moves;
}

}  // namespace tiersim::pipeline
