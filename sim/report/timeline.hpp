#pragma once
// A Chrome trace (chrome://tracing, ui.perfetto.dev) of the first steps of an event-engine run: one
// track for the host thread and one per stream, a span per host action and per stream item, so that
// overlap between copies, kernels and the host's issuing can be seen.
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/sim_time.hpp"

namespace tiersim::report {

class Timeline {
 public:
  explicit Timeline(std::size_t max_steps) : max_steps_(max_steps) {}
  bool recording(std::size_t step) const { return step < max_steps_; }
  void span(const std::string& track, std::string name, SimTime start, SimTime end);
  // Writes the trace JSON; deterministic (spans in the order they were recorded).
  void write(std::ostream& out) const;
  std::size_t size() const { return spans_.size(); }

 private:
  struct Span {
    std::size_t track;
    std::string name;
    SimTime start, end;
  };
  std::size_t max_steps_;
  std::vector<std::string> tracks_;
  std::vector<Span> spans_;
};

}  // namespace tiersim::report
