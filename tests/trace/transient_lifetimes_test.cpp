// When transient values hold memory: started by a write without a read, ended after their last use (or keep).
#include <gtest/gtest.h>

#include "trace/transient_lifetimes.hpp"

namespace tiersim::trace {
namespace {

struct Event {
  std::size_t op;
  std::uint32_t tensor;
  bool operator==(const Event&) const = default;
};

std::vector<Event> events(const std::vector<TransientLifetimes::Event>& list) {
  std::vector<Event> out;
  for (const auto& e : list) out.push_back({e.op, e.tensor});
  return out;
}

TEST(TransientLifetimes, ValuesEndAtTheirLastUseOrKeepAndRestartOnAFreshWrite) {
  Header h;
  const auto w = append_tensor(h, TensorKind::Weight, 1000, 0, "w");
  const auto x = append_tensor(h, TensorKind::Activation, 50, -1, "x");  // a workspace: no lifetime
  const auto y = append_tensor(h, TensorKind::Transient, 400, 0, "y");
  const auto z = append_tensor(h, TensorKind::Transient, 100, 0, "z");
  const auto q = append_tensor(h, TensorKind::Transient, 30, 0, "q");
  Step s;
  append_op(s, OpKind::Gemm, 0, 1, {{w, 1000}, {x, 50}}, {{y, 400}});  // 0: y starts
  append_op(s, OpKind::Norm, 0, 1, {{y, 400}}, {{z, 100}});            // 1: z starts; y's last read
  append_op(s, OpKind::Elementwise, 0, 1, {{z, 100}}, {{z, 100}});     // 2: z in place
  append_op(s, OpKind::Gemm, 0, 1, {{w, 1000}}, {{q, 30}});            // 3: q starts, never read
  s.ops.back().keeps = {z};                                              //    and z is still held
  append_op(s, OpKind::Gemm, 0, 1, {{w, 1000}}, {{y, 400}});           // 4: a new value of y
  append_op(s, OpKind::Elementwise, 0, 1, {{y, 10}}, {{x, 50}});       // 5: y's last (partial) read
  TransientLifetimes l;
  ASSERT_FALSE(derive_transient_lifetimes(h, s, l).has_value());
  EXPECT_EQ(events(l.starts), (std::vector<Event>{{0, y}, {1, z}, {3, q}, {4, y}}));
  EXPECT_EQ(events(l.ends), (std::vector<Event>{{1, y}, {3, z}, {3, q}, {5, y}}));
  // Before op 1: y (400) and z (100) alive; before op 3: z and q; before op 4: y alone.
  EXPECT_DOUBLE_EQ(l.peak, 500);
}

TEST(TransientLifetimes, AUseWithoutAValueIsReportedByItsOp) {
  Header h;
  const auto y = append_tensor(h, TensorKind::Transient, 400, 0, "y");
  const auto z = append_tensor(h, TensorKind::Transient, 100, 0, "z");
  Step s;
  append_op(s, OpKind::Gemm, 0, 1, {}, {{y, 400}});
  append_op(s, OpKind::Gemm, 0, 1, {{y, 400}, {z, 100}}, {});  // reads z, which has no value
  TransientLifetimes l;
  EXPECT_EQ(derive_transient_lifetimes(h, s, l), std::optional<std::size_t>(1));
  s.ops[1].reads.pop_back();
  s.ops[1].keeps = {z};  // nor may it keep one
  EXPECT_EQ(derive_transient_lifetimes(h, s, l), std::optional<std::size_t>(1));
  // Nor may it read what it writes itself (an op's own kernels: reread=), which would continue no value.
  s.ops[1].keeps.clear();
  s.ops[1].reads.push_back({z, 100});
  s.ops[1].writes.push_back({z, 100});
  EXPECT_EQ(derive_transient_lifetimes(h, s, l), std::optional<std::size_t>(1));
  s.ops[1].reads.pop_back();
  ASSERT_FALSE(derive_transient_lifetimes(h, s, l).has_value());
  EXPECT_EQ(events(l.starts), (std::vector<Event>{{0, y}, {1, z}}));
  EXPECT_DOUBLE_EQ(l.peak, 500);
}

}  // namespace
}  // namespace tiersim::trace
