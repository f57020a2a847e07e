// Options that once changed nothing without a word (issue 39): each now changes the answer or is refused by name.
#include <gtest/gtest.h>

#include "support/run_sim.hpp"

namespace {

using tiersim::testing::run_sim;

TEST(InertOptions, DtypeOnATraceIsRefused) {
  const auto r = run_sim("--trace traces/qwen.trace --policy resident --dtype fp8");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("'--dtype': sets the weight format of a generated model"), std::string::npos) << r.out;
}

TEST(InertOptions, ABytesSplitWithoutUnitsIsRefusedNotFourBytes) {
  const auto r = run_sim("--trace traces/qwen.trace --policy bytes --split \"cuda:0,4;cpu,*\"");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("'4' has no unit"), std::string::npos) << r.out;
  EXPECT_EQ(run_sim("--trace traces/qwen.trace --policy bytes --split \"cuda:0,4gb;cpu,*\"").code, 0);
  EXPECT_EQ(run_sim("--trace traces/qwen.trace --policy bytes --split \"cuda:0,4096b;cpu,*\"").code, 0);  // bytes, said so
}

}  // namespace
