#include <algorithm>
#include <cstdio>

#include "accuracy/error_band.hpp"
#include "core/units.hpp"
#include "report/reporters.hpp"

namespace tiersim::report {

using namespace std::string_literals;

namespace {

// A labelled line of the summary.
void line(std::ostream& out, const char* label, const std::string& value) {
  char b[64];
  std::snprintf(b, sizeof b, "  %-22s ", label);
  out << b << value << "\n";
}

// Why ComfyUI's sampler ran the two prompts apart (cli/simulation.cpp): its estimate for both x 1.5 against the free memory.
std::string cond_batch_reason(const trace::Header& h) {
  if (!h.meta.count("cfg_batch_estimate") || !h.meta.count("cfg_batch_free")) return "";
  return ": ComfyUI batches the two only when 1.5 x its estimate for them (" +
         units::format_bytes(std::stod(h.meta.at("cfg_batch_estimate"))) + ") is below the free memory, " +
         units::format_bytes(std::stod(h.meta.at("cfg_batch_free")));
}

// sim run --image-job: the ComfyUI job's stages for the first image and the next one, same prompt or new.
void write_image_job(std::ostream& out, const Context& c) {
  auto line = [&](const char* label, const std::string& value) { report::line(out, label, value); };
  const pipeline::ImageJob& j = *c.image_job;
  const pipeline::ImageJobSpec& s = *c.image_job_spec;
  const pipeline::ImageCost* images[] = {&j.first, &j.same_prompt, &j.new_prompt};
  char buf[256];
  auto emit = [&](std::string text) {  // without the last column's padding
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out << text << "\n";
  };
  auto row = [&](const char* name, auto cell) {
    std::snprintf(buf, sizeof buf, "  %-22s", name);
    std::string text = buf;
    for (const pipeline::ImageCost* i : images) {
      std::snprintf(buf, sizeof buf, " %-23s", cell(*i).c_str());
      text += buf;
    }
    emit(text);
  };
  auto secs = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3f s", v);
    return std::string(b);
  };
  out << "\n";
  std::snprintf(buf, sizeof buf, "  %-22s %-23s %-23s %-23s", "ComfyUI image job", "first image", "next, same prompt",
                "next, new prompt");
  emit(buf);
  row("text encoders", [&](const pipeline::ImageCost& i) { return i.text.ran ? secs(i.text.compute_seconds) : std::string("cached"); });
  if (s.reference)
    row("VAE encode (reference)", [&](const pipeline::ImageCost& i) {
      return i.encode.ran ? secs(i.encode.compute_seconds) : std::string("cached");
    });
  row("loads and unloads", [&](const pipeline::ImageCost& i) {
    return secs(i.text.transfer_seconds + i.encode.transfer_seconds + i.sampler.transfer_seconds + i.vae.transfer_seconds);
  });
  const std::string iterations = std::to_string(s.steps) + " iterations";
  row(iterations.c_str(), [&](const pipeline::ImageCost& i) { return secs(i.sampler.compute_seconds); });
  row("VAE decode", [&](const pipeline::ImageCost& i) { return secs(i.vae.compute_seconds); });
  row("s/image", [&](const pipeline::ImageCost& i) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3f", i.seconds());
    return std::string(b);
  });
  row("H2D / D2H", [&](const pipeline::ImageCost& i) {
    return units::format_bytes(i.h2d_bytes()) + " / " + units::format_bytes(i.d2h_bytes());
  });
  line("job's models", s.text_encoder_name + " " + units::format_bytes(s.text_encoder_bytes) + ", " + s.dit_name + " " +
                           units::format_bytes(s.dit_bytes) + " (" + units::format_bytes(j.dit_loaded) +
                           " on the GPU at its iterations, the rest cast per forward), " + s.vae_name + " " +
                           units::format_bytes(s.vae_bytes));
  std::string stages;
  for (const auto& [name, seconds] : c.image_job_text) {
    std::snprintf(buf, sizeof buf, "%s%s %.3f s", stages.empty() ? "" : " + ", name.c_str(), seconds);
    stages += buf;
  }
  std::snprintf(buf, sizeof buf, ", %.3f s/iteration as ComfyUI loads it; ComfyUI a125cd84's model management, "
                "pageable copies", s.iteration_seconds);
  line("job's stages", stages + buf);
}

