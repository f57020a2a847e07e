#include "report/timeline.hpp"

#include <algorithm>
#include <cmath>

namespace tiersim::report {

namespace {

// A JSON string; bytes that are not UTF-8 (a tensor name from a foreign file) become U+FFFD rather
// than failing the run.
std::string quoted(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Picoseconds as microseconds (the trace's unit), exactly: "12.5", not 12.500000000000002.
std::string microseconds(SimTime ps) {
  std::string s = std::to_string(ps / 1'000'000);
  SimTime fraction = ps % 1'000'000;
  if (fraction == 0) return s;
  std::string digits = std::to_string(fraction);
  digits.insert(0, 6 - digits.size(), '0');
  digits.erase(digits.find_last_not_of('0') + 1);
  return s + "." + digits;
}

// The fields every event on a track starts with.
std::string head(const std::string& name, const char* phase, std::size_t tid, SimTime ts) {
  return "{\"name\":" + quoted(name) + ",\"ph\":\"" + phase + "\",\"pid\":0,\"tid\":" + std::to_string(tid) +
         ",\"ts\":" + microseconds(ts);
}

}  // namespace

Timeline::Timeline(std::size_t max_steps, std::ostream& out) : max_steps_(max_steps), out_(&out) {
  *out_ << R"({"displayTimeUnit":"ms","traceEvents":[)";
}

void Timeline::event(const std::string& json) {
  if (!first_event_) *out_ << ',';
  first_event_ = false;
  *out_ << json;
}

std::size_t Timeline::track_id(const std::string& track) {
  const auto it = std::find(tracks_.begin(), tracks_.end(), track);
  if (it != tracks_.end()) return static_cast<std::size_t>(it - tracks_.begin());
  tracks_.push_back(track);
  const std::size_t tid = tracks_.size() - 1;
  event(R"({"name":"thread_name","ph":"M","pid":0,"tid":)" + std::to_string(tid) + R"(,"args":{"name":)" +
        quoted(track) + "}}");
  return tid;
}

void Timeline::process_name(const std::string& name) {
  event(R"({"name":"process_name","ph":"M","pid":0,"args":{"name":)" + quoted(name) + "}}");
}

void Timeline::track(const std::string& track) { track_id(track); }

void Timeline::span(const std::string& track, const std::string& name, SimTime start, SimTime end, const Args& args) {
  const std::size_t tid = track_id(track);
  ++spans_;
  std::string json = head(name, "X", tid, start) + ",\"dur\":" + microseconds(end >= start ? end - start : 0);
  if (!args.is_null()) json += ",\"args\":" + args.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  event(json + "}");
}

void Timeline::counter(const std::string& name, SimTime at, double value) {
  const long long whole = std::llround(value);
  const auto [it, added] = counters_.try_emplace(name, whole);
  if (!added && it->second == whole) return;
  it->second = whole;
  // Counters belong to the process, not to a track: Chrome draws one chart per name (Perfetto names
  // it "<name> bytes" after the arg).
  event("{\"name\":" + quoted(name) + ",\"ph\":\"C\",\"pid\":0,\"ts\":" + microseconds(at) +
        ",\"args\":{\"bytes\":" + std::to_string(whole) + "}}");
}

void Timeline::flow(const std::string& from_track, SimTime from, const std::string& to_track, SimTime to) {
  const std::size_t from_tid = track_id(from_track);
  const std::size_t to_tid = track_id(to_track);
  const std::string id = std::to_string(++flows_);
  // Viewers pair the two ends by name, category and id; "bp":"e" binds the end to the span enclosing
  // it rather than to the next span to start.
  event(head("waits for", "s", from_tid, from) + ",\"cat\":\"copy\",\"id\":" + id + "}");
  event(head("waits for", "f", to_tid, to) + ",\"cat\":\"copy\",\"id\":" + id + ",\"bp\":\"e\"}");
}

void Timeline::finish() {
  if (finished_) return;
  finished_ = true;
  *out_ << "]}\n";
}

}  // namespace tiersim::report
