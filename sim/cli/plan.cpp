#include "cli/plan.hpp"

#include "cli/progress.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <thread>

#include "cli/sweep_grid.hpp"
#include "report/reporters.hpp"
#include "core/error.hpp"
#include "core/json_text.hpp"

namespace tiersim::app {

double PlanPoint::speed() const {
  if (!ok) return 0;
  if (diffusion) return summary.iteration_median > 0 ? 1.0 / summary.iteration_median : 0;
  return summary.tps;
}

const std::vector<PlanStrategy>& plan_strategies() {
  using K = PlanStrategy::Knob;
  static const std::vector<PlanStrategy> s{
      {"resident", "everything on the GPU", {"--policy", "resident"}, K::None, false},
      {"llamacpp", "llama.cpp, its --fit choosing -c and -ngl", {"--policy", "llamacpp"}, K::None, false},
      {"llamacpp-cpu-moe", "llama.cpp with -ngl all and --n-cpu-moe N: the experts of the first N layers in host memory, "
       "run by the CPU (fewest N that fits; a mixture of experts; -ngl given, so --fit only sets the context)",
       {"--policy", "llamacpp", "--ngl", "999"}, K::CpuMoeLayers, false},
      {"layers-cpu", "the first N layers on the GPU, the rest run by the CPU (most N that fits)",
       {"--policy", "layers", "--offload-exec", "cpu"}, K::LayersOnGpu, false},
      {"layers-stream", "the first N layers on the GPU, the rest copied from pinned memory one layer ahead",
       {"--policy", "layers", "--prefetch", "1"}, K::LayersOnGpu, false},
      {"distorch-cpu", "DisTorch virtual VRAM to the CPU (least that fits)", {"--policy", "bytes", "--donor", "cpu"},
       K::OffloadGb, false},
      {"distorch-gpu1", "DisTorch virtual VRAM to cuda:1 (least that fits)", {"--policy", "bytes", "--donor", "cuda:1"},
       K::OffloadGb, true},
      {"comfyui", "ComfyUI's own partial loading", {"--policy", "comfyui"}, K::None, false},
      {"accelerate", "accelerate's device_map=\"auto\"", {"--policy", "accelerate"}, K::None, false},
      {"pipeline", "half the layers on each of two GPUs, each running its own",
       {"--policy", "ratio", "--split", "cuda:0,50%;cuda:1,50%", "--offload", "execute"}, K::None, true},
      {"um", "CUDA managed memory (oversubscribed when it must)", {"--policy", "um"}, K::None, false},
  };
  return s;
}

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::vector<std::string> with(std::vector<std::string> args, std::initializer_list<std::string> more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Counts of the search's work, shared by the threads.
struct WorkCounters {
  std::atomic<std::size_t> screened{0}, predicted{0}, pruned{0};
};

// The best point of one candidate: where its knob starts to fit is found by bisection (memory grows with
// layers on the GPU and shrinks with GB offloaded, so "fits" is monotone), then every value that fits is
// considered and the fastest kept: speed is not monotone in the knob (DisTorch's tail-first assignment moves
// a different mix of modules at each amount; a test against a fine grid caught a "least offload" search).
// With a screener the bisection reads placements only, and values are predicted from the highest speed bound
// down, stopping where no bound left beats the best prediction (or ties it with more on the GPU): the same
// point as predicting them all, since no prediction exceeds its bound.
PlanRow best_point(const std::vector<std::string>& base, const std::string& hw, const std::vector<std::string>& hw_args,
                   const PlanStrategy& s, int layers, double model_gb, bool experts, const PlanEvaluate& evaluate,
                   const PlanScreener& screen, bool exhaustive, WorkCounters& work) {
  const bool search_by_screen = screen && !exhaustive;
  PlanRow row;
  row.hw = hw;
  row.strategy = s.name;
  if (s.knob == PlanStrategy::Knob::CpuMoeLayers && !experts) {  // dropped, as a strategy that does not apply
    row.point.applies = false;
    row.point.error = "--n-cpu-moe moves experts, and this model has none";
    return row;
  }
  std::vector<std::string> args = with(base, {"--hw", hw});
  args.insert(args.end(), hw_args.begin(), hw_args.end());
  std::vector<std::string> sargs = args;
  sargs.insert(sargs.end(), s.args.begin(), s.args.end());
  auto at = [&](std::initializer_list<std::string> knob) {
    std::vector<std::string> a = with(sargs, knob);
    ++work.predicted;
    return std::pair{a, evaluate(a)};
  };
  if (s.knob == PlanStrategy::Knob::None) {
    auto [a, p] = at({});
    row.args = a;
    row.point = p;
    if (screen && p.ok) {
      ++work.screened;
      const PlanScreen bound = screen(a);
      if (bound.fits) row.bound = bound.speed_at_most;
    }
    return row;
  }
  const bool layers_knob = s.knob == PlanStrategy::Knob::LayersOnGpu, moe_knob = s.knob == PlanStrategy::Knob::CpuMoeLayers;
  // Candidate values, from the most on the GPU to the least: layers L..0, experts of 0..L layers on the CPU, or GB
  // 0, 0.25, ... past the model.
  const int steps = layers_knob || moe_knob ? layers + 1 : static_cast<int>(std::ceil(model_gb * 4)) + 1;
  auto value = [&](int i) {
    return layers_knob ? std::to_string(layers - i) : moe_knob ? std::to_string(i) : fmt("%g", 0.25 * i);
  };
  const std::string flag = layers_knob ? "--layers" : moe_knob ? "--n-cpu-moe" : "--offload-gb";
  auto eval_i = [&](int i) { return at({flag, value(i)}); };
  std::vector<std::optional<PlanScreen>> screened(static_cast<std::size_t>(steps));
  auto screen_i = [&](int i) -> const PlanScreen& {
    auto& slot = screened[static_cast<std::size_t>(i)];
    if (!slot) {
      ++work.screened;
      slot = screen(with(sargs, {flag, value(i)}));
    }
    return *slot;
  };
  auto finish = [&](std::pair<std::vector<std::string>, PlanPoint> best, int best_i) {
    row.args = std::move(best.first);
    row.point = std::move(best.second);
    row.setting = flag + " " + value(best_i);
    if (screen && row.point.ok && screen_i(best_i).fits) row.bound = screen_i(best_i).speed_at_most;
    return row;
  };
  // Everything on the GPU, when it fits, is the point (nothing to trade).
  if (!search_by_screen || screen_i(0).fits || !screen_i(0).applies) {
    auto first = eval_i(0);
    if (first.second.ok) return finish(std::move(first), 0);
  }
  // Nothing fits: the smallest footprint's reason.
  if (!search_by_screen || !screen_i(steps - 1).fits) {
    auto last = eval_i(steps - 1);
    if (!last.second.ok) return finish(std::move(last), steps - 1);
  }
  auto fits = [&](int i) { return search_by_screen ? screen_i(i).fits : eval_i(i).second.ok; };
  int lo = 0, hi = steps - 1;  // lo does not fit, hi fits
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    (fits(mid) ? hi : lo) = mid;
  }
  // The values that fit, the highest bound first (ties: more on the GPU first); without a screener, in order.
  std::vector<std::pair<double, int>> order;
  for (int i = hi; i < steps; ++i) order.emplace_back(search_by_screen ? screen_i(i).speed_at_most : HUGE_VAL, i);
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::optional<std::pair<std::vector<std::string>, PlanPoint>> best;
  int best_i = -1;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const auto [bound, i] = order[k];
    // The bound holds to within rounding (the property test allows 1e-9), so a value can reach at most bound x
    // (1 + 1e-9): pruned when that is below the best, or equal to it and the value would lose the tie.
    const double reach = bound * (1 + 1e-9);
    if (best && (reach < best->second.speed() || (reach <= best->second.speed() && i > best_i))) {
      work.pruned += order.size() - k;
      break;
    }
    auto p = eval_i(i);
    if (!p.second.ok) continue;
    if (!best || p.second.speed() > best->second.speed() || (p.second.speed() == best->second.speed() && i < best_i))
      best = std::move(p), best_i = i;
  }
  if (!best) return finish(eval_i(steps - 1), steps - 1);  // the placements fit, the runs did not
  return finish(std::move(*best), best_i);
}

}  // namespace

