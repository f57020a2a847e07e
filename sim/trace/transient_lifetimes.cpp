#include "trace/transient_lifetimes.hpp"

#include <algorithm>
#include <cstdint>

namespace tiersim::trace {

std::optional<std::size_t> derive_transient_lifetimes(const Header& header, const Step& step, TransientLifetimes& out) {
  const std::size_t n = step.ops.size();
  out.starts.clear();
  out.ends.clear();
  out.peak = 0;
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  // By tensor: the op that last used its current value (kNone: no value yet in this step).
  std::vector<std::size_t> last_use(header.tensors.size(), kNone);
  std::vector<std::uint32_t> touched;  // transients with a value, to release at the step's end
  auto is_transient = [&](std::uint32_t t) { return header.tensors[t].kind == TensorKind::Transient; };
  auto release = [&](std::uint32_t t) { out.ends.push_back({last_use[t], t}); };
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = step.ops[i];
    auto use = [&](std::uint32_t t) {
      if (last_use[t] == kNone) return false;  // a read or keep needs a value
      last_use[t] = i;
      return true;
    };
    for (const auto& r : op.reads)
      if (is_transient(r.tensor) && !use(r.tensor)) return i;
    for (const std::uint32_t t : op.keeps)
      if (!use(t)) return i;
    for (const auto& w : op.writes) {
      const std::uint32_t t = w.tensor;
      if (!is_transient(t) || last_use[t] == i) continue;  // in place (read or kept by this op), or written twice
      if (last_use[t] != kNone) release(t);  // a new value: the old one ended at its last use
      else touched.push_back(t);
      last_use[t] = i;
      out.starts.push_back({i, t});
    }
  }
  for (const std::uint32_t t : touched) release(t);
  std::stable_sort(out.ends.begin(), out.ends.end(), [](const auto& a, const auto& b) { return a.op < b.op; });
  // The most alive at once: before each op its starts join what is alive; after it its ends leave.
  double live = 0;
  std::size_t s = 0, e = 0;
  for (std::size_t i = 0; i < n; ++i) {
    for (; s < out.starts.size() && out.starts[s].op == i; ++s) live += static_cast<double>(header.tensors[out.starts[s].tensor].bytes);
    out.peak = std::max(out.peak, live);
    for (; e < out.ends.size() && out.ends[e].op == i; ++e) live -= static_cast<double>(header.tensors[out.ends[e].tensor].bytes);
  }
  return std::nullopt;
}

}  // namespace tiersim::trace
