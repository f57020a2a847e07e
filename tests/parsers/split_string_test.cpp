#include <gtest/gtest.h>

#include "core/error.hpp"
#include "hardware/profile_loader.hpp"
#include "policies/placement_rules/split_string.hpp"

namespace tiersim::policies {
namespace {

TEST(SplitString, BytesModeFillsInOrderAndTheWildcardTakesTheRest) {
  const auto hw = hw::resolve_profile("rtx4090");
  const auto e = parse_split("cuda:0,2.5gb;cpu,*", SplitMode::Bytes);
  ASSERT_EQ(e.size(), 2u);
  EXPECT_DOUBLE_EQ(e[0].value, 2.5 * 1073741824.0);
  EXPECT_TRUE(e[1].wildcard);
  const auto q = split_quotas(e, SplitMode::Bytes, 10.0 * 1073741824.0, hw);
  // As DisTorch writes them: fractions of each device's total with 4 decimals, 2.5/24 -> 0.1042 of the
  // 24 GiB card, 7.5/64 -> 0.1172 of the 64 GiB host.
  EXPECT_DOUBLE_EQ(q.at(0), 0.1042 * 24.0 * 1073741824.0);
  EXPECT_DOUBLE_EQ(q.at(-1), 0.1172 * 64.0 * 1073741824.0);
}

TEST(SplitString, BytesModeDefaultsTheRestToTheCpu) {
  const auto hw = hw::resolve_profile("rtx4090");
  const auto q = split_quotas(parse_split("cuda:0,1g", SplitMode::Bytes), SplitMode::Bytes, 3.0 * 1073741824.0, hw);
  EXPECT_DOUBLE_EQ(q.at(-1), 0.0312 * 64.0 * 1073741824.0);  // 2/64 = 0.03125 -> "0.0312"
}

TEST(SplitString, RatioModeNormalises) {
  const auto hw = hw::resolve_profile("rtx3090x2-nvlink");
  const double gib = 1073741824.0;
  const auto q = split_quotas(parse_split("cuda:0,8%;cuda:1,8%;cpu,4%", SplitMode::Ratio), SplitMode::Ratio,
                              10.0 * gib, hw);
  // 40/40/20 of 10 GiB, each as a 4-decimal fraction of its device: 4/24 -> 0.1667, 2/64 -> 0.0312.
  EXPECT_DOUBLE_EQ(q.at(0), 0.1667 * 24.0 * gib);
  EXPECT_DOUBLE_EQ(q.at(1), 0.1667 * 24.0 * gib);
  EXPECT_DOUBLE_EQ(q.at(-1), 0.0312 * 64.0 * gib);
}

TEST(SplitString, FractionModeIsAShareOfEachDevicesMemory) {
  const auto hw = hw::resolve_profile("rtx4090");
  const auto q = split_quotas(parse_split("cuda:0,0.5;cpu,0.25", SplitMode::Fraction), SplitMode::Fraction, 1.0, hw);
  EXPECT_DOUBLE_EQ(q.at(0), 12.0 * 1073741824.0);
  EXPECT_DOUBLE_EQ(q.at(-1), 16.0 * 1073741824.0);
}

TEST(SplitString, RejectsStringsThatDoNotParse) {
  for (const auto& [text, mode] : std::vector<std::pair<std::string, SplitMode>>{
           {"", SplitMode::Ratio},
           {"cuda:0", SplitMode::Ratio},
           {"gpu0,50%", SplitMode::Ratio},
           {"cuda:0,abc%", SplitMode::Ratio},
           {"cuda:0,0%;cpu,0%", SplitMode::Ratio},
           {"cuda:0,50%;cuda:0,50%", SplitMode::Ratio},
           {"cuda:0,-1%", SplitMode::Ratio},
           {"cuda:0,2.5xb;cpu,*", SplitMode::Bytes},
           {"cuda:0,*;cpu,*", SplitMode::Bytes},
           {"cuda:0,1.5;cpu,0.5", SplitMode::Fraction},
           {"cuda:0,;cpu,0.5", SplitMode::Fraction},
           {"cuda:0,0.5;;cpu,0.5", SplitMode::Fraction},
       }) {
    try {
      parse_split(text, mode);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const InputError& e) {
      EXPECT_EQ(e.key(), "--split") << e.what();
    }
  }
}

}  // namespace
}  // namespace tiersim::policies
