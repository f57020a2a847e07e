#include "cli/plan_shard.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.hpp"
#include "core/json_text.hpp"
#include "report/grid_shard.hpp"

namespace tiersim::app {

namespace {

using nlohmann::ordered_json;
constexpr const char* kMagic = "tiersim_plan_shard";

ordered_json optional_number(const std::optional<double>& v) { return v ? ordered_json(*v) : ordered_json(nullptr); }

ordered_json goal_json(const PlanGoal& g) {
  return {{"min_tps", optional_number(g.min_tps)},
          {"max_seconds_per_iteration", optional_number(g.max_seconds_per_iteration)},
          {"max_price", optional_number(g.max_price)},
          {"cheapest", g.cheapest}};
}

ordered_json row_json(const PlanRow& r) {
  const PlanPoint& p = r.point;
  return {{"workload", r.workload},
          {"hw", r.hw},
          {"strategy", r.strategy},
          {"setting", r.setting},
          {"args", r.args},
          {"subcommand", r.subcommand},
          {"bound", optional_number(r.bound)},
          {"point",
           {{"ok", p.ok},
            {"applies", p.applies},
            {"error", p.error},
            {"tps", p.summary.tps},
            {"iteration_median", p.summary.iteration_median},
            {"prefill_seconds", p.summary.prefill_seconds},
            {"vram_peak", p.vram_peak},
            {"host_peak", p.host_peak},
            {"offloaded", p.offloaded},
            {"bottleneck", p.bottleneck},
            {"error_in", optional_number(p.error_in)},
            {"error_out", optional_number(p.error_out)},
            {"validated", p.validated},
            {"accuracy_class", p.accuracy_class},
            {"error_band", p.error_band},
            {"accuracy_basis", p.accuracy_basis},
            {"diffusion", p.diffusion}}}};
}

// Reading one line's object, each key required and of its type; errors name the file, the line and the key.
class Fields {
 public:
  Fields(const nlohmann::json& j, std::string file, std::size_t line, std::string path)
      : j_(j), file_(std::move(file)), line_(line), path_(std::move(path)) {}
  const nlohmann::json& get(const std::string& key) const {
    if (!j_.is_object() || !j_.contains(key)) fail(key, "missing");
    return j_.at(key);
  }
  std::string text(const std::string& key) const {
    const auto& v = get(key);
    if (!v.is_string()) fail(key, "expected a string");
    return v.get<std::string>();
  }
  bool flag(const std::string& key) const {
    const auto& v = get(key);
    if (!v.is_boolean()) fail(key, "expected true or false");
    return v.get<bool>();
  }
  double number(const std::string& key) const {
    const auto& v = get(key);
    if (!v.is_number() || !std::isfinite(v.get<double>())) fail(key, "expected a finite number");
    return v.get<double>();
  }
  std::optional<double> optional(const std::string& key) const {
    const auto& v = get(key);
    if (v.is_null()) return std::nullopt;
    return number(key);
  }
  std::size_t count(const std::string& key) const {
    const auto& v = get(key);
    if (!v.is_number_unsigned()) fail(key, "expected a whole number");
    return v.get<std::size_t>();
  }
  std::vector<std::string> texts(const std::string& key) const {
    const auto& v = get(key);
    if (!v.is_array()) fail(key, "expected a list of strings");
    std::vector<std::string> out;
    for (const auto& e : v) {
      if (!e.is_string()) fail(key, "expected a list of strings");
      out.push_back(e.get<std::string>());
    }
    return out;
  }
  Fields child(const std::string& key) const {
    const auto& v = get(key);
    if (!v.is_object()) fail(key, "expected an object");
    return Fields(v, file_, line_, path_ + key + ".");
  }
  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw InputError(file_, line_, path_ + key, why);
  }

 private:
  const nlohmann::json& j_;
  std::string file_;
  std::size_t line_;
  std::string path_;
};

PlanRow row_of(const Fields& f) {
  PlanRow r;
  r.workload = f.text("workload");
  r.hw = f.text("hw");
  r.strategy = f.text("strategy");
  r.setting = f.text("setting");
  r.args = f.texts("args");
  r.subcommand = f.text("subcommand");
  r.bound = f.optional("bound");
  const Fields p = f.child("point");
  PlanPoint& q = r.point;
  q.ok = p.flag("ok");
  q.applies = p.flag("applies");
  q.error = p.text("error");
  q.summary.tps = p.number("tps");
  q.summary.iteration_median = p.number("iteration_median");
  q.summary.prefill_seconds = p.number("prefill_seconds");
  q.vram_peak = p.number("vram_peak");
  q.host_peak = p.number("host_peak");
  q.offloaded = p.number("offloaded");
  q.bottleneck = p.text("bottleneck");
  q.error_in = p.optional("error_in");
  q.error_out = p.optional("error_out");
  q.validated = p.flag("validated");
  q.accuracy_class = p.text("accuracy_class");
  q.error_band = p.text("error_band");
  q.accuracy_basis = p.text("accuracy_basis");
  q.diffusion = p.flag("diffusion");
  return r;
}

}  // namespace

void write_plan_shard(std::ostream& out, const PlanShard& shard) {
  ordered_json prices = ordered_json::object();
  for (const auto& [hw, p] : shard.prices)
    prices[hw] = p ? ordered_json{{"usd", p->usd}, {"source", p->source}, {"date", p->date}} : ordered_json(nullptr);
  const ordered_json head{{kMagic, 1},
                          {"candidates", shard.candidates},
                          {"shard", std::to_string(shard.k) + "/" + std::to_string(shard.n)},
                          {"first", shard.first},
                          {"hardware", shard.hardware},
                          {"goal", goal_json(shard.goal)},
                          {"prices", prices},
                          {"work", {{"screened", shard.work.screened}, {"predicted", shard.work.predicted},
                                    {"pruned", shard.work.pruned}}}};
  out << dump_json(head) << '\n';
  for (const auto& r : shard.rows) out << dump_json(row_json(r)) << '\n';
}

