#include "trace/trace.hpp"

#include <array>
#include <string_view>

namespace tiersim::trace {
namespace {
constexpr std::array<const char*, 4> kTensorKinds{"weight", "kv", "act", "tmp"};
constexpr std::array<const char*, 10> kOpKinds{"gemm",      "gemv", "attention", "norm",  "elementwise",
                                               "embedding", "rope", "sample",    "other", "router"};
constexpr std::array<const char*, 3> kStepKinds{"prefill", "decode", "iteration"};

template <typename E, std::size_t N>
bool parse_enum(std::string_view s, const std::array<const char*, N>& names, E& out) {
  for (std::size_t i = 0; i < N; ++i) {
    if (s == names[i]) {
      out = static_cast<E>(i);
      return true;
    }
  }
  return false;
}
}  // namespace

const char* to_string(TensorKind k) { return kTensorKinds[static_cast<std::size_t>(k)]; }
const char* to_string(OpKind k) { return kOpKinds[static_cast<std::size_t>(k)]; }
const char* to_string(StepKind k) { return kStepKinds[static_cast<std::size_t>(k)]; }
bool parse_tensor_kind(std::string_view s, TensorKind& out) { return parse_enum(s, kTensorKinds, out); }
bool parse_op_kind(std::string_view s, OpKind& out) { return parse_enum(s, kOpKinds, out); }
bool parse_step_kind(std::string_view s, StepKind& out) { return parse_enum(s, kStepKinds, out); }

std::string Header::default_dtype() const {
  auto it = meta.find("dtype");
  return it == meta.end() ? std::string("bf16") : it->second;
}

std::uint32_t Header::batch() const {
  auto it = meta.find("batch");
  return it == meta.end() ? 1u : static_cast<std::uint32_t>(std::stoul(it->second));
}

std::uint64_t op_bytes(const Op& op) {
  std::uint64_t total = 0;
  for (const auto& a : op.reads) total += a.bytes;
  for (const auto& a : op.writes) total += a.bytes;
  return total + op.reread_bytes;
}

Op& append_op(Step& step, OpKind kind, std::int32_t layer, std::uint64_t flops, std::vector<TensorAccess> reads,
              std::vector<TensorAccess> writes, std::uint32_t launches) {
  Op op;
  op.kind = kind;
  op.layer = layer;
  op.flops = flops;
  op.reads = std::move(reads);
  op.writes = std::move(writes);
  op.launches = launches;
  step.ops.push_back(std::move(op));
  return step.ops.back();
}

std::uint32_t append_tensor(Header& header, TensorKind kind, std::uint64_t bytes, std::int32_t layer, std::string name) {
  Tensor t;
  t.id = static_cast<std::uint32_t>(header.tensors.size());
  t.kind = kind;
  t.bytes = bytes;
  t.layer = layer;
  t.name = std::move(name);
  header.tensors.push_back(std::move(t));
  return header.tensors.back().id;
}

}  // namespace tiersim::trace
