// Progress on standard error (cli/progress.hpp): counts, rate and time left when asked to show, nothing otherwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <thread>
#include <vector>

#include "cli/progress.hpp"

namespace tiersim::app {
namespace {

TEST(Progress, ShowsCountsAndEndsItsLineOnceWhenShown) {
  std::ostringstream out;
  {
    Progress p("sweep", "points", 3, &out);
    for (int i = 0; i < 3; ++i) p.tick();
    p.finish();
    p.finish();  // once
  }
  const std::string text = out.str();
  EXPECT_NE(text.find("\rsweep: 3/3 points"), std::string::npos) << text;
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1);
}

TEST(Progress, IsQuietWhenNotShownAndCountsTicksFromThreads) {
  std::ostringstream out;
  Progress quiet("plan", "candidates", 1000, nullptr);
  Progress shown("plan", "candidates", 400, &out);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) quiet.tick(), shown.tick();
    });
  for (auto& t : threads) t.join();
  shown.finish();
  EXPECT_NE(out.str().find("400/400 candidates"), std::string::npos) << out.str();
  // Standard error is not a terminal under ctest: the default constructor shows nothing, whatever the count.
  Progress by_terminal("sweep", "points", 100000);
  by_terminal.tick();
}

}  // namespace
}  // namespace tiersim::app
