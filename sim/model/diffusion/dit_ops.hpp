#pragma once
// The ops of a diffusion transformer's forward as ComfyUI's eager PyTorch runs them (comfy/ldm/flux,
// comfy/ldm/wan at Comfy-Org/ComfyUI a125cd84), appended to one step: the building blocks the FLUX and Wan
// generators share. Kernel launches per op are read from the source, not measured.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/gguf_quant.hpp"
#include "model/model_config.hpp"
#include "model/trace_generator.hpp"
#include "trace/trace.hpp"

namespace tiersim::model {

// Kernel launches per logical op: a Linear is one cuBLAS call with its bias; silu one; LayerNorm then
// x * (1 + scale) + shift three (layer_norm, 1 + scale, addcmul); a gated residual two (multiply, add) or one
// (addcmul); torch's rms_norm one; the rotary embedding of q or k four (flux/math.py apply_rope1, which Wan
// calls: the fp32 cast, a multiply, addcmul_, the cast back; FLUX's own attention() writes it inline with
// five); SDPA and its output's transpose-reshape two; GELU one; a cat one.
struct DitLaunches {
  static constexpr std::uint32_t linear = 1, silu = 1, modulated_norm = 3, gated_residual = 2, rms_norm = 1,
                                 rope = 4, attention = 2, gelu = 1, concat = 1;
};

// The transient values (trace kind `tmp`) a generator's forward names: declared into its header while the forward
// is first built (in the generator's constructor, declare_into), found by name on every later build. A value's bytes
// are what PyTorch allocates for it; the planner derives when it is alive from the ops that use it.
class DitValues {
 public:
  void declare_into(trace::Header* header) { header_ = header; }  // nullptr: declaring is over
  // The tmp tensor `name` of `bytes`: a new name is declared (a logic_error once declaring is over), a known name must
  // come with its bytes.
  std::uint32_t operator()(const std::string& name, std::uint64_t bytes);

 private:
  trace::Header* header_ = nullptr;
  std::map<std::string, std::pair<std::uint32_t, std::uint64_t>> ids_;
};

// A generator's modules as PyTorch allocates them: each tensor's parameters (a Linear's matrix and its bias).
class DitParameters {
 public:
  // Appends a weight tensor (a module) holding `parts` (its parameters' bytes) to `header`; returns its id.
  std::uint32_t add(trace::Header& header, std::int32_t group, std::string name, std::vector<std::uint64_t> parts) {
    std::uint64_t bytes = 0;
    for (const std::uint64_t b : parts) bytes += b;
    const std::uint32_t id = trace::append_tensor(header, trace::TensorKind::Weight, bytes, group, std::move(name));
    if (by_tensor_.size() <= id) by_tensor_.resize(id + 1);
    by_tensor_[id] = std::move(parts);
    return id;
  }
  // A tensor set here as its parameters; any other as one (a norm's weight, a modulation).
  std::vector<std::uint64_t> of(std::uint32_t tensor, const trace::Header& header) const {
    if (tensor < by_tensor_.size() && !by_tensor_[tensor].empty()) return by_tensor_[tensor];
    return {header.tensors[tensor].bytes};
  }

 private:
  std::vector<std::vector<std::uint64_t>> by_tensor_;
};

class DitOps {
 public:
  // `dtype`: the weights' format (fp8 weights are cast to bf16 before each Linear, comfy/ops.py cast_bias_weight; GGUF
  // ones dequantized, gguf_dit.hpp); `values`: the generator's transient values, where the casts' copies go.
  // `gguf_types`: with GGUF weights, each tensor's stored type by id (nullptr for tensors that are not Linears).
  // `scaled`: fp8 weights of a scaled checkpoint (comfy/ops.py scaled_fp8_ops: after the cast, the product's
  // smaller operand, the weight or the input, is multiplied by the weight's scale).
  DitOps(trace::Step& out, const trace::Header& header, WeightDtype dtype, DitValues& values,
         const std::vector<const gguf::QuantType*>* gguf_types = nullptr, bool scaled = false);

  std::uint64_t act_bytes() const { return a_; }  // bytes per activation element
  trace::TensorAccess whole(std::uint32_t tensor) const;
  // The value `name` of `elems` elements in the activations' dtype (or `bytes_per` bytes each, when given), and an
  // access to `elems` such elements of tensor `id`.
  std::uint32_t value(const std::string& name, std::uint64_t elems, std::uint64_t bytes_per = 0) {
    return values_(name, elems * (bytes_per ? bytes_per : a_));
  }
  trace::TensorAccess at(std::uint32_t id, std::uint64_t elems, std::uint64_t bytes_per = 0) const {
    return {id, elems * (bytes_per ? bytes_per : a_)};
  }

