// The error band every answer carries (sim/accuracy/error_band.hpp): the compiled-in table, the fallbacks, and what a
// class with no rows says.
#include <gtest/gtest.h>

#include <stdexcept>

#include "accuracy/error_band.hpp"

namespace tiersim::accuracy {
namespace {

const char* kHeader = "machine_class,workload,strategy,split,rows,mean_abs_error,median_abs_error,p90_abs_error,sets\n";

TEST(ErrorBand, TheCompiledInTableParsesAndHoldsMeasuredDecodeRows) {
  const auto& b = bands();
  ASSERT_FALSE(b.empty());
  bool decode = false;
  for (const auto& r : b) {
    EXPECT_TRUE(r.split == "in" || r.split == "out");
    EXPECT_GT(r.rows, 0);
    decode |= r.machine_class == "measured" && r.workload == "decode" && r.strategy == "*";
  }
  EXPECT_TRUE(decode);
}

TEST(ErrorBand, AMalformedTableIsRefusedNamingTheLine) {
  EXPECT_THROW(parse_bands("machine,workload\n"), std::logic_error);
  try {
    parse_bands(std::string(kHeader) + "measured,decode,resident,in,3,0.1,0.1,0.2,x\nmeasured,decode,peer,maybe,1,0,0,0,x\n");
    FAIL() << "a split that is neither in nor out was accepted";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find(":3:"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_bands(std::string(kHeader) + "measured,decode,resident,in,3,-0.1,0.1,0.2,x\n"), std::logic_error);
  const auto ok = parse_bands(std::string(kHeader) + "measured,decode,resident,in,3,0.125,0.1,0.2,a;b\n");
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].rows, 3);
  EXPECT_DOUBLE_EQ(ok[0].mean_abs, 0.125);
  EXPECT_EQ(ok[0].sets, "a;b");
}

TEST(ErrorBand, AMeasuredKindsDecodeHasItsOwnRows) {
  const Band b = band_for({"measured", "decode", "host-copy"});
  EXPECT_EQ(b.basis, Band::Basis::Exact);
  ASSERT_TRUE(b.in_sample);
  EXPECT_EQ(b.in_sample->strategy, "host-copy");
  EXPECT_NE(b.text().find("in-sample"), std::string::npos);
}

TEST(ErrorBand, AnUnmeasuredGpuIsNotValidatedAndGetsTheMeasuredKindsErrorAsAFloor) {
  const Band b = band_for({"datasheet", "decode", "managed-oversubscribed"});
  EXPECT_EQ(b.basis, Band::Basis::MeasuredKinds);
  ASSERT_TRUE(b.in_sample || b.out_of_sample);
  EXPECT_EQ(b.text().rfind("not validated on a datasheet GPU", 0), 0u) << b.text();
}

TEST(ErrorBand, ADecodeOnMeasuredKindsSaysWhatAnotherHostAdds) {
  // bands.csv's measured-other-host rows: the main decode rows of other hosts with the shipped host costs.
  const Band b = band_for({"measured", "decode", "resident"});
  ASSERT_TRUE(b.other_host);
  EXPECT_EQ(b.other_host->strategy, "resident");
  EXPECT_NE(b.text().find("on another host of this GPU kind"), std::string::npos) << b.text();
  const Band any = band_for({"measured", "decode", "cpu-execute"});  // no such rows of that strategy: every one
  ASSERT_TRUE(any.other_host);
  EXPECT_EQ(any.other_host->strategy, "*");
  EXPECT_FALSE(band_for({"measured", "prefill", "resident"}).other_host);  // decode rows only
  EXPECT_TRUE(band_for({"datasheet", "decode", "host-copy"}).other_host);   // the measured kinds' floor, too
}

TEST(ErrorBand, NothingToGoOnSaysSo) {
  const Band b = band_for({"datasheet", "no-such-workload", "resident"});
  EXPECT_EQ(b.basis, Band::Basis::None);
  EXPECT_FALSE(b.in_sample);
  EXPECT_FALSE(b.out_of_sample);
  EXPECT_EQ(b.text().rfind("not validated", 0), 0u);
}

}  // namespace
}  // namespace tiersim::accuracy
