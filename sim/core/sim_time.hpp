#pragma once
// Simulated time is an unsigned integer count of picoseconds (SST style): exact, totally ordered,
// and 2^64 ps is about 5,000 hours, far beyond any run we simulate.
#include <cmath>
#include <cstdint>

namespace tiersim {

using SimTime = std::uint64_t;
inline constexpr double kPicosPerSecond = 1e12;

// Rounds up so that a positive duration never collapses to zero time.
inline SimTime to_sim_time(double seconds) {
  if (!(seconds > 0.0)) return 0;
  return static_cast<SimTime>(std::ceil(seconds * kPicosPerSecond));
}
inline double to_seconds(SimTime t) { return static_cast<double>(t) / kPicosPerSecond; }

}  // namespace tiersim