  trace::Op& add(trace::OpKind kind, std::int32_t group, std::uint64_t flops, std::vector<trace::TensorAccess> reads,
                 std::vector<trace::TensorAccess> writes, std::uint32_t launches, const char* dtype = nullptr);

  // The ops over named values (tensor ids: transients, or the sampler's workspace), each access its value's real
  // bytes; an op's re-reads of what it wrote itself are its reread bytes.
  // A Linear reading x and writing y (a matrix-vector product up to 8 rows); with fp8 or GGUF weights the bf16 copies
  // of the weight and bias are values of their own, alive from their cast to the product (and a GGUF dequantizer's
  // intermediates, alive in the cast). Returns the product's op (to keep more).
  trace::Op& linear(std::int32_t group, std::uint32_t weight, std::uint64_t rows, std::uint64_t in, std::uint64_t out,
                    std::uint32_t x, std::uint32_t y);
  void rms_norm(std::int32_t group, std::uint32_t weight, std::uint64_t rows, std::uint64_t width, std::uint32_t x,
                std::uint32_t y);
  // LayerNorm of x into `normed`, then addcmul(shift, normed, 1 + scale) into `out` (one op of `launches` kernels).
  trace::Op& modulated_norm(std::int32_t group, std::uint64_t rows, std::uint64_t width, std::uint32_t launches,
                            std::uint32_t x, std::uint32_t normed, std::uint32_t out);
  // apply_rope1 over `elems` elements of x: x.to(fp32) into `f32`, freqs[..., 0] * it into `rotated`, addcmul_ in
  // place, type_as into `out`; the rotary table `freqs` read once per (batch x head): `freq_rereads` times.
  void rope(std::int32_t group, std::uint64_t elems, std::uint32_t launches, std::uint32_t x, std::uint32_t f32,
            std::uint32_t rotated, std::uint32_t out, std::uint32_t freqs, std::uint64_t freq_rereads);
  // SDPA without a mask over q, k, v (`batch` x `heads` x `queries` x `keys`, head_dim wide) into `sdpa`, its
  // transpose-reshape into `out`.
  void attention(std::int32_t group, std::uint64_t batch, std::uint64_t heads, std::uint64_t queries,
                 std::uint64_t keys, std::uint64_t head_dim, std::uint32_t q, std::uint32_t k, std::uint32_t v,
                 std::uint32_t sdpa, std::uint32_t out);

 private:
  trace::Step& out_;
  const trace::Header& header_;
  WeightDtype dtype_;
  DitValues& values_;
  const std::vector<const gguf::QuantType*>* gguf_types_;
  bool scaled_;
  std::uint64_t a_;
};

// A Linear(in, out)'s parameters' bytes: the weight in the model's format, the bias in 16 bits (fp8 checkpoints keep
// biases in bf16), 32 for fp32.
std::vector<std::uint64_t> linear_parameter_bytes(std::uint64_t in, std::uint64_t out, WeightDtype dtype);

// A guidance scale as people write it (6, 3.5).
std::string format_scale(double scale);

// The options an image model's generator checks alike (FLUX, Qwen-Image): sides multiples of 16 from 16 to 16384
// (the VAE's /8 and 2x2 patches), 1-100000 steps, 1-4096 text tokens, 1-4096 images, one frame; InputErrors under
// the option's flag. `model` names the model in the frames message ("FLUX makes images").
void check_image_options(const GenerationOptions& options, const std::string& model);

// ComfyUI's estimate of a diffusion model's working memory for one forward (comfy/model_base.py
// BaseModel.memory_required at a125cd84, its flash/SDPA branch): area x the compute dtype's bytes x 0.01 x the model's
// memory_usage_factor (comfy/supported_models.py), in MiB; `area` = the latent's batch x its spatial (and temporal)
// size, plus every reference latent's (memory_usage_factor_conds). The compute dtype: fp32 4 bytes, anything else 2
// (fp8 and GGUF weights compute in bf16: ComfyUI's manual cast). The generators write it per prompt (one cond at the
// run's batch) as the header's "comfy_memory_per_cond"; ComfyUI's sampler and its model loads scale it.
double comfy_memory_required(double area, WeightDtype dtype, double memory_usage_factor);
// Writes it into a diffusion trace's header.
void set_comfy_memory_per_cond(trace::Header& header, double bytes);
// Writes the most transient bytes `step`'s values hold at once (trace/transient_lifetimes.hpp) into the header's meta
// `transient_peak`, which capacity checks made before a run read: a generator's every iteration is the same forward.
void set_transient_peak(trace::Header& header, const trace::Step& step);

// a * b, or an InputError under `key` saying `what` is too large, beyond 2^62.
std::uint64_t checked_product(std::uint64_t a, std::uint64_t b, const char* key, const char* what);

}  // namespace tiersim::model
