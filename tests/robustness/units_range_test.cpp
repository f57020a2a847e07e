// Units: every parsed quantity is finite and within a stated physical range.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "core/units.hpp"

namespace tiersim::units {
namespace {

template <typename Parse>
void expect_out_of_range(Parse parse, const std::string& text, const std::string& range) {
  try {
    const double v = parse(text);
    FAIL() << text << " gave " << v;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("out of range (accepted: " + range + ")"), std::string::npos) << e.what();
  }
}

// "1e308 TiB" became inf (then --json printed null); "1e-300 GB/s" a rate that made durations
// overflow SimTime.
TEST(UnitsRange, NonFiniteAndAbsurdQuantitiesAreRejectedWithTheRange) {
  expect_out_of_range(parse_bytes, "1e308 TiB", "0, or 1 B to 1 PiB");
  expect_out_of_range(parse_bytes, "1.1e15 KB", "0, or 1 B to 1 PiB");
  expect_out_of_range(parse_bytes, "-1 GB", "0, or 1 B to 1 PiB");
  expect_out_of_range(parse_bandwidth, "1e-300 GB/s", "0, or 1 KB/s to 1 PB/s");
  expect_out_of_range(parse_bandwidth, "1e300 GB/s", "0, or 1 KB/s to 1 PB/s");
  expect_out_of_range(parse_duration, "1e300 s", "0, or 1 ps to 1 hour");
  expect_out_of_range(parse_duration, "1e-300 s", "0, or 1 ps to 1 hour");
  expect_out_of_range(parse_flop_rate, "1e-300 TFLOP/s", "0, or 1 MFLOP/s to 1000 PFLOP/s");
  expect_out_of_range(parse_distorch_bytes, "1e308tb", "0, or 1 B to 1 PiB");
}

TEST(UnitsRange, NormalValuesAndZeroAreExactAsBefore) {
  EXPECT_EQ(parse_bytes("0 B"), 0.0);
  EXPECT_EQ(parse_bytes("1024 TiB"), 1125899906842624.0);
  EXPECT_EQ(parse_bytes("79.1787 GiB"), 79.1787 * 1073741824.0);
  EXPECT_EQ(parse_bandwidth("55.51 GB/s"), 55.51 * 1e9);
  EXPECT_EQ(parse_bandwidth("0 GB/s"), 0.0);
  EXPECT_EQ(parse_duration("9.606 us"), 9.606 * 1e-6);
  EXPECT_EQ(parse_duration("0 us"), 0.0);
  EXPECT_EQ(parse_flop_rate("1978.9 TFLOP/s"), 1978.9 * 1e12);
  EXPECT_EQ(parse_distorch_bytes("2.5gb"), 2.5 * 1073741824.0);
  EXPECT_TRUE(std::isfinite(parse_bytes("1e15 B")));
}

}  // namespace
}  // namespace tiersim::units
