#pragma once
// A Chrome trace (chrome://tracing, ui.perfetto.dev) of the first steps of an event-engine run: one
// track for the host thread and one per stream, a span per host action and per stream item, so that
// overlap between copies, kernels and the host's issuing can be seen. Besides spans ("X", with args
// shown in the viewer's details pane) it writes counters ("C": memory in use per device) and flow
// arrows ("s" and "f", each bound to the span that encloses its time: a copy and the kernel that
// waited for it).
//
// The JSON is streamed as events arrive (a track's name event just before its first event), so memory
// does not grow with the steps recorded: the writer keeps only the track names, each counter's last
// value and the next flow id; finish() closes the document. Output is deterministic: times are exact
// decimals of the simulated picoseconds, args keep the order they were given in.
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/sim_time.hpp"

namespace tiersim::report {

class Timeline {
 public:
  // An event's details: a JSON object (keys in the order given), or null for none.
  using Args = nlohmann::ordered_json;

  // Streams to `out` (typically an OutputFile's stream), which must outlive the timeline.
  Timeline(std::size_t max_steps, std::ostream& out);
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  bool recording(std::size_t step) const { return step < max_steps_; }
  // Names the process all tracks belong to: the viewer shows it as the heading of the run.
  void process_name(const std::string& name);
  // Gives `track` its place now; tracks are otherwise listed in the order of their first event.
  void track(const std::string& track);
  void span(const std::string& track, const std::string& name, SimTime start, SimTime end, const Args& args = {});
  // The byte counter `name` has `value` (rounded to whole bytes) from `at` on. Written only when the
  // rounded value differs from the counter's last one, so callers may report every change they see.
  void counter(const std::string& name, SimTime at, double value);
  // An arrow from the span on `from_track` that encloses `from` to the span on `to_track` that
  // encloses `to`. Both ends are written at once under a fresh id, so every arrow is whole.
  void flow(const std::string& from_track, SimTime from, const std::string& to_track, SimTime to);
  // Writes the end of the document; once (later calls do nothing). Call after the run.
  void finish();

  std::size_t size() const { return spans_; }          // spans written
  std::size_t tracks() const { return tracks_.size(); }
  std::size_t counters() const { return counters_.size(); }
  std::size_t flows() const { return flows_; }

 private:
  void event(const std::string& json);
  // The id of `track`, writing its name event the first time it is seen.
  std::size_t track_id(const std::string& track);

  std::size_t max_steps_;
  std::ostream* out_;
  std::vector<std::string> tracks_;
  std::map<std::string, long long> counters_;  // by counter: the last value written
  std::size_t spans_ = 0;
  std::size_t flows_ = 0;
  bool first_event_ = true;
  bool finished_ = false;
};

}  // namespace tiersim::report