// sim run --sampler-job: a two-expert model's two sampler nodes for the first video and the next one.
void write_expert_job(std::ostream& out, const Context& c) {
  const pipeline::ExpertJob& j = *c.expert_job;
  const pipeline::ExpertJobSpec& s = *c.expert_job_spec;
  const bool vae = s.vae_bytes > 0;  // --video-job
  char buf[256];
  auto row = [&](const char* name, const std::string& first, const std::string& next) {
    std::snprintf(buf, sizeof buf, "  %-22s %-23s %s", name, first.c_str(), next.c_str());
    out << buf << "\n";
  };
  auto secs = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3f s", v);
    return std::string(b);
  };
  out << "\n";
  row(vae ? "ComfyUI nodes" : "ComfyUI sampler nodes", "first video", "next video");
  row("loads and unloads", secs(j.first.transfer_seconds()), secs(j.next.transfer_seconds()));
  if (s.text_encoder_bytes > 0)
    row("text encoder", secs(j.first.text.compute_seconds), "- (the same prompt: cached)");
  if (s.two_experts) {
    const std::string high = std::to_string(s.high_steps) + " steps, high noise";
    const std::string low = std::to_string(s.low_steps) + " steps, low noise";
    row(high.c_str(), secs(j.first.high.compute_seconds), secs(j.next.high.compute_seconds));
    row(low.c_str(), secs(j.first.low.compute_seconds), secs(j.next.low.compute_seconds));
  } else {
    const std::string steps = std::to_string(s.high_steps) + " steps";
    row(steps.c_str(), secs(j.first.high.compute_seconds), secs(j.next.high.compute_seconds));
  }
  if (vae) row("VAE decode", secs(j.first.vae.compute_seconds), secs(j.next.vae.compute_seconds));
  std::snprintf(buf, sizeof buf, "%.3f", j.first.seconds());
  const std::string first = buf;
  std::snprintf(buf, sizeof buf, "%.3f", j.next.seconds());
  row(vae ? "s/video" : "s/video (sampling)", first, buf);
  row("H2D / D2H", units::format_bytes(j.first.h2d_bytes()) + " / " + units::format_bytes(j.first.d2h_bytes()),
      units::format_bytes(j.next.h2d_bytes()) + " / " + units::format_bytes(j.next.d2h_bytes()));
  if (s.two_experts)
    report::line(out, "experts", "2 x " + units::format_bytes(s.expert_bytes) + ", on the GPU at their iterations: high noise " +
                                     units::format_bytes(j.high_loaded) + ", low noise " + units::format_bytes(j.low_loaded) +
                                     " (the rest cast per forward from pageable memory)");
  else
    report::line(out, "diffusion model", units::format_bytes(s.expert_bytes) + ", on the GPU at its iterations " +
                                             units::format_bytes(j.high_loaded) +
                                             " (the rest cast per forward from pageable memory)");
  if (s.text_encoder_bytes > 0)
    report::line(out, "text encoder", s.text_encoder_name + " " + units::format_bytes(s.text_encoder_bytes) +
                                          ", loaded whole where it fits (CLIPTextEncode's memory_required 0)");
  if (vae)
    report::line(out, "VAE", s.vae_name + " " + units::format_bytes(s.vae_bytes) + " (bf16), loaded for VAE.decode's " +
                                 "memory_used_decode of " + units::format_bytes(s.vae_memory));
  report::line(out, "job's scope", vae ? "ComfyUI a125cd84's model management, pageable copies; the video's copy to the "
                                         "CPU after the decode is not in it"
                                       : "ComfyUI a125cd84's model management, pageable copies; the text encoder (umT5) and "
                                         "the VAE decode are not in it");
}

}  // namespace

