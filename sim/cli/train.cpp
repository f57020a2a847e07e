#include "cli/train.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

#include "core/error.hpp"
#include "core/units.hpp"
#include "hardware/op_cost.hpp"
#include "cli/allocator_replay.hpp"
#include "model/model_family.hpp"
#include "model/training/training_allocations.hpp"
#include "model/training/training_trace.hpp"
#include "policies/strategy/presets.hpp"
#include "policies/strategy/strategy.hpp"
#include "replay/event_replay.hpp"
#include "report/reporters.hpp"
#include "result/run_result.hpp"

namespace tiersim::app {

namespace {

// The step's time from the event engine (three steps, everything on the GPU; the median) and, with the optimizer
// offloaded, what the offload adds: r's step_seconds, host, host_priced, runtime_name, backward_seconds, offload
// and forward_backward_flops.
void time_step(TrainReport& r, const replay::RunSetup& setup, const model::TrainingOptions& o) {
  const hw::HardwareProfile& hw = setup.hw;
  // Timing only: the memory question is the caching allocator's replay, so the engine's own capacity check (made
  // for inference tensors) is given room.
  const runtime::RuntimeProfile& rt = setup.runtime;
  const runtime::TrainingHostCosts* host = rt.training ? &*rt.training : nullptr;
  const auto inference_host = [&rt](const trace::Op& op) { return hw::host_issue_seconds(rt, op); };
  model::TrainingTraceGenerator steps(r.model, o, 3, host, inference_host);
  r.host = steps.host_model();
  r.host_priced = host != nullptr;
  r.runtime_name = rt.name;
  hw::HardwareProfile timing = hw;
  timing.gpu.memory = std::max(hw.gpu.memory, 1e15);
  const replay::RunSetup timing_setup{timing, setup.runtime, setup.fresh_lengths};
  const placement::Placement placement = strategy::compose(steps.header(), timing, strategy::preset_spec("resident"));
  const result::RunResult run = replay::run_event_engine(timing_setup, placement, steps, nullptr);
  r.step_seconds = result::summarize(run).iteration_median;
  if (o.offload != model::OptimizerOffload::None) {
    // The backward pass's share of the step: each op's longer of its GPU time and its host time.
    const trace::Step& s = steps.step();
    const std::string dtype = steps.header().default_dtype();
    double all = 0, backward = 0;
    for (std::size_t i = 0; i < s.ops.size(); ++i) {
      const trace::Op& op = s.ops[i];
      const double t = std::max(hw::gpu_op_seconds(timing, op, dtype),
                                op.host_seconds >= 0 ? op.host_seconds : hw::host_issue_seconds(rt, op));
      all += t;
      if (i >= steps.backward_begin() && i < steps.optimizer_begin()) backward += t;
    }
    r.backward_seconds = all > 0 ? r.step_seconds * backward / all : 0;
    const runtime::CpuOffloadCosts& c = *rt.cpu_offload;
    model::OffloadCpuCosts cpu;
    cpu.per_tensor = c.per_tensor;
    cpu.per_element_fp32 = c.per_element_fp32;  // the calibration host's (16 threads of a server Xeon)
    cpu.per_element_bf16 = c.per_element_bf16;
    cpu.host_memory_rate = hw.host.memory_bandwidth * hw.host.memory_efficiency;
    if (host) cpu.gpu_step_host = host->optimizer_per_step + host->optimizer_per_call;  // the fused step's one call
    const auto d2h = [&hw](double bytes) { return hw.host_link.d2h_pinned.seconds(bytes); };
    const auto h2d = [&hw](double bytes) { return hw.host_link.h2d_pinned.seconds(bytes); };
    r.offload = model::optimizer_offload_time(model::offload_queue(r.model, o), r.backward_seconds, d2h, h2d, cpu);
    r.step_seconds += r.offload->added();
  }
  model::TrainingTraceGenerator again(r.model, o, 1);
  trace::Step step;
  again.next(step);
  for (const auto& op : step.ops) r.forward_backward_flops += static_cast<double>(op.flops);
}

void clear_step_time(TrainReport& r) {
  r.step_seconds = 0;
  r.forward_backward_flops = 0;
  r.host = {};
  r.host_priced = false;
  r.runtime_name.clear();
  r.offload.reset();
  r.backward_seconds = 0;
}

}  // namespace

TrainReport train_report(const std::string& model_path, const replay::RunSetup& setup, const model::TrainingOptions& o,
                         const std::string& alloc_conf) {
  const hw::HardwareProfile& hw = setup.hw;
  if (model::model_family(model_path) != model::ModelFamily::Decoder)
    throw InputError(model_path, 0, "--model", "training memory is modelled for decoder LLMs (a config.json with model_type)");
  TrainReport r;
  r.model = model::load_model_config(model_path);
  if (r.model.is_moe())
    throw InputError(model_path, 0, "model_type",
                     "training memory is modelled for dense decoders; '" + r.model.model_type + "' is a mixture of experts");
  r.options = o;
  if (o.offload != model::OptimizerOffload::None) {
    if (o.optimizer != model::TrainOptimizer::AdamW)
      throw InputError("", 0, "--optimizer-offload",
                       "is modelled for AdamW (torchao's CPUOffloadOptimizer default: torch.optim.AdamW, fused, on the CPU)");
    if (o.precision == model::TrainPrecision::Fp16)
      throw InputError("", 0, "--optimizer-offload", "the CPU AdamW step is calibrated for fp32 and bf16 parameters, not fp16");
    if (!setup.runtime.cpu_offload)
      throw InputError(setup.runtime.origin, 0, "cpu_offload",
                       "runtime '" + setup.runtime.name + "' has no cpu_offload costs for --optimizer-offload (pytorch-hf-h100 has)");
  }
  r.memory = model::training_memory(r.model, o);
  r.host_memory = hw.host.memory;
  r.hw_name = hw.name;
  r.gpu_count = hw.gpu.count;
  r.gpu_available = hw.gpu.memory - hw.gpu.reserved;
  // With offload_gradients the replay needs when each gradient's copy to the host ends (the caching allocator holds
  // the freed gradient's block until then: training_allocations), which the step's timing gives: timed first.
  const bool copies_timed = o.offload == model::OptimizerOffload::CpuGradients;
  if (copies_timed) time_step(r, setup, o);
  {
    // Three steps (PyTorch's peaks after two warm-up steps, as torch.cuda.max_memory_* after a reset).
    constexpr std::uint32_t kSteps = 3;
    const AllocatorReplay replay = replay_allocations(
        model::training_allocations(r.model, o, kSteps, copies_timed ? r.offload->d2h_end_fraction : std::vector<double>{}),
        std::max(0.0, r.gpu_available), hw.gpu.memory, alloc_conf, "--alloc-conf");
    r.alloc_conf = alloc_conf;
    r.oom = replay.oom;
    if (!r.oom) {
      const PhasePeak p = replay.peak("", kSteps);
      r.allocator_peak_allocated = p.allocated;
      r.allocator_peak_reserved = p.reserved;
    }
  }
  if (r.fits() && !copies_timed) time_step(r, setup, o);
  if (!r.fits()) clear_step_time(r);  // a step that does not fit has no time
  return r;
}

namespace {

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / 1073741824.0);
  return buf;
}

}  // namespace

