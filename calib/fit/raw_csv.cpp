#include "fit/raw_csv.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

#include "core/error.hpp"

namespace tiersim::calib {

std::vector<const RawRow*> RawMeasurements::find(const std::string& benchmark, const std::string& prefix) const {
  std::vector<const RawRow*> out;
  for (const auto& r : rows)
    if (r.benchmark == benchmark && r.variant.rfind(prefix, 0) == 0) out.push_back(&r);
  return out;
}

const RawRow* RawMeasurements::one(const std::string& benchmark, const std::string& prefix) const {
  const auto all = find(benchmark, prefix);
  return all.empty() ? nullptr : all.front();
}

std::string RawMeasurements::fact(const std::string& key, const std::string& fallback) const {
  auto it = facts.find(key);
  return it == facts.end() ? fallback : it->second;
}

RawMeasurements parse_raw_csv(const std::string& text, const std::string& name) {
  RawMeasurements m;
  m.file = name;
  std::istringstream in(text);
  std::string line;
  std::size_t line_no = 0;
  bool header_seen = false;
  static const char* kHeader = "benchmark,variant,work,work_unit,repeats,median_s,min_s,max_s";
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    if (line[0] == '#') {
      const auto colon = line.find(':');
      if (colon == std::string::npos) throw InputError(name, line_no, "", "comment lines are '# key: value'");
      std::string key = line.substr(1, colon - 1), value = line.substr(colon + 1);
      auto trim = [](std::string& s) {
        while (!s.empty() && s.front() == ' ') s.erase(s.begin());
        while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.pop_back();
      };
      trim(key);
      trim(value);
      m.facts[key] = value;
      continue;
    }
    if (!header_seen) {
      if (line != kHeader) throw InputError(name, line_no, "", std::string("expected the header '") + kHeader + "'");
      header_seen = true;
      continue;
    }
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) f.push_back(cell);
    if (f.size() != 8) throw InputError(name, line_no, "", "expected 8 columns, got " + std::to_string(f.size()));
    RawRow r;
    r.benchmark = f[0];
    r.variant = f[1];
    r.work_unit = f[3];
    const char* cols[] = {"benchmark", "variant", "work", "work_unit", "repeats", "median_s", "min_s", "max_s"};
    auto number = [&](int i) {
      try {
        std::size_t used = 0;
        const double v = std::stod(f[static_cast<std::size_t>(i)], &used);
        if (used != f[static_cast<std::size_t>(i)].size() || !std::isfinite(v) || v < 0) throw std::invalid_argument("");
        return v;
      } catch (const std::exception&) {
        throw InputError(name, line_no, cols[i], "not a non-negative number: '" + f[static_cast<std::size_t>(i)] + "'");
      }
    };
    // Bounds far above any measurement (the largest runs move ~4e11 bytes in ~0.5 ms), so that the
    // fit's rates stay finite and no count is converted out of range.
    auto bounded = [&](int i, double lo, double hi, const char* range) {
      const double v = number(i);
      if (!(v >= lo && v <= hi)) throw InputError(name, line_no, cols[i], std::string("must be ") + range + ", got '" + f[static_cast<std::size_t>(i)] + "'");
      return v;
    };
    r.work = bounded(2, 0, 1e18, "from 0 to 1e18");
    const double repeats = bounded(4, 1, 1e9, "a whole number from 1 to 1e9");
    if (repeats != std::floor(repeats)) throw InputError(name, line_no, "repeats", "must be a whole number, got '" + f[4] + "'");
    r.repeats = static_cast<int>(repeats);
    r.median = bounded(5, 1e-12, 1e6, "from 1e-12 to 1e6 seconds");
    r.min = bounded(6, 0, 1e6, "from 0 to 1e6 seconds");
    r.max = bounded(7, 0, 1e6, "from 0 to 1e6 seconds");
    m.rows.push_back(std::move(r));
  }
  if (!header_seen) throw InputError(name, line_no, "", "no measurements (header line missing)");
  return m;
}

RawMeasurements read_raw_csv(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path, 0, "", "cannot open raw calibration CSV");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_raw_csv(ss.str(), path);
}

void add_rows_of(RawMeasurements& main, const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    const RawMeasurements extra = read_raw_csv(path);
    for (const RawRow& r : extra.rows) {
      for (const RawRow& m : main.rows)
        if (m.benchmark == r.benchmark && m.variant == r.variant)
          throw InputError(path, 0, r.benchmark + "," + r.variant, "already measured in " + main.file);
      main.rows.push_back(r);
    }
    main.file += " + " + path;
  }
}

}  // namespace tiersim::calib
