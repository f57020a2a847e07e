#pragma once
// `sim plan --train`: which machine and fine-tuning set-up train a model fastest, or cheapest at a speed goal. Each
// candidate is a machine x a set-up (full fine-tuning in bf16 or mixed precision, 8-bit AdamW, the optimizer
// offloaded to the CPU, LoRA), predicted by `sim train` (train.hpp: the caching allocator's replay decides whether
// it fits, the event engine its step time); the rows are ranked, marked against the goal and on the Pareto front as
// the inference plan's are (plan.hpp), each with its `sim train` command.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/plan.hpp"
#include "cli/run_inputs.hpp"
#include "model/training/training_memory.hpp"

namespace tiersim::app {

// A fine-tuning set-up the planner tries.
struct TrainSetup {
  std::string name;
  std::string description;
  model::TrainingOptions options;  // batch and seq are the workload's
  std::vector<std::string> args;   // its sim train options
};
const std::vector<TrainSetup>& train_setups();

struct TrainPlanWorkload {
  std::string model;  // a dense decoder's config.json
  std::uint32_t batch = 1, seq = 1024;
};

// Resolves a machine: --hw, its own constraint arguments (--set ...), as `sim train` would (thread-safe not needed:
// called before the threads start).
using TrainMachineResolver =
    std::function<std::shared_ptr<const RunInputs>(const std::string& hw, const std::vector<std::string>& hw_args)>;

// Every machine x set-up, `jobs` at once; throws InputError naming --strategies for an unknown set-up. A set-up that
// does not apply (sim train refuses it) is left out and said in `dropped`; when none applies, the first reason is thrown.
std::vector<PlanRow> plan_training(const TrainPlanWorkload& workload, const std::vector<std::string>& hardware,
                                   const std::vector<std::string>& setups, const PlanGoal& goal, const PlanPricer& price,
                                   int jobs, const TrainMachineResolver& resolve,
                                   const std::map<std::string, std::vector<std::string>>& hw_args = {},
                                   std::vector<std::string>* dropped = nullptr);

}  // namespace tiersim::app
