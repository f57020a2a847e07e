#include "pipeline/expert_job.hpp"

#include <map>

namespace tiersim::pipeline {

double VideoCost::seconds() const {
  return high.compute_seconds + high.transfer_seconds + low.compute_seconds + low.transfer_seconds;
}

ExpertJob comfy_expert_job(const ExpertJobSpec& spec, const hw::HostLinkSpec& link) {
  ComfyModelManager manager(spec.free_bytes);
  const std::size_t high = manager.add(spec.high_name, spec.expert_bytes);
  const std::size_t low = manager.add(spec.low_name, spec.expert_bytes);
  // Iterations priced once per load budget: the experts share a shape, so equal budgets place them alike.
  std::map<double, double> per_budget;
  auto iteration = [&](double budget) {
    auto it = per_budget.find(budget);
    if (it == per_budget.end()) it = per_budget.emplace(budget, spec.iteration_seconds(budget)).first;
    return it->second;
  };
  auto node = [&](std::size_t expert, std::uint32_t steps) {
    StageCost c = comfy_stage(manager, expert, spec.sampling_memory, spec.sampling_minimum, 0, link);
    c.compute_seconds = steps * iteration(c.budget_free);
    return c;
  };
  ExpertJob job;
  job.first.high = node(high, spec.high_steps);
  job.high_loaded = manager.loaded(high);
  job.first.low = node(low, spec.low_steps);
  job.low_loaded = manager.loaded(low);
  job.next.high = node(high, spec.high_steps);
  job.next.low = node(low, spec.low_steps);
  return job;
}

}  // namespace tiersim::pipeline
