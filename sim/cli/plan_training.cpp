#include "cli/plan_training.hpp"

#include <algorithm>
#include <optional>

#include "accuracy/error_band.hpp"
#include "cli/train.hpp"
#include "core/error.hpp"

namespace tiersim::app {

const std::vector<TrainSetup>& train_setups() {
  using model::OptimizerOffload;
  using model::TrainOptimizer;
  using model::TrainPrecision;
  auto make = [](std::string name, std::string description, TrainPrecision precision, TrainOptimizer optimizer,
                 OptimizerOffload offload, std::uint32_t lora, const std::string& targets) {
    TrainSetup s{std::move(name), std::move(description), {}, {}};
    s.options.precision = precision;
    s.options.optimizer = optimizer;
    s.options.checkpointing = true;
    s.options.offload = offload;
    s.args = {"--precision", model::to_string(precision), "--optimizer", model::to_string(optimizer), "--checkpointing"};
    if (offload != OptimizerOffload::None) s.args.insert(s.args.end(), {"--optimizer-offload", model::to_string(offload)});
    if (lora > 0) {
      s.options.lora.rank = lora;
      s.options.lora.targets = model::parse_lora_targets(targets);
      s.args.insert(s.args.end(), {"--lora", std::to_string(lora), "--lora-targets", targets});
    }
    return s;
  };
  static const std::vector<TrainSetup> s{
      make("bf16-adamw", "full fine-tuning, bf16 weights and AdamW states", TrainPrecision::Bf16, TrainOptimizer::AdamW,
           OptimizerOffload::None, 0, ""),
      make("mixed-adamw", "full fine-tuning, fp32 weights under bf16 autocast, fp32 AdamW", TrainPrecision::Fp32AutocastBf16,
           TrainOptimizer::AdamW, OptimizerOffload::None, 0, ""),
      make("bf16-adamw8bit", "full fine-tuning, bf16 weights, bitsandbytes' 8-bit AdamW (not validated)", TrainPrecision::Bf16,
           TrainOptimizer::AdamW8bit, OptimizerOffload::None, 0, ""),
      make("bf16-adamw-cpu", "full fine-tuning, bf16 weights, AdamW on the CPU with its gradients (torchao)",
           TrainPrecision::Bf16, TrainOptimizer::AdamW, OptimizerOffload::CpuGradients, 0, ""),
      make("lora-qv", "LoRA rank 16 on q_proj and v_proj (peft), bf16 base", TrainPrecision::Bf16, TrainOptimizer::AdamW,
           OptimizerOffload::None, 16, "q_proj,v_proj"),
      make("lora-all", "LoRA rank 16 on every projection (peft all-linear), bf16 base", TrainPrecision::Bf16,
           TrainOptimizer::AdamW, OptimizerOffload::None, 16, "all-linear"),
  };
  return s;
}

namespace {

// What limits a step that fits: the offloaded optimizer's CPU work, the host's issue (Python, autograd), or the GPU.
std::string train_bottleneck(const TrainReport& r) {
  if (r.offload && r.offload->added() > 0.5 * r.step_seconds) return "CPU optimizer";
  const double host = r.host.forward_seconds + r.host.backward_seconds + r.host.optimizer_seconds;
  if (r.host_priced && host > 0.8 * (r.step_seconds - (r.offload ? r.offload->added() : 0.0))) return "host";
  return "GPU";
}

PlanPoint point_of(const TrainReport& r) {
  PlanPoint p;
  p.ok = r.fits();
  if (!p.ok) {
    p.error = r.oom ? "out of memory in " + r.oom->phase + " (step " + std::to_string(r.oom->step) + "): " + r.oom->tensor
                    : "host memory short for the offloaded optimizer";
    return p;
  }
  p.summary.tps = static_cast<double>(r.options.batch) * r.options.seq / r.step_seconds;
  p.summary.iteration_median = r.step_seconds;
  p.vram_peak = r.allocator_peak_reserved;
  p.host_peak = r.memory.host_pinned + r.memory.host_optimizer_state;
  p.offloaded = r.memory.host_optimizer_state;
  p.bottleneck = train_bottleneck(r);
  return p;
}

}  // namespace

std::vector<PlanRow> plan_training(const TrainPlanWorkload& workload, const std::vector<std::string>& hardware,
                                   const std::vector<std::string>& setups, const PlanGoal& goal, const PlanPricer& price,
                                   int jobs, const TrainMachineResolver& resolve,
                                   const std::map<std::string, std::vector<std::string>>& hw_args,
                                   std::vector<std::string>* dropped) {
  std::vector<const TrainSetup*> chosen;
  for (const auto& name : setups) chosen.push_back(&named_strategy(train_setups(), name, "training set-up"));
  struct Candidate {
    std::string hw;
    std::vector<std::string> hw_args;
    std::shared_ptr<const RunInputs> machine;
    const TrainSetup* setup;
  };
  std::vector<Candidate> candidates;
  for (const auto& hw : hardware) {
    const auto extra = hw_args.find(hw);
    const std::vector<std::string> own = extra == hw_args.end() ? std::vector<std::string>{} : extra->second;
    const std::shared_ptr<const RunInputs> machine = resolve(hw, own);
    for (const TrainSetup* s : chosen) candidates.push_back({hw, own, machine, s});
  }
  std::vector<PlanRow> rows(candidates.size());
  std::vector<std::optional<InputError>> refused(candidates.size());  // a set-up that does not apply (its reason)
  for_each_in_parallel(candidates.size(), jobs, [&](std::size_t i) {
    const Candidate& c = candidates[i];
    model::TrainingOptions o = c.setup->options;
    o.batch = workload.batch;
    o.seq = workload.seq;
    try {
      TrainReport r = train_report(workload.model, c.machine->setup(), o);
      PlanRow& row = rows[i];
      row.hw = c.hw;
      row.strategy = c.setup->name;
      row.subcommand = "train";
      row.args = {"--model", workload.model, "--hw", c.hw};
      row.args.insert(row.args.end(), c.hw_args.begin(), c.hw_args.end());
      row.args.insert(row.args.end(), c.setup->args.begin(), c.setup->args.end());
      row.args.insert(row.args.end(), {"--batch", std::to_string(workload.batch), "--seq", std::to_string(workload.seq)});
      if (c.machine->runtime.name != kDefaultTrainingRuntime) {
        const std::string& origin = c.machine->runtime.origin;
        row.args.insert(row.args.end(), {"--runtime", origin.rfind("preset:", 0) == 0 ? origin.substr(7) : origin});
      }
      row.point = point_of(r);
      // A training step's band: every training row of the GPU's class (sim/accuracy; no per-strategy split).
      const accuracy::Band band = accuracy::band_for({c.machine->hw.gpu.provenance, "training", "*"});
      row.point.accuracy_class = c.machine->hw.gpu.provenance + "/training/*";
      if (band.in_sample) row.point.error_in = band.in_sample->mean_abs;
      if (band.out_of_sample) row.point.error_out = band.out_of_sample->mean_abs;
      row.point.validated = band.basis == accuracy::Band::Basis::Exact || band.basis == accuracy::Band::Basis::AnyStrategy;
      row.point.error_band = band.short_text();
      row.point.accuracy_basis = accuracy::basis_name(band.basis);
    } catch (const InputError& e) {
      refused[i] = e;
    }
  });
  // A set-up the model or machine cannot take (a runtime without CPU-optimizer costs, a mixture of experts) is
  // dropped; when none applies, the first reason is the error.
  std::vector<PlanRow> kept;
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (!refused[i]) kept.push_back(std::move(rows[i]));
    else if (dropped) dropped->push_back(candidates[i].setup->name + " on " + candidates[i].hw + ": " + refused[i]->message());
  if (kept.empty() && !refused.empty() && refused.front()) throw *refused.front();
  return rank_plan(std::move(kept), hardware, goal, price);
}

}  // namespace tiersim::app
