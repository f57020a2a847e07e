#pragma once
// Simulated time is an unsigned integer count of picoseconds (SST style): exact, totally ordered,
// and 2^64 ps is about 5,000 hours, far beyond any run we simulate. Conversions and additions are
// checked: a duration or an instant past that range is an error, never a wrapped or undefined value.
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

namespace tiersim {

using SimTime = std::uint64_t;
inline constexpr double kPicosPerSecond = 1e12;
inline constexpr SimTime kSimTimeMax = std::numeric_limits<SimTime>::max();
// 2^64 as a double: the first duration (in ps) that does not fit. Every double below it converts exactly.
inline constexpr double kSimTimeLimitPicos = 18446744073709551616.0;

// A duration or instant outside the simulated-time range (NaN, or past 2^64 ps, about 5,124 hours).
// It derives from std::invalid_argument because it always comes from absurd inputs (a trace's op
// duration, a profile's rate): the command reports it as bad input (exit code 2).
class SimTimeRangeError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

namespace sim_time_detail {
[[noreturn]] inline void out_of_range(double seconds) {
  throw SimTimeRangeError("a simulated duration of " + std::to_string(seconds) +
                          " s is outside the simulated-time range (0 to 18,446,744 s, about 5,124 hours): "
                          "an op duration, size or rate in the inputs is absurd");
}
}  // namespace sim_time_detail

// Rounds up so that a positive duration never collapses to zero time. Zero and negative durations
// are zero; NaN and durations of 2^64 ps or more throw SimTimeRangeError.
inline SimTime to_sim_time(double seconds) {
  if (std::isnan(seconds)) sim_time_detail::out_of_range(seconds);
  if (!(seconds > 0.0)) return 0;
  const double picos = std::ceil(seconds * kPicosPerSecond);
  if (!(picos < kSimTimeLimitPicos)) sim_time_detail::out_of_range(seconds);
  return static_cast<SimTime>(picos);
}
inline double to_seconds(SimTime t) { return static_cast<double>(t) / kPicosPerSecond; }

// a + b, or SimTimeRangeError when the sum passes the end of simulated time.
inline SimTime add_sim_time(SimTime a, SimTime b) {
  if (b > kSimTimeMax - a) {
    throw SimTimeRangeError("simulated time passed 2^64 ps (about 5,124 hours): the run's op durations, sizes or "
                            "rates in the inputs are absurd");
  }
  return a + b;
}

}  // namespace tiersim
