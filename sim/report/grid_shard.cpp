#include "report/grid_shard.hpp"

#include <charconv>
#include <cstdint>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "core/error.hpp"
#include "core/json_text.hpp"

namespace tiersim::report {

namespace {

constexpr const char* kFormat = "tiersim-grid-shard";
constexpr int kVersion = 1;

using nlohmann::ordered_json;

// A field of a shard line: its value of the JSON type wanted, or an InputError naming the file, line and key.
template <typename T>
T field(const ordered_json& j, const char* key, const std::string& file, std::size_t line) {
  if (!j.contains(key)) throw InputError(file, line, key, "missing (not a tiersim grid shard line)");
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw InputError(file, line, key, "has the wrong type: " + j.at(key).dump());
  }
}

// A whole number >= 0 (a count or an index): a JSON integer, never a float (whose cast could overflow).
std::size_t count_field(const ordered_json& j, const char* key, const std::string& file, std::size_t line) {
  if (!j.contains(key)) throw InputError(file, line, key, "missing (not a tiersim grid shard line)");
  const ordered_json& v = j.at(key);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
    throw InputError(file, line, key, "expected a whole number, 0 or more: " + v.dump());
  return v.get<std::size_t>();
}

// A double as JSON: a number, or "inf", "-inf" or "nan" (JSON has none of those; nlohmann would write null).
ordered_json number(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
}

double number_field(const ordered_json& j, const char* key, const std::string& file, std::size_t line) {
  if (j.contains(key) && j.at(key).is_string()) {
    const std::string v = j.at(key).get<std::string>();
    if (v == "inf") return std::numeric_limits<double>::infinity();
    if (v == "-inf") return -std::numeric_limits<double>::infinity();
    if (v == "nan") return std::numeric_limits<double>::quiet_NaN();
    throw InputError(file, line, key, "expected a number, or inf, -inf or nan: '" + v + "'");
  }
  if (j.contains(key) && !j.at(key).is_number()) throw InputError(file, line, key, "has the wrong type: " + j.at(key).dump());
  return field<double>(j, key, file, line);
}

}  // namespace

std::pair<std::size_t, std::size_t> shard_range(std::size_t points, std::size_t k, std::size_t n) {
  return {(k - 1) * points / n, k * points / n};
}

std::pair<std::size_t, std::size_t> parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  std::size_t k = 0, n = 0;
  const char* end = text.data() + text.size();
  const bool parsed = slash != std::string::npos &&
                      std::from_chars(text.data(), text.data() + slash, k).ptr == text.data() + slash && slash > 0 &&
                      std::from_chars(text.data() + slash + 1, end, n).ptr == end && slash + 1 < text.size();
  if (!parsed || k < 1 || n < 1 || k > n || n > 100000)
    throw InputError("", 0, "--shard", "expected K/N, shard K of N (1 <= K <= N <= 100000), got '" + text + "'");
  return {k, n};
}

void write_grid_shard(std::ostream& out, const GridShard& s) {
  ordered_json head;
  head["format"] = kFormat;
  head["version"] = kVersion;
  head["shard"] = std::to_string(s.k) + "/" + std::to_string(s.n);
  head["points"] = s.points;
  head["first"] = s.first;
  head["rows"] = s.rows.size();
  head["axes"] = s.axes;
  out << dump_json(head) << '\n';
  for (const GridRow& r : s.rows) {
    ordered_json j;
    j["values"] = r.values;
    j["ok"] = r.ok;
    j["error"] = r.error;
    j["error_band"] = r.error_band;
    j["command"] = r.command;
    j["vram_peak"] = number(r.vram_peak);
    j["offloaded"] = number(r.offloaded);
    const result::Summary& m = r.summary;
    j["decode_steps"] = m.decode_steps;
    j["prefill_steps"] = m.prefill_steps;
    j["iteration_steps"] = m.iteration_steps;
    j["tps"] = number(m.tps);
    j["decode_step_median"] = number(m.decode_step_median);
    j["iteration_median"] = number(m.iteration_median);
    j["prefill_seconds"] = number(m.prefill_seconds);
    j["h2d_bytes_per_step"] = number(m.h2d_bytes_per_step);
    j["peer_bytes_per_step"] = number(m.peer_bytes_per_step);
    out << dump_json(j) << '\n';
  }
}

