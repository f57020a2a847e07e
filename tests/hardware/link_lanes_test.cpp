// A what-if on the host link's lanes or generation scales its copy curves (sim/hardware/link_lanes.hpp), and
// `--set host_link.width=8` changes the answer (it once changed nothing).
#include "hardware/link_lanes.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "support/run_sim.hpp"

namespace tiersim::hw {
namespace {

HostLinkSpec gen4_x16() {
  HostLinkSpec l;
  l.type = "pcie";
  l.generation = 4;
  l.width = 16;
  l.h2d_pinned = {25e9, 5e-6, {{1e6, 20e9}, {1e8, 25e9}}};
  l.d2h_pinned = {26e9, 5e-6, {}};
  l.h2d_pageable = {10e9, 8e-6, {{1e6, 9e9}, {1e8, 10e9}}};
  l.d2h_pageable = {16e9, 8e-6, {}};
  l.bidirectional = 45e9;
  return l;
}

TEST(LinkLanes, PinnedCopiesScaleWithTheLinkPageableOnesOnlyWhereItIsTheirBottleneck) {
  HostLinkSpec l = gen4_x16();
  l.width = 8;
  rescale_host_link(l, 4, 16);
  EXPECT_DOUBLE_EQ(l.h2d_pinned.bandwidth, 12.5e9);
  EXPECT_DOUBLE_EQ(l.h2d_pinned.points[1].second, 12.5e9);
  EXPECT_DOUBLE_EQ(l.d2h_pinned.bandwidth, 13e9);
  EXPECT_DOUBLE_EQ(l.bidirectional, 22.5e9);
  EXPECT_DOUBLE_EQ(l.h2d_pageable.bandwidth, 10e9);  // host memcpy-bound: the x8 link still carries it
  EXPECT_DOUBLE_EQ(l.d2h_pageable.bandwidth, 13e9);  // 16 GB/s needs more than x8 gives: capped
  EXPECT_DOUBLE_EQ(l.h2d_pinned.latency, 5e-6);      // latencies stay
  HostLinkSpec x4 = gen4_x16();
  x4.width = 4;
  rescale_host_link(x4, 4, 16);
  EXPECT_LT(x4.h2d_pageable.bandwidth, 10e9);       // now the link is the bottleneck
  EXPECT_DOUBLE_EQ(x4.h2d_pageable.bandwidth, 6.25e9);
}

TEST(LinkLanes, TheSameCapacityChangesNothingAndAnUnknownGenerationIsRefused) {
  HostLinkSpec l = gen4_x16();
  l.generation = 3;  // 3.0 x16 is close to 4.0 x8, not equal: a change
  l.width = 16;
  rescale_host_link(l, 4, 16);
  EXPECT_NEAR(l.h2d_pinned.bandwidth, 25e9 * 0.985 / 1.969, 1);
  HostLinkSpec same = gen4_x16();
  rescale_host_link(same, 4, 16);
  EXPECT_DOUBLE_EQ(same.h2d_pinned.bandwidth, 25e9);
  EXPECT_THROW(rescale_host_link(same, 0, 16), std::invalid_argument);
}

TEST(LinkLanes, SettingTheWidthChangesTheAnswerAndSaysSo) {
  const std::string run = "--trace traces/qwen.trace --policy ratio --split \"cuda:0,75%;cpu,25%\" --json";
  auto step = [&](const std::string& extra) {
    const testing::SimRun r = testing::run_sim(run + extra, false);
    EXPECT_EQ(r.code, 0) << extra << "\n" << r.out;
    return r.code == 0 ? nlohmann::json::parse(r.out)["step_seconds"].get<double>() : 0.0;
  };
  const double x16 = step(""), x8 = step(" --set host_link.width=8"), x4 = step(" --set host_link.width=4");
  EXPECT_LT(x16, x8);
  EXPECT_LT(x8, x4);
  EXPECT_DOUBLE_EQ(step(" --set host_link.width=16"), x16);  // the profile's own width: nothing changes
  const testing::SimRun text = testing::run_sim("--trace traces/qwen.trace --policy ratio --split \"cuda:0,75%;cpu,25%\" "
                                                "--set host_link.width=8");
  EXPECT_NE(text.out.find("host link copies scaled from PCIe 4.0 x16 to 4.0 x8"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace tiersim::hw
