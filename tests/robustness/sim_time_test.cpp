// Simulated time: conversions and sums past 2^64 ps are errors, never wrapped or undefined values.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/sim_time.hpp"
#include "engine/simulator.hpp"

namespace tiersim {
namespace {

TEST(SimTime, ConvertsNormalDurationsExactlyAndRoundsUp) {
  EXPECT_EQ(to_sim_time(1.0), 1'000'000'000'000u);
  EXPECT_EQ(to_sim_time(12.5e-6), 12'500'000u);
  EXPECT_EQ(to_sim_time(1e-13), 1u);  // never collapses to zero
  EXPECT_EQ(to_sim_time(0.0), 0u);
  EXPECT_EQ(to_sim_time(-3.0), 0u);
  EXPECT_EQ(to_sim_time(18'000'000.0), 18'000'000'000'000'000'000u);
}

// Without the check, 2e7 s (2e19 ps) was cast to uint64 (undefined behaviour: the sanitizer build
// traps it as float-cast-overflow; a plain build printed a faster prediction).
TEST(SimTime, DurationPastTheRangeIsAnErrorNotACast) {
  EXPECT_THROW(to_sim_time(2e7), SimTimeRangeError);
  EXPECT_THROW(to_sim_time(18446744.073709552), SimTimeRangeError);
  EXPECT_THROW(to_sim_time(std::numeric_limits<double>::infinity()), SimTimeRangeError);
  EXPECT_THROW(to_sim_time(std::nan("")), SimTimeRangeError);
  try {
    to_sim_time(2e7);
  } catch (const std::invalid_argument& e) {  // what the command reports as bad input (exit 2)
    EXPECT_NE(std::string(e.what()).find("5,124 hours"), std::string::npos) << e.what();
  }
}

TEST(SimTime, AdditionPastTheRangeIsAnError) {
  EXPECT_EQ(add_sim_time(1, 2), 3u);
  EXPECT_EQ(add_sim_time(kSimTimeMax - 1, 1), kSimTimeMax);
  EXPECT_THROW(add_sim_time(kSimTimeMax, 1), SimTimeRangeError);
  EXPECT_THROW(add_sim_time(10'000'000'000'000'000'000u, 10'000'000'000'000'000'000u), SimTimeRangeError);
}

struct Chain : engine::EventHandler {
  engine::Simulator* sim = nullptr;
  SimTime delay = 0;
  int left = 0;
  void on_event(std::uint64_t) override {
    if (left-- > 0) sim->schedule_in(delay, engine::kPriorityIssue, this, 0);
  }
};

// Two ops of 1e7 s each pushed time past 2^64 ps; the wrapped sum was "an event scheduled in the past".
TEST(SimTime, SchedulingPastTheEndOfTimeIsARangeError) {
  engine::Simulator sim;
  Chain c;
  c.sim = &sim;
  c.delay = 10'000'000'000'000'000'000u;  // 1e7 s
  c.left = 2;
  sim.schedule(0, engine::kPriorityIssue, &c, 0);
  EXPECT_THROW(sim.run(), SimTimeRangeError);
}

}  // namespace
}  // namespace tiersim
