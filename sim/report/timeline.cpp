#include "report/timeline.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace tiersim::report {

Timeline::Timeline(std::size_t max_steps, std::ostream& out) : max_steps_(max_steps), out_(&out) {
  *out_ << R"({"displayTimeUnit":"ms","traceEvents":[)";
}


void Timeline::event(const std::string& json) {
  if (!first_event_) *out_ << ',';
  first_event_ = false;
  *out_ << json;
}

void Timeline::span(const std::string& track, std::string name, SimTime start, SimTime end) {
  using nlohmann::ordered_json;
  auto it = std::find(tracks_.begin(), tracks_.end(), track);
  if (it == tracks_.end()) {
    it = tracks_.insert(tracks_.end(), track);
    event(ordered_json{{"name", "thread_name"},
                       {"ph", "M"},
                       {"pid", 0},
                       {"tid", tracks_.size() - 1},
                       {"args", {{"name", track}}}}
              .dump());
  }
  ++spans_;
  event(ordered_json{{"name", std::move(name)},
                     {"ph", "X"},
                     {"pid", 0},
                     {"tid", static_cast<std::size_t>(it - tracks_.begin())},
                     {"ts", to_seconds(start) * 1e6},
                     {"dur", to_seconds(end >= start ? end - start : 0) * 1e6}}
            .dump());
}

void Timeline::finish() {
  if (finished_) return;
  finished_ = true;
  *out_ << "]}\n";
}

}  // namespace tiersim::report
