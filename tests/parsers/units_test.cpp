#include <gtest/gtest.h>

#include <stdexcept>

#include "core/units.hpp"

namespace tiersim::units {
namespace {

TEST(Units, ParsesQuantitiesWithTheirUnits) {
  EXPECT_DOUBLE_EQ(parse_bytes("24 GiB"), 24.0 * 1073741824.0);
  EXPECT_DOUBLE_EQ(parse_bytes("80 GB"), 80e9);
  EXPECT_DOUBLE_EQ(parse_bytes("512 MiB"), 512.0 * 1048576.0);
  EXPECT_DOUBLE_EQ(parse_bandwidth("55 GB/s"), 55e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1.2 TB/s"), 1.2e12);
  EXPECT_DOUBLE_EQ(parse_duration("3.6 us"), 3.6e-6);
  EXPECT_DOUBLE_EQ(parse_duration("2 ms"), 2e-3);
  EXPECT_DOUBLE_EQ(parse_flop_rate("165.2 TFLOP/s"), 165.2e12);
  EXPECT_DOUBLE_EQ(parse_distorch_bytes("2.5gb"), 2.5 * 1073741824.0);
  EXPECT_DOUBLE_EQ(parse_distorch_bytes("512M"), 512.0 * 1048576.0);
  EXPECT_DOUBLE_EQ(parse_distorch_bytes("4g"), 4.0 * 1073741824.0);
}

TEST(Units, RejectsMissingOrUnknownUnits) {
  EXPECT_THROW(parse_bytes("24"), std::invalid_argument);
  EXPECT_THROW(parse_bytes("24 GBs"), std::invalid_argument);
  EXPECT_THROW(parse_bandwidth("fast"), std::invalid_argument);
  EXPECT_THROW(parse_duration("3 fortnights"), std::invalid_argument);
  EXPECT_THROW(parse_flop_rate("nan TFLOP/s"), std::invalid_argument);
  EXPECT_THROW(parse_distorch_bytes("2.5 parsecs"), std::invalid_argument);
}

}  // namespace
}  // namespace tiersim::units

namespace tiersim::units {
namespace {

// "needs 24.00 GiB ... has 24.00 GiB" read as if it fit: two sizes set side by side are written so they differ.
TEST(Units, TwoSizesSideBySideReadApartWhenTheyDiffer) {
  const double gib = 1073741824.0;
  EXPECT_EQ(format_bytes_apart(20 * gib, 24 * gib), std::make_pair(std::string("20.00 GiB"), std::string("24.00 GiB")));
  EXPECT_EQ(format_bytes_apart(24.001 * gib, 24 * gib), std::make_pair(std::string("24.001 GiB"), std::string("24.000 GiB")));
  const auto [a, b] = format_bytes_apart(24 * gib + 3, 24 * gib);  // three bytes over: only bytes tell them apart
  EXPECT_EQ(a, "25769803779 B");
  EXPECT_EQ(b, "25769803776 B");
  EXPECT_EQ(format_bytes_apart(24 * gib, 24 * gib).first, "24.00 GiB");  // equal sizes stay as they are
}

}  // namespace
}  // namespace tiersim::units
