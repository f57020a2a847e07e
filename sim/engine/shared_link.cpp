#include "engine/shared_link.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tiersim::engine {

SharedLink::SharedLink(Simulator& sim, std::string name, double to_device_capacity, double from_device_capacity,
                       double bidirectional_capacity)
    : sim_(sim), name_(std::move(name)), capacity_{to_device_capacity, from_device_capacity},
      bidirectional_(bidirectional_capacity) {
  if (!(to_device_capacity > 0 && from_device_capacity > 0 && bidirectional_capacity > 0))
    throw std::invalid_argument("link '" + name_ + "' needs positive capacities");
}

std::uint64_t SharedLink::tag(std::size_t slot, std::uint32_t generation, bool activation) {
  return (static_cast<std::uint64_t>(slot) << 33) | (static_cast<std::uint64_t>(generation) << 1) |
         (activation ? 1u : 0u);
}

std::size_t SharedLink::active() const {
  return static_cast<std::size_t>(std::count_if(slots_.begin(), slots_.end(), [](const Transfer& t) { return t.in_use; }));
}

void SharedLink::start(Direction dir, double bytes, double latency_seconds, double solo_rate, TransferClient* client,
                       std::uint64_t token) {
  if (!(solo_rate > 0)) throw std::invalid_argument("transfer on '" + name_ + "' needs a positive rate");
  std::size_t slot = 0;
  while (slot < slots_.size() && slots_[slot].in_use) ++slot;
  if (slot == slots_.size()) slots_.emplace_back();
  Transfer& t = slots_[slot];
  t.in_use = true;
  t.moving = false;
  t.dir = dir;
  t.remaining = bytes;
  t.solo_rate = solo_rate;
  t.rate = 0.0;
  t.client = client;
  t.token = token;
  ++t.generation;
  bytes_moved_[static_cast<int>(dir)] += bytes;
  sim_.schedule_in(to_sim_time(latency_seconds), kPriorityActivate, this, tag(slot, t.generation, true));
}

void SharedLink::advance_to_now() {
  const double dt = to_seconds(sim_.now() - last_update_);
  if (dt > 0) {
    for (auto& t : slots_)
      if (t.in_use && t.moving) t.remaining = std::max(0.0, t.remaining - t.rate * dt);
  }
  last_update_ = sim_.now();
}

void SharedLink::reassign_rates() {
  int count[2] = {0, 0};
  for (const auto& t : slots_)
    if (t.in_use && t.moving) ++count[static_cast<int>(t.dir)];
  double sum[2] = {0.0, 0.0};
  for (auto& t : slots_) {
    if (!(t.in_use && t.moving)) continue;
    const int d = static_cast<int>(t.dir);
    t.rate = std::min(t.solo_rate, capacity_[d] / count[d]);
    sum[d] += t.rate;
  }
  const double total = sum[0] + sum[1];
  const double scale = total > bidirectional_ ? bidirectional_ / total : 1.0;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    Transfer& t = slots_[i];
    if (!(t.in_use && t.moving)) continue;
    t.rate *= scale;
    ++t.generation;  // invalidates the previously scheduled completion
    sim_.schedule_in(to_sim_time(t.remaining / t.rate), kPriorityComplete, this, tag(i, t.generation, false));
  }
}

void SharedLink::on_event(std::uint64_t event_tag) {
  const std::size_t slot = static_cast<std::size_t>(event_tag >> 33);
  const auto generation = static_cast<std::uint32_t>((event_tag >> 1) & 0xffffffffu);
  const bool activation = (event_tag & 1u) != 0;
  Transfer& t = slots_[slot];
  if (!t.in_use || t.generation != generation) return;  // superseded by a rate change
  advance_to_now();
  if (activation) {
    t.moving = true;
  } else {
    t.in_use = false;
    t.moving = false;
    TransferClient* client = t.client;
    const std::uint64_t token = t.token;
    reassign_rates();
    client->transfer_done(token);
    return;
  }
  reassign_rates();
}

}  // namespace tiersim::engine
