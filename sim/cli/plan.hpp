#pragma once
// `sim plan`: which hardware and strategy meet a speed goal for one model and workload. For every
// candidate (a hardware preset x a strategy), the strategy's knob is searched (every number of layers on the
// GPU or GB of DisTorch offload that fits, the fastest kept; llama.cpp's own --fit), each point predicted by the event
// engine; the best point of each candidate is ranked by speed, marked where it meets the goal and where it
// is on the Pareto front of speed against GPU memory and price, with what limits it, what the machine costs (its
// GPUs' launch prices, from the catalogue) and the `sim run` command that reproduces it. Candidates run in parallel threads (simulate() is reentrant; the trace is loaded once).
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "hardware/catalogue.hpp"
#include "result/run_result.hpp"

namespace tiersim::app {

// One prediction of a point: its summary, or why it does not fit.
struct PlanPoint {
  bool ok = false;
  bool applies = true;      // false: the strategy does not apply to this machine or model (dropped)
  std::string error;
  result::Summary summary;
  double vram_peak = 0;     // bytes on cuda:0 (the highest of the GPUs for pipelines is not separated)
  double host_peak = 0;     // bytes in host memory (weights kept there, pinned staging)
  double offloaded = 0;     // weight bytes off the compute GPU
  std::string bottleneck;   // what limits the step (plan.cpp bottleneck())
  // How sure the speed is: the mean abs error of the validation rows of the point's class (sim/accuracy), in-sample
  // and out-of-sample where there are rows. `validated` false: the GPU's class has no row of the strategy; the errors
  // are then the measured GPU kinds' (empty where those have none either).
  std::optional<double> error_in, error_out;
  bool validated = false;
  std::string accuracy_class;  // machine class / workload / strategy, e.g. measured/decode/host-copy
  std::string error_band;      // accuracy::Band::short_text()
  std::string accuracy_basis;  // exact | measured-kinds | any-strategy | none (accuracy::basis_name)
  bool diffusion = false;   // speed in s/iteration, not tokens/s
  double speed() const;     // higher is better: tokens/s, or iterations/s
};

// A strategy the planner knows, with the knob it searches.
struct PlanStrategy {
  std::string name;         // as --strategies names it
  std::string description;
  std::vector<std::string> args;  // the sim run options that select it
  // LayersOnGpu: --layers N; OffloadGb: --offload-gb X; CpuMoeLayers: --n-cpu-moe N (llama.cpp: the experts of
  // the first N layers in host memory; a mixture of experts only).
  enum class Knob { None, LayersOnGpu, OffloadGb, CpuMoeLayers } knob = Knob::None;
  bool needs_two_gpus = false;
};
const std::vector<PlanStrategy>& plan_strategies();

struct PlanRow {
  std::string workload;               // the workload's label (a --dtype choice) when several are planned, else ""
  std::string hw, strategy, setting;  // setting: the knob's value ("--layers 37", "--offload-gb 6.5")
  std::vector<std::string> args;      // the point's sim run arguments
  PlanPoint point;
  std::optional<hw::Price> price;     // what the machine costs (its GPUs), where the catalogue prices it
  std::optional<double> bound;        // the screen's speed bound for the point (where it was screened)
  bool meets = false, pareto = false;
  std::string subcommand = "run";     // the sim command `args` are for (sim plan --train: train)
};

struct PlanGoal {
  std::optional<double> min_tps, max_seconds_per_iteration;
  std::optional<double> max_price;  // US dollars: a machine above it, or unpriced, does not meet the goal
  bool cheapest = false;  // rank the points that meet the goal by price, cheapest first (else by speed)
};

// What a --hw value costs (hw::price_of with the user's --price overrides); absent when unpriced.
using PlanPricer = std::function<std::optional<hw::Price>(const std::string& hw)>;

// Evaluates a point from its `sim run` arguments (thread-safe).
using PlanEvaluate = std::function<PlanPoint(const std::vector<std::string>& args)>;

// A point screened without running it: whether its placement fits (and the strategy applies), and the most
// speed it could have (analytic/step_bound.hpp: a bound the event engine never beats). Thread-safe.
struct PlanScreen {
  bool applies = true;
  bool fits = false;
  double speed_at_most = 0;  // tokens/s, or iterations/s
};
using PlanScreener = std::function<PlanScreen(const std::vector<std::string>& args)>;

// How much work the search did: points screened by the bound, predicted by the event engine, and pruned (a
// point that fits whose bound could not beat the best point already predicted).
struct PlanWork {
  std::size_t screened = 0, predicted = 0, pruned = 0;
};

// The best point of every (hardware, strategy): `base` are the workload's arguments, `layers` the model's
// transformer layers (the LayersOnGpu range), `model_gb` its weights (the OffloadGb range). `jobs` threads.
// One workload the planner tries: its sim run arguments, the model's transformer layers (the LayersOnGpu range) and
// weights in GB (the OffloadGb range), and a label for the table (a --dtype choice; "" when it is the only one).
struct PlanWorkload {
  std::string label;
  std::vector<std::string> base;
  int layers = 0;
  double model_gb = 0;
  bool experts = false;  // a mixture of experts (its trace names num_experts)
};
std::vector<PlanRow> plan(const std::vector<PlanWorkload>& workloads, const std::vector<std::string>& hardware,
                          const std::vector<std::string>& strategies, const PlanGoal& goal, const PlanEvaluate& evaluate,
                          const PlanPricer& price, int jobs, const PlanScreener& screen = nullptr, bool exhaustive = false,
                          PlanWork* work = nullptr, const std::map<std::string, std::vector<std::string>>& hw_args = {});

// Each row is priced by `price`; the Pareto front is of speed against GPU memory and price (an unpriced machine
// counts as dearer than any priced one). With `screen`, a searched knob's values are screened first: where it
// starts to fit is found from the placements alone, and the values that fit are predicted from the highest
// bound down until no bound left can beat the best prediction, so the best point is the one an exhaustive
// search finds (tests/cli/plan_test.cpp compares them) at a fraction of the event-engine runs; `work` counts them.
// `exhaustive` predicts every value that fits (the screen then only reports each row's bound). Both searches take
// "fits" as monotone in the knob; the screened one finds where it starts from the placement, the exhaustive one from
// the event engine, which can also refuse a run whose staging peak exceeds the GPU (then the screened search still
// predicts every fitting value past the placement's threshold, and both keep the fastest that the engine accepts). `hw_args` are a
// machine's own arguments after its --hw (the constraints: --set gpu.reserved=... for a VRAM margin).
std::vector<PlanRow> plan(const std::vector<std::string>& base, const std::vector<std::string>& hardware,
                          const std::vector<std::string>& strategies, int layers, double model_gb,
                          const PlanGoal& goal, const PlanEvaluate& evaluate, const PlanPricer& price, int jobs,
                          const PlanScreener& screen = nullptr, bool exhaustive = false, PlanWork* work = nullptr,
                          const std::map<std::string, std::vector<std::string>>& hw_args = {});

// plan() in two parts, for sim plan --shard: the candidates (workload x hardware x strategy, in that order; an
// unknown strategy is refused), the search of candidates [first, last) (their best points in candidate order, as
// plan() finds them), and the tail over every candidate's row (the drops, then rank_plan).
std::size_t plan_candidates(const std::vector<PlanWorkload>& workloads, const std::vector<std::string>& hardware,
                            const std::vector<std::string>& strategies);
std::vector<PlanRow> plan_search(const std::vector<PlanWorkload>& workloads, const std::vector<std::string>& hardware,
                                 const std::vector<std::string>& strategies, const PlanEvaluate& evaluate, int jobs,
                                 const PlanScreener& screen, bool exhaustive, PlanWork* work,
                                 const std::map<std::string, std::vector<std::string>>& hw_args, std::size_t first,
                                 std::size_t last);
std::vector<PlanRow> finish_plan(std::vector<PlanRow> rows, const std::vector<std::string>& hardware, const PlanGoal& goal,
                                 const PlanPricer& price);

// The entry of `list` (plan_strategies(), train_setups()) whose name is `name`; an InputError naming --strategies
// and listing the known names, as "unknown <what> 'name' (a, b, ...)", when there is none.
template <typename T>
const T& named_strategy(const std::vector<T>& list, const std::string& name, const std::string& what) {
  for (const T& t : list)
    if (t.name == name) return t;
  std::string known;
  for (const T& t : list) known += (known.empty() ? "" : ", ") + t.name;
  throw InputError("", 0, "--strategies", "unknown " + what + " '" + name + "' (" + known + ")");
}

// Runs body(0..count-1) on `jobs` threads, each index once; the first exception a body throws is rethrown after all
// have stopped.
void for_each_in_parallel(std::size_t count, int jobs, const std::function<void(std::size_t)>& body);

// Prices `rows`, marks the ones that meet the goal and the Pareto front of speed against GPU memory and price, and
// ranks them (the tail of plan(), shared with the training plan).
std::vector<PlanRow> rank_plan(std::vector<PlanRow> rows, const std::vector<std::string>& hardware, const PlanGoal& goal,
                               const PlanPricer& price);

// A plan's --format: md, csv or jsonl, else an InputError naming --format.
void check_plan_format(const std::string& format);

// The ranked table: markdown (default), csv or jsonl.
void write_plan(std::ostream& out, const std::string& format, const std::vector<PlanRow>& rows, const PlanGoal& goal);

}  // namespace tiersim::app
