// The run summary every reporter prints: the prompt's processing speed (llama-bench's pp t/s) is the prefill steps'
// tokens over their seconds.
#include <gtest/gtest.h>

#include "result/run_result.hpp"

namespace tiersim::result {
namespace {

TEST(Summary, PromptSpeedIsThePrefillsTokensOverItsSeconds) {
  RunResult r;
  r.steps = {{trace::StepKind::Prefill, 256, 0.5}, {trace::StepKind::Prefill, 256, 0.3},
             {trace::StepKind::Decode, 2, 0.02}, {trace::StepKind::Decode, 2, 0.04}, {trace::StepKind::Decode, 2, 0.03}};
  const Summary s = summarize(r);
  EXPECT_EQ(s.prefill_tokens, 512u);
  EXPECT_DOUBLE_EQ(s.prefill_seconds, 0.8);
  EXPECT_DOUBLE_EQ(s.prefill_tps(), 640.0);
  EXPECT_DOUBLE_EQ(s.tps, 2 / 0.03);  // the decode's, at its median step
  RunResult none;
  none.steps = {{trace::StepKind::Decode, 1, 0.02}};
  EXPECT_DOUBLE_EQ(summarize(none).prefill_tps(), 0.0);  // no prefill: no speed, not a division by zero
}

}  // namespace
}  // namespace tiersim::result
