#include <nlohmann/json.hpp>

#include <cctype>
#include <cmath>
#include <map>
#include <cstdint>

#include "git_sha.hpp"  // generated at build time (sim/report/write_git_sha.cmake)

#include "accuracy/error_band.hpp"
#include "core/json_text.hpp"
#include "report/reporters.hpp"

#ifndef TIERSIM_VERSION
#define TIERSIM_VERSION "unknown"
#endif

namespace tiersim::report {

namespace {

// A text encoder's JSON key from its name: "T5" -> t5_seconds, "Qwen2.5-VL" -> qwen2_5_vl_seconds.
std::string text_encoder_key(const std::string& name) {
  std::string key;
  for (const char ch : name) key += std::isalnum(static_cast<unsigned char>(ch)) ? static_cast<char>(std::tolower(static_cast<unsigned char>(ch))) : '_';
  return key + "_seconds";
}
}  // namespace

std::int64_t whole_bytes(double bytes) { return std::llround(bytes); }

std::string version() { return TIERSIM_VERSION; }
std::string git_sha() { return TIERSIM_GIT_SHA; }

void write_json(std::ostream& out, const Context& c) {
  using nlohmann::ordered_json;
  const result::Summary s = result::summarize(*c.result);
  const auto& h = *c.header;
  const auto& hw = *c.hw;
  ordered_json j;
  j["schema_version"] = kJsonSchemaVersion;
  j["tiersim_version"] = TIERSIM_VERSION;
  j["git_sha"] = TIERSIM_GIT_SHA;
  j["engine"] = c.result->engine;
  j["policy"] = c.policy;
  ordered_json settings = ordered_json::object();
  for (const auto& [k, v] : c.placement->resolved) settings[k] = v;
  j["policy_settings"] = settings;
  j["execution"] = {{"prefetch", c.placement->copy.prefetch},
                    {"host_memory", placement::to_string(c.placement->copy.host_memory)},
                    {"sync_copies", c.placement->copy.sync},
                    {"sequence_lengths", c.fresh_lengths ? "fresh" : "warm"}};
  j["hardware"] = hw.name;
  j["hardware_detail"] = {{"origin", hw.origin},
                          {"gpu", hw.gpu.name},
                          {"gpu_count", hw.gpu.count},
                          {"gpu_memory_bytes", whole_bytes(hw.gpu.memory)},
                          {"host", hw.host.name},
                          {"host_link", hw.host_link.type + " gen" + std::to_string(hw.host_link.generation) + " x" +
                                            std::to_string(hw.host_link.width)}};
  j["trace"] = {{"name", c.trace_name},
                {"model", h.meta.count("model") ? h.meta.at("model") : ""},
                {"batch", h.batch()},
                {"steps", c.result->steps.size()},
                {"decode_steps", s.decode_steps}};
  if (h.meta.count("cfg")) {
    // A guided diffusion run: the negative prompt in the positive's batch (1 forward an iteration) or after it (2).
    j["trace"]["cfg_forwards"] = h.meta.count("cfg_separate") || h.meta.count("negative_tokens") ? 2 : 1;
    if (h.meta.count("cfg_batch_estimate"))
      j["trace"]["comfy_cond_batch"] = {{"estimate_bytes", std::stod(h.meta.at("cfg_batch_estimate"))},
                                        {"free_bytes", std::stod(h.meta.at("cfg_batch_free"))}};
  }
  j["tps"] = s.tps;
  j["step_seconds"] = s.decode_step_median;
  j["step_seconds_mean"] = s.decode_step_mean;
  j["prefill_seconds"] = s.prefill_seconds;
  if (s.prefill_tokens > 0 && s.prefill_seconds > 0) j["prefill_tokens_per_s"] = s.prefill_tps();
  j["total_seconds"] = s.total_seconds;
  j["first_step_seconds"] = c.result->steps.front().seconds;  // cold: managed memory faults in here
  {
    // How sure the figures are: the validation rows of the run's class (sim/accuracy/error_band.hpp); null where
    // the class has none.
    const accuracy::Band band = accuracy::band_for(accuracy::classify(h, hw, *c.placement, s));
    auto rows = [](const std::optional<accuracy::BandRow>& r) -> ordered_json {
      if (!r) return nullptr;
      return {{"rows", r->rows}, {"mean_abs_error", r->mean_abs}, {"median_abs_error", r->median_abs},
              {"p90_abs_error", r->p90_abs}, {"strategy", r->strategy}, {"sets", r->sets}};
    };
    j["accuracy"] = {{"machine_class", band.run.machine_class}, {"workload", band.run.workload},
                     {"basis", accuracy::basis_name(band.basis)},
                     {"strategy", band.run.strategy}, {"in_sample", rows(band.in_sample)},
                     {"out_of_sample", rows(band.out_of_sample)}, {"other_host", rows(band.other_host)},
                     {"text", band.text()}};
  }
  j["vram_peak_bytes"] = whole_bytes(c.result->peak_bytes.count("cuda:0") ? c.result->peak_bytes.at("cuda:0") : 0.0);
  j["offloaded_bytes"] = whole_bytes(placement::offloaded_weight_bytes(h, *c.placement));
  j["weight_bytes"] = whole_bytes(placement::weight_bytes(h));
  j["h2d_bytes_per_step"] = whole_bytes(s.h2d_bytes_per_step);
  j["d2h_bytes_per_step"] = whole_bytes(s.d2h_bytes_per_step);
  j["peer_bytes_per_step"] = whole_bytes(s.peer_bytes_per_step);
  j["gpu_busy_share"] = s.gpu_busy_share;
  j["remote_read_bytes_per_step"] = whole_bytes(s.remote_read_bytes_per_step);
  // Per step kind, only the kinds the trace has.
  ordered_json kinds = ordered_json::object();
  if (s.prefill_steps > 0) kinds["prefill"] = {{"steps", s.prefill_steps}, {"seconds", s.prefill_seconds}};
  if (s.decode_steps > 0)
    kinds["decode"] = {{"steps", s.decode_steps}, {"median_seconds", s.decode_step_median}, {"tokens_per_second", s.tps}};
  if (s.iteration_steps > 0)
    kinds["iteration"] = {{"steps", s.iteration_steps}, {"median_seconds", s.iteration_median}};
  j["step_kinds"] = kinds;
  const double sysmem = placement::sysmem_usage(h, *c.placement).total();
  if (sysmem > 0) {
    const auto u = placement::sysmem_usage(h, *c.placement);
    j["sysmem_fallback"] = {{"weights_bytes", whole_bytes(u.weights)}, {"kv_cache_bytes", whole_bytes(u.kv)},
                            {"activations_bytes", whole_bytes(u.activations)}, {"total_bytes", whole_bytes(sysmem)}};
  }
  const double paged = placement::paged_managed_usage(h, *c.placement).total();
  if (c.result->managed.enabled && paged > 0) {
    const auto& m = c.result->managed;
    j["managed_memory"] = {{"footprint_bytes", whole_bytes(paged)},
                           {"gpu_capacity_bytes", whole_bytes(placement::managed_gpu_capacity(h, hw, *c.placement))},
                           {"faulted_blocks_per_step", s.faulted_blocks_per_step},
                           {"evicted_blocks_per_step", s.evicted_blocks_per_step},
                           {"faulted_blocks", m.faulted_blocks},
                           {"fault_batches", m.fault_batches},
                           {"mapping_faults", m.mapping_faults},
                           {"evicted_blocks", m.evicted_blocks},
                           {"migrated_to_gpu_bytes", whole_bytes(m.migrated_bytes)},
                           {"written_back_bytes", whole_bytes(m.written_back_bytes)},
                           {"remote_read_bytes", whole_bytes(m.remote_bytes)},
                           {"prefetched_bytes", whole_bytes(m.prefetched_bytes)},
                           {"peak_resident_bytes", whole_bytes(m.peak_resident_bytes)}};
    if (m.gemv_shapes_measured + m.gemv_shapes_from_nearest > 0)
      j["managed_memory"]["host_input_gemv_shapes"] = {{"measured", m.gemv_shapes_measured},
                                                       {"from_nearest_width", m.gemv_shapes_from_nearest}};
    if (m.working_set_bytes > 0) {
      j["managed_memory"]["working_set_bytes"] = whole_bytes(m.working_set_bytes);
      j["managed_memory"]["capacity_edge"] = m.at_capacity_edge();
    }
  }
  ordered_json tiers = ordered_json::object();
  for (const auto& [dev, peak] : c.result->peak_bytes) {
    const placement::DeviceId d = placement::parse_device(dev, true);
    auto u = placement::usage_on(h, *c.placement, d);
    u.activations += placement::workspace_on(h, *c.placement, d);
    if (const auto t = c.result->transient_peak_bytes.find(dev); t != c.result->transient_peak_bytes.end()) u.activations += t->second;
    tiers[dev] = {{"weights_bytes", whole_bytes(u.weights)},
                  {"kv_bytes", whole_bytes(u.kv)},
                  {"activation_bytes", whole_bytes(u.activations)},
                  {"peak_bytes", whole_bytes(peak)}};
  }
  j["memory_per_tier"] = tiers;
  // A trace's components (trace::Tensor::component): each part's weights (its first path segment: dit, vae,
  // text_encoder) by where the placement put them.
  {
    ordered_json parts = ordered_json::object();
    std::map<std::string, std::map<std::string, double>> by;
    for (const auto& t : h.tensors) {
      if (t.component.empty() || t.kind != trace::TensorKind::Weight) continue;
      const std::string part = t.component.substr(0, t.component.find('.'));
      by[part][placement::device_name(c.placement->device[t.id])] += static_cast<double>(t.bytes);
    }
    for (const auto& [part, devices] : by) {
      ordered_json d = ordered_json::object();
      double total = 0;
      for (const auto& [dev, bytes] : devices) {
        d[dev] = whole_bytes(bytes);
        total += bytes;
      }
      parts[part] = {{"weight_bytes", whole_bytes(total)}, {"weights_on", d}};
    }
    if (!by.empty()) j["components"] = parts;
  }
  if (c.allocator) {
    const AllocatorMemory& a = *c.allocator;
    ordered_json m;
    m["framework"] = a.framework;
    if (!a.not_modelled.empty()) {
      m["not_modelled"] = a.not_modelled;
    } else {
      m["capacity_bytes"] = whole_bytes(a.capacity);
      if (a.oom) {
        const AllocationFailure& f = *a.oom;
        m["out_of_memory"] = {{"step", f.step}, {"phase", f.phase}, {"tensor", f.tensor},
                              {"device", "cuda:0"}, {"requested_bytes", whole_bytes(f.requested)},
                              {"reserved_bytes", whole_bytes(f.reserved)}, {"allocated_bytes", whole_bytes(f.allocated)}};
      } else if (a.iterations) {
        m["iteration_peak_allocated_bytes"] = whole_bytes(a.iteration_allocated);
        m["iteration_peak_reserved_bytes"] = whole_bytes(a.iteration_reserved);
      } else {
        m["prefill_peak_allocated_bytes"] = whole_bytes(a.prefill_allocated);
        m["prefill_peak_reserved_bytes"] = whole_bytes(a.prefill_reserved);
        m["decode_peak_allocated_bytes"] = whole_bytes(a.decode_allocated);
        m["decode_peak_reserved_bytes"] = whole_bytes(a.decode_reserved);
      }
    }
    j["pytorch_memory"] = m;
  }
  // A ComfyUI job's node: its model's load and its own work.
  auto stage = [&](const pipeline::StageCost& st) {
    ordered_json moves = ordered_json::array();
    for (const auto& m : st.moves) moves.push_back({{"model", m.model}, {"h2d_bytes", whole_bytes(m.h2d)}, {"d2h_bytes", whole_bytes(m.d2h)}});
    return ordered_json{{"ran", st.ran}, {"compute_seconds", st.compute_seconds}, {"transfer_seconds", st.transfer_seconds},
                        {"h2d_bytes", whole_bytes(st.h2d_bytes)}, {"d2h_bytes", whole_bytes(st.d2h_bytes)}, {"moves", moves}};
  };
  if (c.image_job) {
    const pipeline::ImageJobSpec& sp = *c.image_job_spec;
    auto image = [&](const pipeline::ImageCost& i) {
      ordered_json o{{"seconds", i.seconds()}, {"text_encoders", stage(i.text)}};
      if (sp.reference) o["vae_encode"] = stage(i.encode);  // FLUX.1 Kontext's reference image
      o["sampler"] = stage(i.sampler);
      o["vae_decode"] = stage(i.vae);
      return o;
    };
    ordered_json job = {{"framework", "ComfyUI a125cd84 (model management: experiments/frameworks/comfyui_model_management.md)"},
                        {"free_bytes", whole_bytes(sp.free_bytes)},
                        {"text_encoder_bytes", whole_bytes(sp.text_encoder_bytes)},
                        {"diffusion_model_bytes", whole_bytes(sp.dit_bytes)},
                        {"diffusion_model_loaded_bytes", whole_bytes(c.image_job->dit_loaded)},
                        {"vae_bytes", whole_bytes(sp.vae_bytes)}};
    // Each text encoder's seconds, keyed by its name: t5_seconds, clip_seconds; qwen2_5_vl_seconds.
    for (const auto& [name, seconds] : c.image_job_text) job[text_encoder_key(name)] = seconds;
    job["iteration_seconds"] = sp.iteration_seconds;
    job["steps"] = sp.steps;
    if (sp.reference) job["vae_encode_seconds"] = sp.encode_seconds;
    job["vae_decode_seconds"] = sp.vae_seconds;
    job["first_image"] = image(c.image_job->first);
    job["next_same_prompt"] = image(c.image_job->same_prompt);
    job["next_new_prompt"] = image(c.image_job->new_prompt);
    j["image_job"] = std::move(job);
  }
  if (c.expert_job) {
    const pipeline::ExpertJobSpec& sp = *c.expert_job_spec;
    const bool vae = sp.vae_bytes > 0;  // --video-job
    auto video = [&](const pipeline::VideoCost& v) {
      ordered_json o{{"seconds", v.seconds()}};
      if (sp.text_encoder_bytes > 0) o["text_encode"] = stage(v.text);
      if (sp.two_experts) {
        o["high_noise_sampler"] = stage(v.high);
        o["low_noise_sampler"] = stage(v.low);
      } else {
        o["sampler"] = stage(v.high);
      }
      if (vae) o["vae_decode"] = stage(v.vae);
      return o;
    };
    ordered_json job{{"framework", "ComfyUI a125cd84 (model management: experiments/frameworks/comfyui_model_management.md)"},
                     {"free_bytes", whole_bytes(sp.free_bytes)}};
    if (sp.two_experts) {
      job["expert_bytes"] = whole_bytes(sp.expert_bytes);
      job["high_noise_loaded_bytes"] = whole_bytes(c.expert_job->high_loaded);
      job["low_noise_loaded_bytes"] = whole_bytes(c.expert_job->low_loaded);
      job["high_noise_steps"] = sp.high_steps;
      job["low_noise_steps"] = sp.low_steps;
    } else {
      job["diffusion_model_bytes"] = whole_bytes(sp.expert_bytes);
      job["diffusion_model_loaded_bytes"] = whole_bytes(c.expert_job->high_loaded);
      job["steps"] = sp.high_steps;
    }
    job["sampling_memory_required"] = whole_bytes(sp.sampling_memory);
    job["sampling_minimum_memory_required"] = whole_bytes(sp.sampling_minimum);
    if (sp.text_encoder_bytes > 0) job["text_encoder_bytes"] = whole_bytes(sp.text_encoder_bytes);
    if (vae) {
      job["vae_bytes"] = whole_bytes(sp.vae_bytes);
      job["vae_memory_required"] = whole_bytes(sp.vae_memory);
    }
    job["first_video"] = video(c.expert_job->first);
    job["next_video"] = video(c.expert_job->next);
    j[vae ? "video_job" : "sampler_job"] = job;
  }
  j["events"] = c.result->events;
  if (c.inputs) j["inputs"] = *c.inputs;
  out << dump_json(j, 2) << "\n";
}

}  // namespace tiersim::report
