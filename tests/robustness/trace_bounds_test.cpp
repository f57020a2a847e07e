// Trace reader bounds: op durations, sizes, FLOPs and launches are held to physical ranges, named
// with file, line and key, so that nothing past them reaches the engine's time arithmetic.
#include <gtest/gtest.h>

#include <sstream>

#include "core/error.hpp"
#include "support/run_sim.hpp"
#include "trace/trace_reader.hpp"

namespace tiersim::robustness {
namespace {

using testing::run_sim;
using testing::scratch_file;
using testing::SimRun;

const std::string kHead =
    "tiersim-trace 1\n"
    "tensor 0 weight 1000 0 w0\n"
    "step decode tokens=1\n";

std::string read_all(const std::string& text) {
  trace::TraceReader r(std::make_unique<std::istringstream>(text), "t.trace");
  trace::Step s;
  while (r.next(s)) {
  }
  return "ok";
}

void expect_rejected(const std::string& text, std::size_t line, const std::string& key, const std::string& says) {
  try {
    read_all(text);
    FAIL() << "accepted:\n" << text;
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "t.trace");
    EXPECT_EQ(e.line(), line) << e.what();
    EXPECT_EQ(e.key(), key) << e.what();
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(TraceBounds, OpDurationsAreBoundedWithTheRangeInTheMessage) {
  EXPECT_EQ(read_all(kHead + "op gemv layer=0 read=0 gpu_us=1e9 host_us=0\nend\n"), "ok");
  expect_rejected(kHead + "op gemv layer=0 read=0 gpu_us=2e13\nend\n", 4, "gpu_us", "0 to 1e9 (1000 s)");
  expect_rejected(kHead + "op gemv layer=0 read=0 gpu_us=1e13\nop gemv layer=0 gpu_us=1e13\nend\n", 4, "gpu_us",
                  "0 to 1e9");
  expect_rejected(kHead + "op gemv layer=0 host_us=1000000001\nend\n", 4, "host_us", "0 to 1e9");
}

TEST(TraceBounds, SizesFlopsAndLaunchesAreBounded) {
  expect_rejected("tiersim-trace 1\ntensor 0 weight 18446744073709551615 0 w0\nend\n", 2, "tensor", "1 PiB");
  std::string many = "tiersim-trace 1\n";
  for (int i = 0; i < 65; ++i) many += "tensor " + std::to_string(i) + " weight 1125899906842624 0 w\n";
  expect_rejected(many + "end\n", 66, "tensor", "64 PiB");  // the 65th tensor, on line 66
  expect_rejected(kHead + "op gemm layer=0 flops=18446744073709551615\nend\n", 4, "flops", "10^18");
  expect_rejected(kHead + "op gemm layer=0 launches=4294967295\nend\n", 4, "launches", "0 to 1,000,000");
}

// Through the engine: a single gpu_us=2e13 used to be converted to uint64 out of range (undefined
// behaviour, trapped as float-cast-overflow by ./setup.sh test --sanitize) and printed a faster
// prediction; two of 1e13 ended in "event scheduled in the past" (an abort).
TEST(TraceBounds, AbsurdOpDurationsEndInAnInputErrorFromTheCommand) {
  for (const char* ops : {"op gemv layer=0 read=0 gpu_us=2e13\n",
                          "op gemv layer=0 read=0 gpu_us=1e13\nop gemv layer=0 read=0 gpu_us=1e13\n"}) {
    const std::string path = scratch_file("huge_gpu_us.trace", kHead + ops + "end\n");
    const SimRun r = run_sim("--trace " + path + " --policy resident");
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find(":4: 'gpu_us': must be a number of microseconds from 0 to 1e9"), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace tiersim::robustness