bool is_plan_shard(const std::string& text) {
  const std::string first = text.substr(0, text.find('\n'));
  try {
    const auto j = nlohmann::json::parse(first);
    return j.is_object() && j.contains(kMagic);
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

PlanShard read_plan_shard(const std::string& text, const std::string& file) {
  std::istringstream in(text);
  std::string line;
  std::size_t line_no = 0;
  PlanShard s;
  bool head = false;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw InputError(file, line_no, head ? "row" : kMagic, std::string("not a JSON object: ") + e.what());
    }
    const Fields f(j, file, line_no, "");
    if (!head) {
      if (!j.is_object() || !j.contains(kMagic) || j[kMagic] != 1)
        throw InputError(file, line_no, kMagic, "not a plan shard (sim plan --shard K/N writes one; version 1)");
      s.candidates = f.count("candidates");
      const std::string shard = f.text("shard");
      try {
        std::tie(s.k, s.n) = report::parse_shard(shard);
      } catch (const InputError& e) {
        throw InputError(file, line_no, "shard", e.what());
      }
      s.first = f.count("first");
      s.hardware = f.texts("hardware");
      const Fields g = f.child("goal");
      s.goal.min_tps = g.optional("min_tps");
      s.goal.max_seconds_per_iteration = g.optional("max_seconds_per_iteration");
      s.goal.max_price = g.optional("max_price");
      s.goal.cheapest = g.flag("cheapest");
      const auto& prices = f.get("prices");
      if (!prices.is_object()) f.fail("prices", "expected an object of machines");
      for (const auto& [hw, p] : prices.items()) {
        if (p.is_null()) {
          s.prices[hw] = std::nullopt;
          continue;
        }
        const Fields q(p, file, line_no, "prices." + hw + ".");
        s.prices[hw] = hw::Price{q.number("usd"), q.text("source"), q.text("date")};
      }
      const Fields w = f.child("work");
      s.work = {w.count("screened"), w.count("predicted"), w.count("pruned")};
      head = true;
      continue;
    }
    s.rows.push_back(row_of(f));
  }
  if (!head) throw InputError(file, 0, kMagic, "empty: not a plan shard");
  for (const auto& hw : s.hardware)
    if (!s.prices.count(hw)) throw InputError(file, 1, "prices", "no price entry for the plan's machine '" + hw + "'");
  for (std::size_t i = 0; i < s.rows.size(); ++i)
    if (std::find(s.hardware.begin(), s.hardware.end(), s.rows[i].hw) == s.hardware.end())
      throw InputError(file, i + 2, "hw", "'" + s.rows[i].hw + "' is not one of the plan's machines");
  const auto [first, last] = report::shard_range(s.candidates, s.k, s.n);
  if (s.first != first || s.rows.size() != last - first)
    throw InputError(file, line_no, "first",
                     "shard " + std::to_string(s.k) + "/" + std::to_string(s.n) + " of " + std::to_string(s.candidates) +
                         " candidates holds [" + std::to_string(first) + ", " + std::to_string(last) + "), not " +
                         std::to_string(s.rows.size()) + " rows from " + std::to_string(s.first));
  return s;
}

std::vector<PlanRow> merge_plan_shards(const std::vector<std::pair<std::string, PlanShard>>& shards, PlanShard& whole) {
  if (shards.empty()) throw InputError("", 0, "shards", "no shard files given");
  const PlanShard& one = shards.front().second;
  auto goal_text = [](const PlanGoal& g) { return dump_json(goal_json(g)); };
  std::vector<const PlanShard*> by_k(one.n, nullptr);
  for (const auto& [file, s] : shards) {
    if (s.candidates != one.candidates || s.n != one.n || s.hardware != one.hardware ||
        goal_text(s.goal) != goal_text(one.goal) || s.prices.size() != one.prices.size())
      throw InputError(file, 1, kMagic, "another plan's shard than " + shards.front().first +
                                            "'s (its candidates, shard count, machines, goal or prices differ)");
    for (const auto& [hw, p] : s.prices) {
      const auto o = one.prices.find(hw);
      if (o == one.prices.end() || o->second.has_value() != p.has_value() ||
          (p && (p->usd != o->second->usd || p->source != o->second->source)))
        throw InputError(file, 1, "prices", "another plan's shard than " + shards.front().first + "'s (the price of " + hw + ")");
    }
    if (by_k[s.k - 1]) throw InputError(file, 1, "shard", "shard " + std::to_string(s.k) + "/" + std::to_string(s.n) + " given twice");
    by_k[s.k - 1] = &s;
  }
  for (std::size_t k = 0; k < by_k.size(); ++k)
    if (!by_k[k]) throw InputError("", 0, "shards", "shard " + std::to_string(k + 1) + "/" + std::to_string(one.n) + " is missing");
  whole = one;
  whole.rows.clear();
  whole.work = {};
  std::vector<PlanRow> rows;
  for (const PlanShard* s : by_k) {
    rows.insert(rows.end(), s->rows.begin(), s->rows.end());
    whole.work.screened += s->work.screened;
    whole.work.predicted += s->work.predicted;
    whole.work.pruned += s->work.pruned;
  }
  return rows;
}

}  // namespace tiersim::app