void for_each_in_parallel(std::size_t count, int jobs, const std::function<void(std::size_t)>& body) {
  std::atomic<std::size_t> next{0};
  std::mutex failure_mutex;
  std::exception_ptr failure;
  auto worker = [&] {
    for (std::size_t i; (i = next++) < count;) {
      try {
        body(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
      }
    }
  };
  std::vector<std::thread> threads;
  const int n = std::max(1, std::min<int>(jobs, static_cast<int>(count)));
  for (int t = 0; t < n; ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

std::vector<PlanRow> plan(const std::vector<std::string>& base, const std::vector<std::string>& hardware,
                          const std::vector<std::string>& strategies, int layers, double model_gb,
                          const PlanGoal& goal, const PlanEvaluate& evaluate, const PlanPricer& price, int jobs,
                          const PlanScreener& screen, bool exhaustive, PlanWork* work,
                          const std::map<std::string, std::vector<std::string>>& hw_args) {
  return plan(std::vector<PlanWorkload>{{"", base, layers, model_gb}}, hardware, strategies, goal, evaluate, price, jobs,
              screen, exhaustive, work, hw_args);
}

namespace {

struct Candidate {
  const PlanWorkload* workload;
  std::string hw;
  const PlanStrategy* strategy;
};

// The plan's candidates in order: workload x hardware x strategy (an unknown strategy is refused).
std::vector<Candidate> candidates_of(const std::vector<PlanWorkload>& workloads, const std::vector<std::string>& hardware,
                                     const std::vector<std::string>& strategies) {
  std::vector<Candidate> out;
  for (const auto& w : workloads)
    for (const auto& hw : hardware)
      for (const auto& name : strategies) out.push_back({&w, hw, &named_strategy(plan_strategies(), name, "strategy")});
  return out;
}

}  // namespace

std::size_t plan_candidates(const std::vector<PlanWorkload>& workloads, const std::vector<std::string>& hardware,
                            const std::vector<std::string>& strategies) {
  return candidates_of(workloads, hardware, strategies).size();
}

std::vector<PlanRow> plan_search(const std::vector<PlanWorkload>& workloads, const std::vector<std::string>& hardware,
                                 const std::vector<std::string>& strategies, const PlanEvaluate& evaluate, int jobs,
                                 const PlanScreener& screen, bool exhaustive, PlanWork* work,
                                 const std::map<std::string, std::vector<std::string>>& hw_args, std::size_t first,
                                 std::size_t last) {
  const std::vector<Candidate> candidates = candidates_of(workloads, hardware, strategies);
  last = std::min(last, candidates.size());
  first = std::min(first, last);
  std::vector<PlanRow> rows(last - first);
  WorkCounters counters;
  Progress progress("plan", "candidates", rows.size(), 2);  // a candidate is a search: seconds each
  for_each_in_parallel(rows.size(), jobs, [&](std::size_t k) {
    const Candidate& c = candidates[first + k];
    const auto extra = hw_args.find(c.hw);
    rows[k] = best_point(c.workload->base, c.hw, extra == hw_args.end() ? std::vector<std::string>{} : extra->second,
                         *c.strategy, c.workload->layers, c.workload->model_gb, c.workload->experts, evaluate, screen,
                         exhaustive, counters);
    rows[k].workload = c.workload->label;
    progress.tick();
  });
  progress.finish();
  if (work) *work = {counters.screened.load(), counters.predicted.load(), counters.pruned.load()};
  return rows;
}

std::vector<PlanRow> finish_plan(std::vector<PlanRow> rows, const std::vector<std::string>& hardware, const PlanGoal& goal,
                                 const PlanPricer& price) {
  // Dropped: strategies that do not apply (a second GPU on a one-GPU machine), a searched strategy whose
  // best point keeps everything on the GPU where `resident` fits on the same machine (the same placement), and
  // llama.cpp with no experts on the CPU where plain llama.cpp fits (the same run).
  std::vector<char> drop(rows.size(), 0);
  auto fits_as = [&](const PlanRow& r, const char* strategy) {
    for (const auto& o : rows)
      if (o.hw == r.hw && o.workload == r.workload && o.strategy == strategy && o.point.ok) return true;
    return false;
  };
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    const bool all_on_gpu = r.point.ok && r.point.offloaded == 0 && r.strategy != "resident";
    const bool no_cpu_experts = r.point.ok && r.strategy == "llamacpp-cpu-moe" && r.setting == "--n-cpu-moe 0";
    drop[i] = !r.point.applies || (all_on_gpu && fits_as(r, "resident")) || (no_cpu_experts && fits_as(r, "llamacpp"));
  }
  std::vector<PlanRow> kept;
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (!drop[i]) kept.push_back(std::move(rows[i]));
  if (kept.empty()) {
    std::string why;
    for (const auto& r : rows)
      if (!r.point.applies) {
        why = r.strategy + " on " + r.hw + ": " + r.point.error;
        break;
      }
    throw InputError("", 0, "--strategies", "no strategy applies to this model on these machines (" + why + ")");
  }
  return rank_plan(std::move(kept), hardware, goal, price);
}

std::vector<PlanRow> plan(const std::vector<PlanWorkload>& workloads, const std::vector<std::string>& hardware,
                          const std::vector<std::string>& strategies, const PlanGoal& goal, const PlanEvaluate& evaluate,
                          const PlanPricer& price, int jobs, const PlanScreener& screen, bool exhaustive, PlanWork* work,
                          const std::map<std::string, std::vector<std::string>>& hw_args) {
  return finish_plan(plan_search(workloads, hardware, strategies, evaluate, jobs, screen, exhaustive, work, hw_args, 0,
                                 plan_candidates(workloads, hardware, strategies)),
                     hardware, goal, price);
}

std::vector<PlanRow> rank_plan(std::vector<PlanRow> rows, const std::vector<std::string>& hardware, const PlanGoal& goal,
                               const PlanPricer& price) {
  std::map<std::string, std::optional<hw::Price>> prices;
  for (const auto& hw : hardware) prices.emplace(hw, price(hw));
  for (auto& r : rows) r.price = prices.at(r.hw);
  for (auto& r : rows) {
    if (!r.point.ok) continue;
    const auto& s = r.point.summary;
    r.meets = (!goal.min_tps || (!r.point.diffusion && s.tps >= *goal.min_tps)) &&
              (!goal.max_seconds_per_iteration ||
               (r.point.diffusion && s.iteration_median <= *goal.max_seconds_per_iteration)) &&
              (!goal.max_price || (r.price && r.price->usd <= *goal.max_price));
  }
  // Pareto front of speed (higher) against GPU memory (lower) and price (lower; unpriced above every price),
  // among the points that fit.
  auto cost = [](const PlanRow& r) { return r.price ? r.price->usd : HUGE_VAL; };
  for (auto& r : rows) {
    if (!r.point.ok) continue;
    r.pareto = true;
    for (const auto& o : rows)
      if (o.point.ok && o.point.speed() >= r.point.speed() && o.point.vram_peak <= r.point.vram_peak &&
          cost(o) <= cost(r) &&
          (o.point.speed() > r.point.speed() || o.point.vram_peak < r.point.vram_peak || cost(o) < cost(r)))
        r.pareto = false;
  }
  // Ranked: the points that fit by speed (ties: less GPU memory, then the candidate order), then the rest; with
  // `cheapest`, the points that meet the goal come first, cheapest first (unpriced last, then by speed).
  std::vector<std::size_t> order(rows.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const auto& x = rows[a].point;
    const auto& y = rows[b].point;
    if (x.ok != y.ok) return x.ok;
    if (goal.cheapest && x.ok) {
      if (rows[a].meets != rows[b].meets) return rows[a].meets;
      if (rows[a].meets && cost(rows[a]) != cost(rows[b])) return cost(rows[a]) < cost(rows[b]);
    }
    if (x.speed() != y.speed()) return x.speed() > y.speed();
    return x.vram_peak < y.vram_peak;
  });
  std::vector<PlanRow> ranked;
  for (std::size_t i : order) ranked.push_back(std::move(rows[i]));
  return ranked;
}

void check_plan_format(const std::string& format) {
  if (format != "md" && format != "csv" && format != "jsonl")
    throw InputError("", 0, "--format", "md (default), csv or jsonl, not '" + format + "'");
}

void write_plan(std::ostream& out, const std::string& format, const std::vector<PlanRow>& rows, const PlanGoal& goal) {
  const bool diffusion = std::any_of(rows.begin(), rows.end(), [](const PlanRow& r) { return r.point.diffusion; });
  const std::string speed_name = diffusion ? "s_per_iteration" : "tokens_per_s";
  // A prefill (time to the first token) where the rows are inference of a language model: not for diffusion
  // iterations, not for training steps (sim plan --train).
  const bool prefill = !diffusion && std::none_of(rows.begin(), rows.end(), [](const PlanRow& r) { return r.subcommand == "train"; });
  auto speed = [&](const PlanRow& r) {
    if (!r.point.ok) return std::string();
    return diffusion ? fmt("%.4g", r.point.summary.iteration_median) : fmt("%.4g", r.point.summary.tps);
  };
  const bool goal_set = goal.min_tps || goal.max_seconds_per_iteration || goal.max_price;
  if (format == "jsonl") {
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      nlohmann::ordered_json j{{"rank", i + 1}, {"hw", r.hw}};
      if (!r.workload.empty()) j["dtype"] = r.workload;
      j["strategy"] = r.strategy;
      j["setting"] = r.setting;
      if (r.price) j["price_usd"] = r.price->usd, j["price_source"] = r.price->source;
      if (r.point.ok) {
        j[speed_name] = diffusion ? r.point.summary.iteration_median : r.point.summary.tps;
        if (r.bound) j[speed_name + "_bound"] = diffusion ? 1.0 / *r.bound : *r.bound;
        // What a chat user waits for before the first token: the prompt's prefill (decode speed alone ranks a row
        // whose prefill is 40 s over one of 3 s).
        if (prefill) j["prefill_seconds"] = r.point.summary.prefill_seconds;
        j["vram_peak_bytes"] = std::llround(r.point.vram_peak);
        j["host_peak_bytes"] = std::llround(r.point.host_peak);
        j["offloaded_bytes"] = std::llround(r.point.offloaded);
        j["bottleneck"] = r.point.bottleneck;
        j["accuracy"] = {{"class", r.point.accuracy_class}, {"basis", r.point.accuracy_basis},
                         {"in_sample_mean_abs_error", r.point.error_in ? nlohmann::ordered_json(*r.point.error_in) : nullptr},
                         {"out_of_sample_mean_abs_error", r.point.error_out ? nlohmann::ordered_json(*r.point.error_out) : nullptr}};
        j["pareto"] = r.pareto;
        if (goal_set) j["meets_goal"] = r.meets;
      } else {
        j["error"] = r.point.error;
      }
      j["command"] = point_command(r.args, r.subcommand);
      out << dump_json(j) << '\n';
    }
    return;
  }
  const bool workloads = std::any_of(rows.begin(), rows.end(), [](const PlanRow& r) { return !r.workload.empty(); });
  // The error band of each row's class (sim/accuracy): in-sample mean abs error, out-of-sample after a slash.
  auto band = [](const PlanPoint& p) { return p.ok ? p.error_band : std::string(); };
  std::vector<std::string> header{"rank", "hw", "strategy", "setting", speed_name, "error band", "meets goal", "price (USD)",
                                  "GPU peak (GiB)", "offloaded (GB)", "limited by", "pareto", "command"};
  if (prefill) header.insert(header.begin() + 5, "prefill (s)");
  if (workloads) header.insert(header.begin() + 2, "dtype");
  std::vector<std::vector<std::string>> table;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    const bool ok = r.point.ok;
    table.push_back({std::to_string(i + 1), r.hw, r.strategy, r.setting, ok ? speed(r) : "does not fit", band(r.point),
                     !goal_set || !ok ? "" : r.meets ? "yes" : "no", r.price ? fmt("%.0f", r.price->usd) : "",
                     ok ? fmt("%.2f", r.point.vram_peak / 1073741824.0) : "",
                     ok ? fmt("%.2f", r.point.offloaded / 1e9) : "", ok ? r.point.bottleneck : r.point.error,
                     ok && r.pareto ? "yes" : "", point_command(r.args, r.subcommand)});
    if (prefill) table.back().insert(table.back().begin() + 5, ok ? fmt("%.3g", r.point.summary.prefill_seconds) : "");
    if (workloads) table.back().insert(table.back().begin() + 2, r.workload);
  }
  report::write_table(out, format == "csv" ? report::GridFormat::Csv : report::GridFormat::Markdown, header, table);
}

}  // namespace tiersim::app
