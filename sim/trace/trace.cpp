#include "trace/trace.hpp"

#include <array>
#include <string>
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

std::string ConvShape::kernel_name() const {
  std::string s;
  for (int i = two_d() ? 1 : 0; i < 3; ++i) s += (s.empty() ? "" : "x") + std::to_string(kernel[i]);
  return s;
}

double ConvShape::positions(std::uint64_t flops) const {
  const double per = 2.0 * static_cast<double>(volume()) * in * out;
  return per > 0 ? static_cast<double>(flops) / per : 0.0;
}

// "3x3x3" (frames x height x width) or "3x3": each side 1 to 15.
bool parse_conv_kernel(std::string_view s, ConvShape& out) {
  std::uint32_t sides[3] = {0, 0, 0};
  int n = 0;
  while (n < 3) {
    std::size_t x = s.find('x');
    std::string_view side = s.substr(0, x);
    if (side.size() != 1 && side.size() != 2) return false;
    std::uint32_t v = 0;
    for (char c : side) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + static_cast<std::uint32_t>(c - '0');
    }
    if (v < 1 || v > 15) return false;
    sides[n++] = v;
    if (x == std::string_view::npos) break;
    s.remove_prefix(x + 1);
    if (n == 3) return false;
  }
  if (n == 2) {
    out.kernel[0] = 0, out.kernel[1] = sides[0], out.kernel[2] = sides[1];
  } else if (n == 3) {
    out.kernel[0] = sides[0], out.kernel[1] = sides[1], out.kernel[2] = sides[2];
  } else {
    return false;
  }
  return true;
}

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

namespace tiersim::trace {

void assign_components(Header& header, const std::string& part) {
  for (Tensor& t : header.tensors) {
    t.component = part;
    if (t.kind != TensorKind::Weight) continue;
    // the name's segments up to the first that is all digits
    std::size_t start = 0;
    while (start < t.name.size()) {
      const std::size_t dot = t.name.find('.', start);
      const std::string_view seg = std::string_view(t.name).substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      const bool numeric = !seg.empty() && seg.find_first_not_of("0123456789") == std::string_view::npos;
      if (numeric) {
        const std::string path = part + "." + t.name.substr(0, start + seg.size());
        if (valid_component(path)) t.component = path;
        break;
      }
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
  }
}

bool valid_component(std::string_view path) {
  if (path.empty() || path.size() > 256 || path.front() == '.' || path.back() == '.') return false;
  char prev = 0;
  for (const char c : path) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
                    (c == '.' && prev != '.');
    if (!ok) return false;
    prev = c;
  }
  return true;
}

}  // namespace tiersim::trace
