#include "model/text_encoder/fp32_linear.hpp"

namespace tiersim::model {

namespace {
constexpr std::uint64_t kF32 = 4;
}

void append_fp32_linear(trace::Step& step, std::int32_t layer, const Fp32Linear& l, std::uint64_t rows,
                        const std::string& storage, bool scaled, std::uint32_t workspace) {
  using trace::OpKind;
  const std::uint64_t matrix = l.in * l.out, params = matrix + (l.bias ? l.out : 0);
  trace::TensorAccess weight = l.stored;
  trace::TensorAccess input{workspace, kF32 * rows * l.in};
  if (!storage.empty()) {
    // cast_bias_weight: the weight (and bias) copied to fp32, the input's dtype.
    trace::Op& cast = trace::append_op(step, OpKind::Elementwise, layer, params, {weight}, {{workspace, kF32 * params}},
                                       l.bias ? 2 : 1);
    cast.dtype = storage;
    weight = {workspace, kF32 * params};
  }
  if (scaled) {
    const bool weight_side = matrix < rows * l.in;
    const std::uint64_t n = weight_side ? matrix : rows * l.in;
    trace::append_op(step, OpKind::Elementwise, layer, n, {{workspace, kF32 * n}}, {{workspace, kF32 * n}}, 1);
    (weight_side ? weight : input) = {workspace, kF32 * n};
  }
  trace::append_op(step, rows <= 8 ? OpKind::Gemv : OpKind::Gemm, layer, 2 * rows * matrix, {weight, input},
                   {{workspace, kF32 * rows * l.out}})
      .rows = static_cast<std::uint32_t>(l.out);
}

}  // namespace tiersim::model
