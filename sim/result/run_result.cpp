#include "result/run_result.hpp"

#include <algorithm>
#include <numeric>

namespace tiersim::result {

Summary summarize(const RunResult& r) {
  Summary s;
  std::vector<std::size_t> decode, iterations;
  for (std::size_t i = 0; i < r.steps.size(); ++i) {
    const StepResult& st = r.steps[i];
    s.total_seconds += st.seconds;
    if (st.kind == trace::StepKind::Prefill) {
      s.prefill_seconds += st.seconds;
      s.prefill_tokens += st.tokens;
      ++s.prefill_steps;
    } else if (st.kind == trace::StepKind::Iteration) {
      iterations.push_back(i);
    } else {
      decode.push_back(i);
    }
  }
  s.decode_steps = decode.size();
  s.iteration_steps = iterations.size();
  auto median_of = [&](const std::vector<std::size_t>& idx) -> const StepResult& {
    // The median step (lower median for an even count, so it is always a real step).
    std::vector<std::size_t> order = idx;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return r.steps[a].seconds < r.steps[b].seconds; });
    return r.steps[order[(order.size() - 1) / 2]];
  };
  if (!iterations.empty()) s.iteration_median = median_of(iterations).seconds;
  if (decode.empty() && !iterations.empty()) {
    s.main_kind = trace::StepKind::Iteration;
    decode = iterations;  // the per-step figures below describe iterations
  }
  if (decode.empty()) return s;
  const StepResult& med = median_of(decode);
  double sum = 0;
  for (std::size_t i : decode) sum += r.steps[i].seconds;
  if (s.main_kind == trace::StepKind::Decode) {
    s.decode_step_median = med.seconds;
    s.decode_step_mean = sum / static_cast<double>(decode.size());
    s.tps = med.seconds > 0 ? med.tokens / med.seconds : 0;
  }
  s.h2d_bytes_per_step = med.h2d_bytes;
  s.d2h_bytes_per_step = med.d2h_bytes;
  s.peer_bytes_per_step = med.peer_bytes;
  s.remote_read_bytes_per_step = med.remote_read_bytes;
  s.faulted_blocks_per_step = med.faulted_blocks;
  s.evicted_blocks_per_step = med.evicted_blocks;
  s.gpu_busy_share = med.seconds > 0 ? med.gpu_busy_seconds / med.seconds : 0;
  return s;
}

}  // namespace tiersim::result
