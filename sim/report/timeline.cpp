#include "report/timeline.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace tiersim::report {

void Timeline::span(const std::string& track, std::string name, SimTime start, SimTime end) {
  auto it = std::find(tracks_.begin(), tracks_.end(), track);
  if (it == tracks_.end()) it = tracks_.insert(tracks_.end(), track);
  spans_.push_back({static_cast<std::size_t>(it - tracks_.begin()), std::move(name), start, end});
}

void Timeline::write(std::ostream& out) const {
  using nlohmann::ordered_json;
  ordered_json events = ordered_json::array();
  for (std::size_t t = 0; t < tracks_.size(); ++t)
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", t}, {"args", {{"name", tracks_[t]}}}});
  for (const auto& s : spans_)
    events.push_back({{"name", s.name},
                      {"ph", "X"},
                      {"pid", 0},
                      {"tid", s.track},
                      {"ts", to_seconds(s.start) * 1e6},
                      {"dur", to_seconds(s.end - s.start) * 1e6}});
  ordered_json j;
  j["displayTimeUnit"] = "ms";
  j["traceEvents"] = events;
  out << j.dump() << "\n";
}

}  // namespace tiersim::report
