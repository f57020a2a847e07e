#include "fit/advised_cycle_fit.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/units.hpp"

namespace tiersim::calib {

namespace {

constexpr const char* kBenchmark = "um_advised_cycle";

// "16B" / "4KiB" (bench_alloc_calls.cu's size names) as bytes.
double size_of(const std::string& name, const std::string& file, const std::string& variant) {
  std::size_t digits = 0;
  while (digits < name.size() && (std::isdigit(static_cast<unsigned char>(name[digits])) || name[digits] == '.')) ++digits;
  try {
    if (digits == 0) throw std::invalid_argument("no number");
    return units::parse_bytes(name.substr(0, digits) + " " + name.substr(digits));
  } catch (const std::invalid_argument&) {
    throw InputError(file, 0, std::string(kBenchmark) + "," + variant, "the size '" + name + "' does not parse");
  }
}

}  // namespace

hw::ManagedMemorySpec::AdvisedCycle fit_advised_cycle(const RawMeasurements& runs) {
  std::vector<std::pair<double, const RawRow*>> none;  // by size
  for (const RawRow* r : runs.find(kBenchmark, "none_")) {
    const std::string size = r->variant.substr(5);
    if (size != "all") none.emplace_back(size_of(size, runs.file, r->variant), r);
  }
  if (none.empty())
    throw InputError(runs.file, 0, std::string(kBenchmark) + ",none_<size>",
                     "no advised_cycle rows without advice (tiersim_calib --only advised_cycle)");
  std::sort(none.begin(), none.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  hw::ManagedMemorySpec::AdvisedCycle out;
  auto table = [&](const std::string& advice, std::vector<std::pair<double, double>>& pts) {
    for (const auto& [bytes, base] : none) {
      const std::string variant = advice + "_" + base->variant.substr(5);
      const RawRow* r = nullptr;
      for (const RawRow* c : runs.find(kBenchmark, variant))
        if (c->variant == variant) r = c;
      if (!r) throw InputError(runs.file, 0, std::string(kBenchmark) + "," + variant, "missing: 'none' has this size");
      pts.emplace_back(bytes, std::max(0.0, r->median - base->median));
    }
  };
  table("prefer_cpu", out.prefer_cpu);
  table("prefer_cpu_accessed_by", out.prefer_cpu_accessed_by);
  table("prefer_cpu_read_mostly", out.prefer_cpu_read_mostly);
  return out;
}

}  // namespace tiersim::calib