void write_train_console(std::ostream& out, const TrainReport& r) {
  const auto& m = r.memory;
  const auto& o = r.options;
  char head[512];
  std::snprintf(head, sizeof head, "tiersim train: %s (%.2f B parameters) on %s\n", r.model.name.c_str(),
                static_cast<double>(r.model.total_params()) / 1e9, r.hw_name.c_str());
  out << head;
  const char* precision = o.precision == model::TrainPrecision::Fp32AutocastBf16 ? "fp32 weights under bf16 autocast"
                          : o.precision == model::TrainPrecision::Fp32                ? "fp32 weights"
                          : o.precision == model::TrainPrecision::Fp16                ? "fp16 weights"
                                                                                      : "bf16 weights";
  out << "  set-up                 " << precision << ", " << model::to_string(o.optimizer)
      << ", batch " << o.batch << " x " << o.seq << " tokens, " << (o.checkpointing ? "" : "no ")
      << "gradient checkpointing";
  if (o.lora_enabled()) out << ", LoRA rank " << o.lora.rank << " on " << o.lora.targets.size() << " projection(s) a layer";
  out << "\n\n";
  out << "  memory (what PyTorch allocates)\n";
  auto row = [&](const char* name, double bytes, const char* when) {
    if (bytes <= 0) return;
    char line[256];
    if (*when) std::snprintf(line, sizeof line, "  %-22s %10s  %s\n", name, gib(bytes).c_str(), when);
    else std::snprintf(line, sizeof line, "  %-22s %10s\n", name, gib(bytes).c_str());
    out << line;
  };
  row("weights", m.weights, o.lora_enabled() ? "always (frozen, with the adapters)" : "always");
  row("LoRA adapters (fp32)", m.adapters, "always (trained)");
  row("optimizer state", m.optimizer_state, "always (from the first step)");
  row("autocast weight cache", m.autocast_cache, "forward through backward");
  row("saved activations", m.saved_activations, "end of forward, freed through backward");
  row("recomputed layer", m.recompute, "backward, one layer at a time");
  row("log-softmax (fp32)", m.logits, "end of forward into backward");
  row("logits, fp32 copy", m.loss_transient, "while the loss is computed");
  row("logits' gradients", m.logits_grad, "start of backward");
  row("gradients", m.gradients, "end of backward to zero_grad");
  row("optimizer temporaries", m.optimizer_temporary, "optimizer step");
  if (o.offload != model::OptimizerOffload::None) {
    out << "\n  host memory (optimizer offloaded: torchao CPUOffloadOptimizer"
        << (o.offload == model::OptimizerOffload::CpuGradients ? ", offload_gradients" : "") << ")\n";
    row("pinned copies", m.host_pinned, "parameters and gradients, power-of-two blocks");
    row("optimizer state", m.host_optimizer_state, "from the first step");
  }
  out << "\n  peak allocated by moment\n";
  row("end of forward", m.forward_peak, "");
  row("start of backward", m.backward_start, "");
  row("end of backward", m.backward_end, "");
  row("optimizer step", m.optimizer_peak, "");
  out << "\n";
  char last[768];
  if (!r.oom && !r.host_fits()) {
    std::snprintf(last, sizeof last,
                  "  does not fit the host: the offloaded optimizer needs %s of host memory, the machine has %s (short by %s)\n",
                  gib(m.host_pinned + m.host_optimizer_state).c_str(), gib(r.host_memory).c_str(),
                  gib(m.host_pinned + m.host_optimizer_state - r.host_memory).c_str());
  } else if (r.fits()) {
    std::snprintf(last, sizeof last,
                  "  caching allocator      peak allocated %s, peak reserved %s (the third step, after two warm-up "
                  "steps%s%s)\n  fits: %s of %s on the GPU (its memory less the reserve)\n",
                  gib(r.allocator_peak_allocated).c_str(), gib(r.allocator_peak_reserved).c_str(),
                  r.alloc_conf.empty() ? "" : "; PYTORCH_CUDA_ALLOC_CONF=", r.alloc_conf.c_str(),
                  gib(r.allocator_peak_reserved).c_str(), gib(r.gpu_available).c_str());
  } else {
    const bool fragmented = m.peak() <= r.gpu_available;
    char why[256];
    if (fragmented)
      std::snprintf(why, sizeof why,
                    "the peak above (%s) is below it: the segments the allocator cached cannot hold this request "
                    "(fragmentation)",
                    gib(m.peak()).c_str());
    else
      std::snprintf(why, sizeof why, "the peak above is %s, short by %s", gib(m.peak()).c_str(),
                    gib(m.peak() - r.gpu_available).c_str());
    std::snprintf(last, sizeof last,
                  "  out of memory in step %u's %s, allocating %s (%s) with %s reserved and %s allocated of %s; %s\n",
                  r.oom->step, r.oom->phase.c_str(), r.oom->tensor.c_str(), gib(r.oom->requested).c_str(),
                  gib(r.oom->reserved).c_str(), gib(r.oom->allocated).c_str(), gib(r.gpu_available).c_str(), why);
  }
  out << last;
  if (r.step_seconds > 0) {
    char t[256];
    std::snprintf(t, sizeof t, "  step time              %s (event engine, %s: %.0f tokens/s, %.0f TFLOP/s)\n",
                  units::format_duration(r.step_seconds).c_str(),
                  r.offload ? "with the offloaded optimizer's copies and CPU steps" : "everything on the GPU",
                  static_cast<double>(r.options.batch) * r.options.seq / r.step_seconds,
                  r.forward_backward_flops / r.step_seconds / 1e12);
    out << t;
    if (r.host_priced) {
      std::snprintf(t, sizeof t, "  host time              forward %s, backward %s, optimizer %s (%s's training costs)\n",
                    units::format_duration(r.host.forward_seconds).c_str(), units::format_duration(r.host.backward_seconds).c_str(),
                    units::format_duration(r.host.optimizer_seconds).c_str(), r.runtime_name.c_str());
      out << t;
    } else {
      out << "  host time              runtime " << r.runtime_name << " has no training costs: every op priced as at inference\n";
    }
    if (r.offload) {
      const model::OptimizerOffloadTime& f = *r.offload;
      std::snprintf(t, sizeof t,
                    "  optimizer offload      +%s: %llu tensors; gradients to the host %s (%s beyond backward), "
                    "CPU AdamW %s%s, copies back %s beyond it\n",
                    units::format_duration(f.added()).c_str(), static_cast<unsigned long long>(f.tensors),
                    units::format_duration(f.d2h_seconds).c_str(), units::format_duration(f.d2h_exposed).c_str(),
                    units::format_duration(f.cpu_seconds).c_str(),
                    f.memory_bound ? " (bound by this host's memory rate)" : "",
                    units::format_duration(f.h2d_exposed).c_str());
      out << t;
    }
  }
  if (r.gpu_count > 1)
    out << "  one GPU of the machine's " << r.gpu_count << ": data parallelism (DDP, FSDP) across them is not modelled\n";
  out << "  not modelled yet: CUDA/cuBLAS workspaces and the CUDA context (validation on an H100: results/validation/training)\n";
}

