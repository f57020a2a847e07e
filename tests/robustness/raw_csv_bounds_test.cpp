// The raw calibration CSV: every number is bounded, so that no count is converted out of range and
// every rate the fit computes is finite.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "fit/raw_csv.hpp"

namespace tiersim::calib {
namespace {

const std::string kHeader = "benchmark,variant,work,work_unit,repeats,median_s,min_s,max_s\n";

void expect_error(const std::string& row, const std::string& key, const std::string& says) {
  try {
    parse_raw_csv("# gpu: x\n" + kHeader + row + "\n", "raw.csv");
    FAIL() << "accepted " << row;
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "raw.csv");
    EXPECT_EQ(e.line(), 3u) << e.what();
    EXPECT_EQ(e.key(), key) << e.what();
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

// repeats=1e300 was converted to int out of range (undefined behaviour; a float-cast-overflow trap
// under the sanitizers). Found by hand, kept in tests/fuzz/regressions/raw_csv/.
TEST(RawCsvBounds, RepeatsAreAWholeNumberInRange) {
  expect_error("b,v,1,bytes,1e300,1,1,1", "repeats", "a whole number from 1 to 1e9");
  expect_error("b,v,1,bytes,2.5,1,1,1", "repeats", "whole number");
}

TEST(RawCsvBounds, RatesStayFinite) {
  expect_error("b,v,1e308,bytes,3,1e-300,0,1", "work", "from 0 to 1e18");
  expect_error("b,v,1,bytes,3,1e-300,0,1", "median_s", "from 1e-12 to 1e6 seconds");
  expect_error("b,v,1,bytes,3,0,0,1", "median_s", "from 1e-12");
  const auto m = parse_raw_csv(kHeader + "b,v,365072220160,bytes,20,4.869120121e-04,4.8e-04,4.9e-04\n", "raw.csv");
  ASSERT_EQ(m.rows.size(), 1u);
  EXPECT_EQ(m.rows[0].repeats, 20);
}

}  // namespace
}  // namespace tiersim::calib
