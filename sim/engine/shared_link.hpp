#pragma once
// A link (PCIe, NVLink) whose bandwidth is shared by the transfers in flight on it: each direction
// is split evenly among its transfers (processor sharing, each capped at its own solo rate), and
// when both directions are busy their sum is held under the bidirectional limit. A transfer first
// waits its fixed latency, then moves its bytes at the shared rate.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/simulator.hpp"

namespace tiersim::engine {

enum class Direction : std::uint8_t { ToDevice = 0, FromDevice = 1 };

class TransferClient {
 public:
  virtual ~TransferClient() = default;
  virtual void transfer_done(std::uint64_t token) = 0;
};

class SharedLink final : public EventHandler {
 public:
  // `direction_capacity` is the most one direction can carry (B/s); `bidirectional_capacity` the most
  // both together can carry.
  SharedLink(Simulator& sim, std::string name, double to_device_capacity, double from_device_capacity,
             double bidirectional_capacity);

  void start(Direction dir, double bytes, double latency_seconds, double solo_rate, TransferClient* client,
             std::uint64_t token);

  const std::string& name() const { return name_; }
  double bytes_moved(Direction d) const { return bytes_moved_[static_cast<int>(d)]; }
  std::size_t active() const;
  void on_event(std::uint64_t tag) override;

 private:
  struct Transfer {
    bool in_use = false;
    bool moving = false;        // past its latency phase
    Direction dir = Direction::ToDevice;
    double remaining = 0.0;     // bytes left
    double solo_rate = 0.0;
    double rate = 0.0;          // current shared rate
    std::uint32_t generation = 0;
    TransferClient* client = nullptr;
    std::uint64_t token = 0;
  };
  void advance_to_now();   // charges progress at the current rates
  void reassign_rates();   // recomputes rates and reschedules completions
  static std::uint64_t tag(std::size_t slot, std::uint32_t generation, bool activation);

  Simulator& sim_;
  std::string name_;
  double capacity_[2];
  double bidirectional_;
  std::vector<Transfer> slots_;
  SimTime last_update_ = 0;
  double bytes_moved_[2] = {0.0, 0.0};
};

}  // namespace tiersim::engine