GridShard read_grid_shard(const std::string& text, const std::string& file) {
  GridShard s;
  std::istringstream in(text);
  std::string line;
  std::size_t n = 0, want = 0;
  while (std::getline(in, line)) {
    ++n;
    ordered_json j;
    try {
      j = ordered_json::parse(line);
    } catch (const nlohmann::json::exception&) {  // a parse error, or a number past a double's range
      throw InputError(file, n, "", "not a JSON line (a tiersim grid shard is sim sweep --shard's output)");
    }
    if (!j.is_object()) throw InputError(file, n, "", "not a JSON object");
    if (n == 1) {
      if (!j.contains("format") || j["format"] != kFormat)
        throw InputError(file, 1, "format", "not a tiersim grid shard (sim sweep --shard K/N writes one)");
      if (count_field(j, "version", file, 1) != static_cast<std::size_t>(kVersion))
        throw InputError(file, 1, "version", "this sim reads shard version " + std::to_string(kVersion));
      try {
        std::tie(s.k, s.n) = parse_shard(field<std::string>(j, "shard", file, 1));
      } catch (const InputError& e) {
        if (!e.file().empty()) throw;
        throw InputError(file, 1, "shard", e.message());  // the file's field, not the command's --shard
      }
      s.points = count_field(j, "points", file, 1);
      if (s.points < 1 || s.points > 100000)  // a grid's bounds (cli/sweep_grid.hpp)
        throw InputError(file, 1, "points", "must be 1 to 100,000 (a grid's points), not " + std::to_string(s.points));
      s.first = count_field(j, "first", file, 1);
      want = count_field(j, "rows", file, 1);
      s.axes = field<std::vector<std::string>>(j, "axes", file, 1);
      continue;
    }
    GridRow r;
    r.values = field<std::vector<std::string>>(j, "values", file, n);
    if (r.values.size() != s.axes.size())
      throw InputError(file, n, "values", std::to_string(r.values.size()) + " values for " +
                                              std::to_string(s.axes.size()) + " axes");
    r.ok = field<bool>(j, "ok", file, n);
    r.error = field<std::string>(j, "error", file, n);
    r.error_band = field<std::string>(j, "error_band", file, n);
    r.command = field<std::string>(j, "command", file, n);
    r.vram_peak = number_field(j, "vram_peak", file, n);
    r.offloaded = number_field(j, "offloaded", file, n);
    result::Summary& m = r.summary;
    m.decode_steps = count_field(j, "decode_steps", file, n);
    m.prefill_steps = count_field(j, "prefill_steps", file, n);
    m.iteration_steps = count_field(j, "iteration_steps", file, n);
    m.tps = number_field(j, "tps", file, n);
    m.decode_step_median = number_field(j, "decode_step_median", file, n);
    m.iteration_median = number_field(j, "iteration_median", file, n);
    m.prefill_seconds = number_field(j, "prefill_seconds", file, n);
    m.h2d_bytes_per_step = number_field(j, "h2d_bytes_per_step", file, n);
    m.peer_bytes_per_step = number_field(j, "peer_bytes_per_step", file, n);
    s.rows.push_back(std::move(r));
  }
  if (n == 0) throw InputError(file, 0, "", "empty (a tiersim grid shard has a first line naming its grid)");
  const auto [first, last] = shard_range(s.points, s.k, s.n);
  if (s.first != first || want != last - first)
    throw InputError(file, 1, "shard", "shard " + std::to_string(s.k) + "/" + std::to_string(s.n) + " of " +
                                           std::to_string(s.points) + " points holds rows " + std::to_string(first) +
                                           " to " + std::to_string(last) + ", not what this file says");
  if (s.rows.size() != want)
    throw InputError(file, n, "rows", "has " + std::to_string(s.rows.size()) + " rows of the " +
                                          std::to_string(want) + " its first line promises (a shard cut short)");
  return s;
}

std::vector<GridRow> merge_grid_shards(const std::vector<std::pair<std::string, GridShard>>& shards,
                                       std::vector<std::string>& axes) {
  if (shards.empty()) throw InputError("", 0, "merge", "give the shard files of one grid");
  const GridShard& one = shards.front().second;
  std::vector<const GridShard*> by_k(one.n, nullptr);
  std::vector<std::string> file_of(one.n);
  for (const auto& [file, s] : shards) {
    if (s.axes != one.axes || s.points != one.points || s.n != one.n)
      throw InputError(file, 1, "shard", "is not a shard of the grid " + shards.front().first + " is one of (its axes, "
                                         "point count or shard count differ)");
    if (by_k[s.k - 1])
      throw InputError(file, 1, "shard", "shard " + std::to_string(s.k) + "/" + std::to_string(s.n) + " again (also " +
                                             file_of[s.k - 1] + ")");
    by_k[s.k - 1] = &s;
    file_of[s.k - 1] = file;
  }
  std::vector<GridRow> rows;
  for (std::size_t k = 0; k < one.n; ++k) {
    if (!by_k[k])
      throw InputError("", 0, "merge", "shard " + std::to_string(k + 1) + "/" + std::to_string(one.n) +
                                           " is missing (every shard of the grid is needed)");
    rows.insert(rows.end(), by_k[k]->rows.begin(), by_k[k]->rows.end());
  }
  axes = one.axes;
  return rows;
}

}  // namespace tiersim::report
