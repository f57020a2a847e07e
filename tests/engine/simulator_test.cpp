#include <gtest/gtest.h>

#include <vector>

#include "engine/in_order_stream.hpp"
#include "engine/shared_link.hpp"
#include "engine/simulator.hpp"

namespace tiersim::engine {
namespace {

struct Recorder : EventHandler {
  std::vector<std::uint64_t> seen;
  void on_event(std::uint64_t tag) override { seen.push_back(tag); }
};

TEST(Simulator, OrdersByTimeThenPriorityThenInsertion) {
  Simulator sim;
  Recorder r;
  sim.schedule(20, kPriorityIssue, &r, 1);
  sim.schedule(10, kPriorityIssue, &r, 2);
  sim.schedule(10, kPriorityComplete, &r, 3);
  sim.schedule(10, kPriorityIssue, &r, 4);
  sim.run();
  EXPECT_EQ(r.seen, (std::vector<std::uint64_t>{3, 2, 4, 1}));
  EXPECT_EQ(sim.now(), 20u);
  EXPECT_EQ(sim.events_processed(), 4u);
}

TEST(Simulator, RefusesEventsInThePast) {
  Simulator sim;
  Recorder r;
  sim.schedule(10, kPriorityIssue, &r, 1);
  sim.run();
  EXPECT_THROW(sim.schedule(5, kPriorityIssue, &r, 2), std::logic_error);
}

struct Done : TransferClient {
  std::vector<std::pair<std::uint64_t, SimTime>> at;
  Simulator* sim = nullptr;
  void transfer_done(std::uint64_t token) override { at.emplace_back(token, sim->now()); }
};

TEST(SharedLink, OneTransferTakesLatencyPlusBytesOverRate) {
  Simulator sim;
  SharedLink link(sim, "pcie", 1e9, 1e9, 2e9);
  Done d;
  d.sim = &sim;
  link.start(Direction::ToDevice, 1e6, 5e-6, 1e9, &d, 7);  // 5 us + 1 ms
  sim.run();
  ASSERT_EQ(d.at.size(), 1u);
  EXPECT_NEAR(to_seconds(d.at[0].second), 1.005e-3, 1e-12);
}

TEST(SharedLink, TwoTransfersInOneDirectionShareItsBandwidth) {
  Simulator sim;
  SharedLink link(sim, "pcie", 1e9, 1e9, 2e9);
  Done d;
  d.sim = &sim;
  link.start(Direction::ToDevice, 1e6, 0, 1e9, &d, 1);
  link.start(Direction::ToDevice, 1e6, 0, 1e9, &d, 2);
  sim.run();
  // Each gets 0.5 GB/s: both end at 2 ms.
  ASSERT_EQ(d.at.size(), 2u);
  EXPECT_NEAR(to_seconds(d.at[0].second), 2e-3, 1e-12);
  EXPECT_NEAR(to_seconds(d.at[1].second), 2e-3, 1e-12);
}

TEST(SharedLink, ShortTransferLeavesAndTheLongOneSpeedsUp) {
  Simulator sim;
  SharedLink link(sim, "pcie", 1e9, 1e9, 2e9);
  Done d;
  d.sim = &sim;
  link.start(Direction::ToDevice, 3e6, 0, 1e9, &d, 1);
  link.start(Direction::ToDevice, 1e6, 0, 1e9, &d, 2);
  sim.run();
  // Shared until the short one has 1e6 (2 ms); the long one then has 2e6 left at full rate: 4 ms.
  EXPECT_EQ(d.at[0].first, 2u);
  EXPECT_NEAR(to_seconds(d.at[0].second), 2e-3, 1e-12);
  EXPECT_NEAR(to_seconds(d.at[1].second), 4e-3, 1e-12);
}

TEST(SharedLink, BothDirectionsAreHeldUnderTheBidirectionalLimit) {
  Simulator sim;
  SharedLink link(sim, "pcie", 1e9, 1e9, 1.5e9);
  Done d;
  d.sim = &sim;
  link.start(Direction::ToDevice, 1.5e6, 0, 1e9, &d, 1);
  link.start(Direction::FromDevice, 1.5e6, 0, 1e9, &d, 2);
  sim.run();
  // 2 GB/s asked, 1.5 allowed: 0.75 GB/s each, 2 ms.
  EXPECT_NEAR(to_seconds(d.at[0].second), 2e-3, 1e-12);
  EXPECT_NEAR(to_seconds(d.at[1].second), 2e-3, 1e-12);
}

TEST(InOrderStream, RunsInOrderAndWaitsForPrerequisites) {
  Simulator sim;
  JobGraph jobs;
  InOrderStream a(sim, jobs, "a"), b(sim, jobs, "b");
  const JobId slow = jobs.create(&a);
  const JobId dependent = jobs.create(&b);
  const JobId after = jobs.create(&b);
  jobs.add_dependency(dependent, slow);
  a.enqueue_compute(slow, 100);
  b.enqueue_compute(dependent, 10);
  b.enqueue_compute(after, 10);  // no dependency, but behind `dependent` in stream order
  sim.run();
  EXPECT_EQ(jobs.done_at(slow), 100u);
  EXPECT_EQ(jobs.done_at(dependent), 110u);
  EXPECT_EQ(jobs.done_at(after), 120u);
  EXPECT_EQ(b.busy_time(), 20u);
}

}  // namespace
}  // namespace tiersim::engine
