#pragma once
// A Linear of a ComfyUI text encoder, which computes in fp32 (comfy/sd1_clip.py SDClipModel.forward: dtype=float32):
// comfy/ops.py's manual_cast casts the stored weight (and bias) to the input's fp32 on every call, unless stored so;
// a scaled fp8 checkpoint's scaled_fp8_ops Linear then multiplies the smaller operand by its scale (`weight * scale`
// when the weight has fewer elements than the input, else `input * scale`); then the fp32 product. Shared by the T5 /
// CLIP and the language-model encoders' generators.
#include <cstdint>
#include <string>

#include "trace/trace.hpp"

namespace tiersim::model {

struct Fp32Linear {
  trace::TensorAccess stored;  // the weight (and bias) as stored
  std::uint64_t in = 0, out = 0;
  bool bias = false;
};

// Appends the Linear over `rows` rows. `storage`: the stored format's name, which the runtime's gpu_cast prices the
// cast by ("fp16", "bf16", "fp8"; empty: stored in fp32, no cast); `scaled`: a scaled fp8 file; `workspace`: the
// activation tensor the fp32 values are accessed in. The product gives its output features (`rows=`: the rate of an
// fp32 product goes by its rows and them, gpu.fp32_gemm_efficiency); at 8 rows or fewer it is a GEMV.
void append_fp32_linear(trace::Step& step, std::int32_t layer, const Fp32Linear& l, std::uint64_t rows,
                        const std::string& storage, bool scaled, std::uint32_t workspace);

}  // namespace tiersim::model