void write_console(std::ostream& out, const Context& c) {
  const result::Summary s = result::summarize(*c.result);
  const auto& hw = *c.hw;
  const auto& h = *c.header;
  auto line = [&](const char* label, const std::string& value) { report::line(out, label, value); };
  auto num = [](const char* fmt, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, fmt, v);
    return std::string(buf);
  };
  const std::string model = h.meta.count("model") ? h.meta.at("model") : c.trace_name;
  out << "tiersim: " << model << " on " << hw.name << " under '" << c.policy << "' (" << c.result->engine
      << " engine)\n";
  line("hardware", hw.gpu.name + " x" + std::to_string(hw.gpu.count) + ", " + hw.host.name + " [" + hw.origin + "]");
  line("trace", c.trace_name + " (batch " + std::to_string(h.batch()) + ", " + std::to_string(c.result->steps.size()) +
                    " steps)");
  if (h.meta.count("resolution") && h.meta.count("image_tokens") && h.meta.count("text_tokens"))
    line(h.meta.count("frames") ? "video" : "image",
         h.meta.at("resolution") + (h.meta.count("frames") ? ", " + h.meta.at("frames") + " frames" : std::string()) +
             (h.meta.count("start_image") ? " from a start image (a timestep per latent frame)" : std::string()) +
             " (" + h.meta.at("image_tokens") + " latent + " +
             (h.meta.count("reference_tokens")
                  ? h.meta.at("reference_tokens") + " reference (" + h.meta.at("reference") + ") + "
                  : std::string()) +
             h.meta.at("text_tokens") + " text tokens), weights " +
             (h.meta.count("weight_dtype") ? h.meta.at("weight_dtype") : "?") +
             (!h.meta.count("cfg")                ? std::string()
              : h.meta.count("negative_tokens") ? ", cfg " + h.meta.at("cfg") + " (negative prompt, " +
                                                      h.meta.at("negative_tokens") + " tokens, as a second forward)"
              : h.meta.count("cfg_separate")    ? ", cfg " + h.meta.at("cfg") + " (negative prompt as a second forward" +
                                                   cond_batch_reason(h) + ")"
                                                : ", cfg " + h.meta.at("cfg") + " (negative prompt in the batch)"));
  for (const auto& [k, v] : c.placement->resolved) line(k.c_str(), v);
  if (!c.strategy.empty()) line("strategy", c.strategy);
  line("runtime", c.runtime->name + " [" + c.runtime->origin + "]" +
                     (c.runtime->name == "pytorch-eager" ? " (the default when none is given: assumed host costs, not measured)" : ""));
  bool cpu_executes = false;
  for (std::size_t t = 0; t < c.placement->path.size(); ++t)
    cpu_executes |= c.placement->path[t] == placement::Path::Execute && c.placement->device[t] == placement::kCpu;
  if (cpu_executes) {
    const auto& x = c.placement->execute;
    std::string how = !hw.host.kernels ? "the whole CPU (no measured CPU kernels in the profile"s +
                                             (x.threads > 0 ? ": --threads is ignored)" : ")")
                                       : std::to_string(placement::cpu_threads(x, hw)) + " threads" +
                                             (x.threads > 0 ? "" : " (the host's cores)");
    if (x.op_offload_batch > 0)
      how += "; steps of " + std::to_string(x.op_offload_batch) + "+ tokens run them on cuda:0 (op offload)";
    line("cpu layers", how);
  }
  if (c.fresh_lengths)
    line("sequence lengths", "fresh: " + units::format_duration(c.runtime->new_length_attention) +
                                 " of attention plan build per step (runtime's new_length_attention)");
  out << "\n";
  // Only the step kinds the trace has: tokens/s for decode, time per iteration for diffusion, prefill.
  const bool decode = s.decode_steps > 0;
  // A VAE's decode (model/vae/wan_vae_decoder_trace_generator.hpp) is prefill steps, one per decoder call.
  const bool vae = h.meta.count("family") && h.meta.at("family") == "wan-vae";
  const std::string step = decode ? "decode step" : vae ? "decoder call" : "iteration";
  if (decode) {
    line("decode tokens/s", num("%.2f", s.tps));
    line("decode step (median)", units::format_duration(s.decode_step_median));
  }
  if (s.iteration_steps > 0) {
    line("s/iteration (median)", num("%.3f", s.iteration_median));
    line("iterations", std::to_string(s.iteration_steps));
  }
  if (s.prefill_steps > 0 && vae)
    line("VAE decode", units::format_duration(s.prefill_seconds) + " (" + std::to_string(s.prefill_steps) +
                           (s.prefill_steps == 1 ? " decoder call" : " decoder calls, one per latent frame") + ")");
  else if (s.prefill_steps > 0 && s.prefill_tokens > 0 && s.prefill_seconds > 0) {
    char pp[64];
    std::snprintf(pp, sizeof pp, "%.0f", s.prefill_tps());
    line("prefill", units::format_duration(s.prefill_seconds) + " (" + std::to_string(s.prefill_tokens) + " tokens, " + pp +
                        " tokens/s: llama-bench's pp)");
  } else if (s.prefill_steps > 0)
    line("prefill", units::format_duration(s.prefill_seconds));
  // How sure the figures above are: the validation rows of the run's class (sim/accuracy/error_band.hpp).
  line("accuracy", accuracy::band_for(accuracy::classify(h, hw, *c.placement, s)).text());
  // The GPU's busy share is of the median decode step or iteration; a trace of prefill steps alone has neither.
  if (s.decode_steps > 0 || s.iteration_steps > 0)
    line("cuda:0 busy", num("%.0f%% of the ", 100.0 * s.gpu_busy_share) + step + " (its kernels and on-demand copies)");
  line(("H2D per " + step).c_str(), units::format_bytes(s.h2d_bytes_per_step));
  if (s.peer_bytes_per_step > 0) line(("peer per " + step).c_str(), units::format_bytes(s.peer_bytes_per_step));
  if (s.d2h_bytes_per_step > 0) line(("D2H per " + step).c_str(), units::format_bytes(s.d2h_bytes_per_step));
  if (s.remote_read_bytes_per_step > 0) line("remote reads per step", units::format_bytes(s.remote_read_bytes_per_step));
  const auto sysmem = placement::sysmem_usage(h, *c.placement);
  const auto managed = placement::paged_managed_usage(h, *c.placement);
  if (c.result->managed.enabled && managed.total() > 0) {
    const auto& m = c.result->managed;
    line("managed: per step", std::to_string(s.faulted_blocks_per_step) + " blocks faulted, " +
                                  std::to_string(s.evicted_blocks_per_step) + " evicted (2 MiB blocks)");
    line("managed: whole run", std::to_string(m.faulted_blocks) + " faulted in " + std::to_string(m.fault_batches) +
                                   " batches, " + std::to_string(m.evicted_blocks) + " evicted, " +
                                   units::format_bytes(m.migrated_bytes) + " migrated in, " +
                                   units::format_bytes(m.written_back_bytes) + " written back, peak resident " +
                                   units::format_bytes(m.peak_resident_bytes));
    if (m.working_set_bytes > 0)
      line("managed: working set", units::format_bytes(m.working_set_bytes) + " touched on the GPU in the last step, " +
                                       units::format_bytes(m.capacity_bytes) + " of GPU memory for it");
    if (m.gemv_shapes_measured + m.gemv_shapes_from_nearest > 0)
      line("managed: GEMV shapes",
           m.gemv_shapes_from_nearest == 0
               ? std::to_string(m.gemv_shapes_measured) + " host-input GEMV shapes, each as measured"
               : std::to_string(m.gemv_shapes_measured) + " host-input GEMV shapes as measured, " +
                     std::to_string(m.gemv_shapes_from_nearest) +
                     " from the nearest measured width (a neighbour's time can be 10x off)");
    if (m.at_capacity_edge())
      line("capacity edge", "GPU memory within 1% of the working set: measured runs there alternate fast and "
                            "thrashing tokens, or thrash now and then; expect anything from the fit to the thrash");
  }
  out << "\n  memory per tier         weights      KV cache   activations   peak\n";
  if (c.placement->managed.enabled && managed.total() > 0) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "  %-22s %-12s %-10s %-13s %s\n", "managed (host home)",
                  units::format_bytes(managed.weights).c_str(), units::format_bytes(managed.kv).c_str(),
                  units::format_bytes(managed.activations).c_str(),
                  ("GPU-resident peak " + units::format_bytes(c.result->managed.peak_resident_bytes)).c_str());
    out << buf;
  }
  if (sysmem.total() > 0) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "  %-22s %-12s %-10s %-13s %s\n", "sysmem fallback (host)",
                  units::format_bytes(sysmem.weights).c_str(), units::format_bytes(sysmem.kv).c_str(),
                  units::format_bytes(sysmem.activations).c_str(), units::format_bytes(sysmem.total()).c_str());
    out << buf;
  }
  std::vector<placement::DeviceId> idle;  // GPUs past the compute GPU that hold nothing: one line for them all
  for (const auto& [dev, peak] : c.result->peak_bytes) {
    const placement::DeviceId d = placement::parse_device(dev, true);
    auto u = placement::usage_on(h, *c.placement, d);
    u.activations += placement::workspace_on(h, *c.placement, d);
    if (const auto t = c.result->transient_peak_bytes.find(dev); t != c.result->transient_peak_bytes.end()) u.activations += t->second;
    if (d > placement::kComputeGpu && u.total() == 0 && peak == 0) {
      idle.push_back(d);
      continue;
    }
    char buf[256];
    std::snprintf(buf, sizeof buf, "  %-22s %-12s %-10s %-13s %s\n", dev.c_str(), units::format_bytes(u.weights).c_str(),
                  units::format_bytes(u.kv).c_str(), units::format_bytes(u.activations).c_str(),
                  units::format_bytes(peak).c_str());
    out << buf;
  }
  if (!idle.empty()) {
    std::sort(idle.begin(), idle.end());
    const bool run = idle.back() - idle.front() + 1 == static_cast<placement::DeviceId>(idle.size());
    std::string names;
    if (run && idle.size() > 2) {
      names = placement::device_name(idle.front()) + " to " + placement::device_name(idle.back());
    } else {
      for (const placement::DeviceId d : idle) names += (names.empty() ? "" : ", ") + placement::device_name(d);
    }
    out << "  " << names << ": nothing placed (0 B)\n";
  }
  if (c.allocator && c.allocator->not_modelled.empty()) {  // why not is said in the JSON only
    const AllocatorMemory& a = *c.allocator;
    out << "\n";
    if (a.oom) {
      const AllocationFailure& f = *a.oom;
      line("PyTorch allocator", "OUT OF MEMORY in step " + std::to_string(f.step) + " (" + f.phase + "): " +
                                    f.tensor + " asks " + units::format_bytes(f.requested) + " with " +
                                    units::format_bytes(f.reserved) + " reserved, " +
                                    units::format_bytes(f.allocated) + " allocated, of " +
                                    units::format_bytes(a.capacity));
    } else if (a.iterations) {
      line("PyTorch allocator", a.iteration_label + " peak " + units::format_bytes(a.iteration_allocated) + " allocated, " +
                                    units::format_bytes(a.iteration_reserved) + " reserved (" + a.framework + ")");
    } else {
      line("PyTorch allocator", "prefill peak " + units::format_bytes(a.prefill_allocated) + " allocated, " +
                                    units::format_bytes(a.prefill_reserved) + " reserved; decode peak " +
                                    units::format_bytes(a.decode_allocated) + " allocated, " +
                                    units::format_bytes(a.decode_reserved) + " reserved (" + a.framework + ")");
    }
  }
  if (c.image_job) write_image_job(out, c);
  if (c.expert_job) write_expert_job(out, c);
  out << "\n";
  line("offloaded weights", units::format_bytes(placement::offloaded_weight_bytes(h, *c.placement)) + " of " +
                                units::format_bytes(placement::weight_bytes(h)));
  if (c.result->events > 0) line("simulated", std::to_string(c.result->events) + " events");
}

}  // namespace tiersim::report