nlohmann::ordered_json train_json(const TrainReport& r) {
  const auto& m = r.memory;
  const auto bytes = report::whole_bytes;  // as every JSON output writes bytes
  nlohmann::ordered_json j;
  j["schema_version"] = report::kJsonSchemaVersion;
  j["model"] = r.model.name;
  j["parameters"] = r.model.total_params();
  j["hw"] = r.hw_name;
  j["precision"] = model::to_string(r.options.precision);
  j["optimizer"] = model::to_string(r.options.optimizer);
  j["checkpointing"] = r.options.checkpointing;
  j["batch"] = r.options.batch;
  j["seq"] = r.options.seq;
  if (r.options.lora_enabled()) j["lora_rank"] = r.options.lora.rank;
  if (!r.alloc_conf.empty()) j["alloc_conf"] = r.alloc_conf;
  if (r.options.offload != model::OptimizerOffload::None) j["optimizer_offload"] = model::to_string(r.options.offload);
  j["memory_bytes"] = {{"weights", bytes(m.weights)},
                       {"lora_adapters", bytes(m.adapters)},
                       {"optimizer_state", bytes(m.optimizer_state)},
                       {"autocast_cache", bytes(m.autocast_cache)},
                       {"saved_activations", bytes(m.saved_activations)},
                       {"recompute", bytes(m.recompute)},
                       {"logits", bytes(m.logits)},
                       {"loss_transient", bytes(m.loss_transient)},
                       {"logits_grad", bytes(m.logits_grad)},
                       {"gradients", bytes(m.gradients)},
                       {"optimizer_temporary", bytes(m.optimizer_temporary)}};
  j["peak_bytes"] = {{"forward", bytes(m.forward_peak)},
                     {"backward_start", bytes(m.backward_start)},
                     {"backward_end", bytes(m.backward_end)},
                     {"optimizer", bytes(m.optimizer_peak)},
                     {"step", bytes(m.peak())}};
  j["peak_phase"] = m.peak_phase();
  if (r.options.offload != model::OptimizerOffload::None)
    j["host_memory_bytes"] = {{"pinned", bytes(m.host_pinned)}, {"optimizer_state", bytes(m.host_optimizer_state)},
                              {"available", bytes(r.host_memory)}, {"fits", r.host_fits()}};
  j["gpu_available_bytes"] = bytes(r.gpu_available);
  j["fits"] = r.fits();
  j["gpus_used"] = 1;  // of gpu_count: data parallelism is not modelled
  j["gpu_count"] = r.gpu_count;
  if (!r.oom) {
    j["allocator_peak_allocated_bytes"] = bytes(r.allocator_peak_allocated);
    j["allocator_peak_reserved_bytes"] = bytes(r.allocator_peak_reserved);
  } else {
    j["out_of_memory"] = {{"step", r.oom->step}, {"phase", r.oom->phase}, {"tensor", r.oom->tensor},
                          {"requested_bytes", bytes(r.oom->requested)}, {"reserved_bytes", bytes(r.oom->reserved)},
                          {"allocated_bytes", bytes(r.oom->allocated)}, {"short_by_bytes", bytes(std::max(0.0, m.peak() - r.gpu_available))}};
  }
  if (r.step_seconds > 0) {
    j["step_seconds"] = r.step_seconds;
    j["tokens_per_s"] = static_cast<double>(r.options.batch) * r.options.seq / r.step_seconds;
    const model::TrainingHostModel& h = r.host;
    j["host"] = {{"runtime", r.runtime_name},
                 {"training_costs", r.host_priced},
                 {"forward_seconds", h.forward_seconds},
                 {"backward_seconds", h.backward_seconds},
                 {"optimizer_seconds", h.optimizer_seconds},
                 {"forward_inference_seconds", h.forward_inference_seconds},
                 {"recompute_inference_seconds", h.recompute_inference_seconds},
                 {"forward_ops", h.forward_ops},
                 {"backward_ops", h.backward_ops},
                 {"recompute_ops", h.recompute_ops},
                 {"checkpointed_layers", h.checkpointed_layers},
                 {"parameter_tensors", h.parameter_tensors},
                 {"optimizer_calls", h.optimizer_calls},
                 {"lora_modules", h.lora_modules},
                 {"lora_ops", h.lora_ops}};
    if (r.offload) {
      const model::OptimizerOffloadTime& f = *r.offload;
      j["optimizer_offload_time"] = {{"added_seconds", f.added()},       {"tensors", f.tensors},
                                     {"elements", f.elements},           {"backward_seconds", r.backward_seconds},
                                     {"d2h_bytes", bytes(f.d2h_bytes)},         {"d2h_seconds", f.d2h_seconds},
                                     {"d2h_exposed_seconds", f.d2h_exposed}, {"cpu_seconds", f.cpu_seconds},
                                     {"h2d_bytes", bytes(f.h2d_bytes)},         {"h2d_exposed_seconds", f.h2d_exposed},
                                     {"cpu_bound", f.memory_bound ? "host memory" : "calibrated"}};
    }
  }
  return j;
}

}  // namespace tiersim::app
