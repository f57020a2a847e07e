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
  EXPECT_DOUBLE_EQ(q.at(0), 2.5 * 1073741824.0);
  EXPECT_DOUBLE_EQ(q.at(-1), 7.5 * 1073741824.0);
}

TEST(SplitString, BytesModeDefaultsTheRestToTheCpu) {
  const auto hw = hw::resolve_profile("rtx4090");
  const auto q = split_quotas(parse_split("cuda:0,1g", SplitMode::Bytes), SplitMode::Bytes, 3.0 * 1073741824.0, hw);
  EXPECT_DOUBLE_EQ(q.at(-1), 2.0 * 1073741824.0);
}

TEST(SplitString, RatioModeNormalises) {
  const auto hw = hw::resolve_profile("rtx3090x2-nvlink");
  const auto q = split_quotas(parse_split("cuda:0,8%;cuda:1,8%;cpu,4%", SplitMode::Ratio), SplitMode::Ratio, 100.0, hw);
  EXPECT_DOUBLE_EQ(q.at(0), 40.0);
  EXPECT_DOUBLE_EQ(q.at(1), 40.0);
  EXPECT_DOUBLE_EQ(q.at(-1), 20.0);
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
