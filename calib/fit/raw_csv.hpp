#pragma once
// The raw measurements tiersim_calib writes: `# key: value` lines about the machine, then one CSV row
// per measurement (benchmark, variant, work, work_unit, repeats, median_s, min_s, max_s).
#include <map>
#include <string>
#include <vector>

namespace tiersim::calib {

struct RawRow {
  std::string benchmark, variant, work_unit;
  double work = 0;
  int repeats = 0;
  double median = 0, min = 0, max = 0;  // seconds
  double rate() const { return work / median; }  // bytes/s or FLOP/s or launches/s
};

struct RawMeasurements {
  std::string file;
  std::map<std::string, std::string> facts;
  std::vector<RawRow> rows;
  std::vector<const RawRow*> find(const std::string& benchmark, const std::string& variant_prefix = "") const;
  const RawRow* one(const std::string& benchmark, const std::string& variant_prefix) const;
  std::string fact(const std::string& key, const std::string& fallback = "") const;
};

// Adds the rows of other raw files (benchmarks a later run added, measured on another machine of the
// same kind); a benchmark and variant the main file already has is an error (no silent mixing).
void add_rows_of(RawMeasurements& main, const std::vector<std::string>& paths);

// Throws InputError naming the file, line and column at fault.
RawMeasurements read_raw_csv(const std::string& path);
RawMeasurements parse_raw_csv(const std::string& text, const std::string& name);

}  // namespace tiersim::calib
