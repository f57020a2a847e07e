#pragma once
// The discrete-event core: one queue of events ordered by (time, priority, insertion order), so
// that every run of the same inputs processes the same events in the same order.
#include <cstdint>
#include <vector>

#include "core/sim_time.hpp"

namespace tiersim::engine {

class EventHandler {
 public:
  virtual ~EventHandler() = default;
  virtual void on_event(std::uint64_t tag) = 0;
};

// Lower values run first among events at the same time: completions free resources before new
// work is issued at that instant.
enum EventPriority : std::uint32_t { kPriorityComplete = 0, kPriorityActivate = 1, kPriorityIssue = 2 };

struct Event {
  SimTime time;
  std::uint32_t priority;
  std::uint64_t seq;
  EventHandler* handler;
  std::uint64_t tag;
};

// The single comparator that defines event order.
struct EventLater {
  bool operator()(const Event& a, const Event& b) const {
    if (a.time != b.time) return a.time > b.time;
    if (a.priority != b.priority) return a.priority > b.priority;
    return a.seq > b.seq;
  }
};

class Simulator {
 public:
  SimTime now() const { return now_; }
  // Schedules `handler->on_event(tag)` at absolute time `at` (never in the past).
  void schedule(SimTime at, EventPriority priority, EventHandler* handler, std::uint64_t tag);
  // Schedules `delay` after now; throws SimTimeRangeError when that passes the end of simulated
  // time (an unchecked sum would wrap into the past).
  void schedule_in(SimTime delay, EventPriority priority, EventHandler* handler, std::uint64_t tag) {
    schedule(add_sim_time(now_, delay), priority, handler, tag);
  }
  // Processes events until none remain.
  void run();
  bool empty() const { return heap_.empty(); }
  std::uint64_t events_processed() const { return processed_; }

 private:
  std::vector<Event> heap_;  // binary heap under EventLater
  SimTime now_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t processed_ = 0;
};

}  // namespace tiersim::engine
