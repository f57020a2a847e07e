#include "pipeline/expert_job.hpp"

#include <map>

namespace tiersim::pipeline {

double VideoCost::seconds() const {
  double s = 0;
  for (const StageCost* c : {&text, &high, &low, &vae}) s += c->compute_seconds + c->transfer_seconds;
  return s;
}

ExpertJob comfy_expert_job(const ExpertJobSpec& spec, const hw::HostLinkSpec& link) {
  ComfyModelManager manager(spec.free_bytes);
  double high_loaded = 0, low_loaded = 0;  // each expert's bytes on the GPU at the first video's iterations
  const std::size_t text = spec.text_encoder_bytes > 0 ? manager.add(spec.text_encoder_name, spec.text_encoder_bytes) : 0;
  const std::size_t high = manager.add(spec.high_name, spec.expert_bytes);
  const std::size_t low = spec.two_experts ? manager.add(spec.low_name, spec.expert_bytes) : 0;
  const std::size_t vae = spec.vae_bytes > 0 ? manager.add(spec.vae_name, spec.vae_bytes) : 0;
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
  // VAE.decode passes memory_used_decode alone: the minimum is the same.
  auto decode = [&] {
    StageCost c = comfy_stage(manager, vae, spec.vae_memory, spec.vae_memory, 0, link);
    c.compute_seconds = spec.vae_seconds(c.budget_free);
    return c;
  };
  auto video = [&](VideoCost& v, bool first) {
    if (first && spec.text_encoder_bytes > 0) {  // CLIPTextEncode: memory_required 0
      v.text = comfy_stage(manager, text, 0, 0, 0, link);
      v.text.compute_seconds = spec.text_seconds(v.text.budget_free);
    } else {
      v.text.ran = false;
    }
    v.high = node(high, spec.high_steps);
    if (first) high_loaded = manager.loaded(high);
    if (spec.two_experts) {
      v.low = node(low, spec.low_steps);
      if (first) low_loaded = manager.loaded(low);
    } else {
      v.low.ran = false;
    }
    if (spec.vae_bytes > 0) v.vae = decode();
    else v.vae.ran = false;
  };
  ExpertJob job;
  video(job.first, true);
  job.high_loaded = high_loaded;
  job.low_loaded = low_loaded;
  video(job.next, false);
  return job;
}

}  // namespace tiersim::pipeline
