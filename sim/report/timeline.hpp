#pragma once
// A Chrome trace (chrome://tracing, ui.perfetto.dev) of the first steps of an event-engine run: one
// track for the host thread and one per stream, a span per host action and per stream item, so that
// overlap between copies, kernels and the host's issuing can be seen.
//
// The JSON is streamed as spans arrive (a track's name event just before its first span), so memory
// does not grow with the steps recorded; finish() closes the document. Output is deterministic.
#include <cstdint>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/sim_time.hpp"

namespace tiersim::report {

class Timeline {
 public:
  // Streams to `out` (typically an OutputFile's stream), which must outlive the timeline.
  Timeline(std::size_t max_steps, std::ostream& out);
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  bool recording(std::size_t step) const { return step < max_steps_; }
  void span(const std::string& track, std::string name, SimTime start, SimTime end);
  // Writes the end of the document; once (later calls do nothing). Call after the run.
  void finish();
  std::size_t size() const { return spans_; }

 private:
  void event(const std::string& json);

  std::size_t max_steps_;
  std::ostream* out_;
  std::vector<std::string> tracks_;
  std::size_t spans_ = 0;
  bool first_event_ = true;
  bool finished_ = false;
};

}  // namespace tiersim::report
