#include "engine/simulator.hpp"

#include <algorithm>
#include <stdexcept>

namespace tiersim::engine {

void Simulator::schedule(SimTime at, EventPriority priority, EventHandler* handler, std::uint64_t tag) {
  if (at < now_) throw std::logic_error("event scheduled in the past");
  heap_.push_back(Event{at, priority, next_seq_++, handler, tag});
  std::push_heap(heap_.begin(), heap_.end(), EventLater{});
}

void Simulator::run() {
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), EventLater{});
    const Event e = heap_.back();
    heap_.pop_back();
    now_ = e.time;
    ++processed_;
    e.handler->on_event(e.tag);
  }
}

}  // namespace tiersim::engine
