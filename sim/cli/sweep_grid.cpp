// Grid expansion for `sim sweep` (sweep_grid.hpp).
#include "cli/sweep_grid.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>

#include "core/error.hpp"

namespace tiersim::app {
namespace {

// Option -> whether it is numeric, and whether whole numbers only.
struct Kind {
  bool numeric = false;
  bool whole = true;
};

const std::map<std::string, Kind>& list_options() {
  static const std::map<std::string, Kind> options{
      {"--ngl", {true, true}},        {"--layers", {true, true}},      {"--prefetch", {true, true}},
      {"--threads", {true, true}},    {"--ubatch", {true, true}},      {"--batch", {true, true}},
      {"--prompt", {true, true}},     {"--decode", {true, true}},      {"--ctx-size", {true, true}},
      {"--n-cpu-moe", {true, true}},  {"--steps", {true, true}},       {"--frames", {true, true}},
      {"--text-tokens", {true, true}}, {"--cfg", {true, false}},       {"--resolution", {}},
      {"--reference", {}},
      {"--offload-gb", {true, false}}, {"--hw", {}},                   {"--policy", {}},
      {"--runtime", {}},              {"--dtype", {}},                 {"--host-memory", {}},
      {"--engine", {}},               {"--offload-exec", {}},          {"--donor", {}},
      {"--fit", {}},                  {"--model", {}},                 {"--trace", {}}};
  return options;
}

constexpr std::size_t kMaxPoints = 100000;

std::string number_text(double v, bool whole) {
  char buf[64];
  if (whole) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

// FROM:TO:STEP, or nullopt-like empty when the text is not a range.
bool parse_range(const std::string& option, const std::string& text, const Kind& kind, std::vector<std::string>& out) {
  if (std::count(text.begin(), text.end(), ':') != 2) return false;
  double v[3];
  std::size_t start = 0;
  for (int i = 0; i < 3; ++i) {
    const std::size_t end = i < 2 ? text.find(':', start) : text.size();
    const std::string item = text.substr(start, end - start);
    char* stop = nullptr;
    v[i] = std::strtod(item.c_str(), &stop);
    if (item.empty() || *stop != '\0' || !std::isfinite(v[i]))
      throw InputError("", 0, option, "a range is FROM:TO:STEP with numbers (0:40:10), got '" + text + "'");
    start = end + 1;
  }
  if (v[2] <= 0 || v[1] < v[0]) throw InputError("", 0, option, "a range needs FROM <= TO and STEP > 0, got '" + text + "'");
  if (std::fabs(v[0]) > 1e12 || std::fabs(v[1]) > 1e12)
    throw InputError("", 0, option, "a range's ends must be within 10^12, got '" + text + "'");
  if (kind.whole && (v[0] != std::floor(v[0]) || v[1] != std::floor(v[1]) || v[2] != std::floor(v[2])))
    throw InputError("", 0, option, "takes whole numbers, got the range '" + text + "'");
  const double count = std::floor((v[1] - v[0]) / v[2] + 1e-9) + 1;
  if (count > kMaxPoints) throw InputError("", 0, option, "the range '" + text + "' has more than 100,000 values");
  for (int i = 0; i < static_cast<int>(count); ++i) out.push_back(number_text(v[0] + i * v[2], kind.whole));
  return true;
}

bool shell_safe(const std::string& s) {
  if (s.empty()) return false;
  for (const char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || std::string("-_./:=,%+@").find(c) != std::string::npos))
      return false;
  return true;
}

}  // namespace

bool takes_list(const std::string& option) { return list_options().count(option) > 0; }

Grid expand_grid(const std::vector<std::string>& args) {
  Grid g;
  // Where each axis's value sits in the arguments (the index of the value; "--opt=value" keeps its prefix).
  struct Slot {
    std::size_t index;
    std::string prefix;
  };
  std::vector<Slot> slots;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string option = args[i], value, prefix;
    std::size_t index = i + 1;
    const std::size_t eq = option.find('=');
    if (option.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = option.substr(eq + 1);
      prefix = option.substr(0, eq + 1);
      option = option.substr(0, eq);
      index = i;
    } else if (i + 1 < args.size()) {
      value = args[i + 1];
    } else {
      continue;
    }
    const auto it = list_options().find(option);
    if (it == list_options().end()) continue;
    std::vector<std::string> values;
    if (!(it->second.numeric && parse_range(option, value, it->second, values))) {
      if (value.find(',') == std::string::npos) continue;  // one value: not an axis
      std::size_t start = 0;
      while (true) {
        const std::size_t sep = value.find(',', start);
        const std::string item = value.substr(start, sep == std::string::npos ? std::string::npos : sep - start);
        if (item.empty()) throw InputError("", 0, option, "an empty item in the list '" + value + "'");
        values.push_back(item);
        if (sep == std::string::npos) break;
        start = sep + 1;
      }
    }
    for (const auto& a : g.axes)
      if (a.option == option) throw InputError("", 0, option, "is given twice as a list; give one list of all its values");
    g.axes.push_back({option, values});
    slots.push_back({index, prefix});
    if (index == i + 1) ++i;  // skip the value (--opt=value is one argument)
  }
  std::size_t total = 1;
  for (const auto& a : g.axes) {
    total *= a.values.size();
    if (total > kMaxPoints) throw InputError("", 0, a.option, "the grid has more than 100,000 points");
  }
  std::vector<std::size_t> at(g.axes.size(), 0);
  for (std::size_t n = 0; n < total; ++n) {
    GridPoint p;
    p.args = args;
    for (std::size_t k = 0; k < g.axes.size(); ++k) {
      const std::string& v = g.axes[k].values[at[k]];
      p.args[slots[k].index] = slots[k].prefix + v;
      p.values.push_back(v);
    }
    g.points.push_back(std::move(p));
    for (std::size_t k = g.axes.size(); k-- > 0;) {  // the last axis varies fastest
      if (++at[k] < g.axes[k].values.size()) break;
      at[k] = 0;
    }
  }
  return g;
}

std::string point_command(const std::vector<std::string>& args, const std::string& subcommand) {
  std::string out = "sim " + subcommand;
  for (const auto& a : args) {
    out += ' ';
    if (shell_safe(a)) {
      out += a;
      continue;
    }
    out += '\'';
    for (const char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

}  // namespace tiersim::app
