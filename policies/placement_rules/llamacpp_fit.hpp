#pragma once
// llama.cpp's --fit (ggml-org/llama.cpp common/fit.cpp common_params_fit_impl, read at 34af94cd9,
// 2026-08-17): before loading, llama-cli and llama-server project each device's memory (model weights,
// context = KV cache, compute buffers) and change what the user left unset until every GPU keeps a
// margin (default 1 GiB) free:
//   1. nothing to do when the projection with the given parameters leaves the margin everywhere;
//   2. the context (if -c was not given: the training context) is reduced, by linear interpolation
//      between the projection at the training context and at the minimum (--fit-ctx, 4096), rounded down
//      to a multiple of 256; on one GPU that ends the fit when the interpolated context fits;
//   3. if -ngl was not given (and no -ts, no -ot): layers are filled back to front, GPU by GPU from the
//      last, by false position between "none" and "all unassigned" on that GPU's projected use;
//      -ngl is the sum, -ts the layers per GPU.
// A failure (-ngl, -ts or -ot already set and still no fit) leaves what was changed so far; llama-cli
// then loads with it anyway. The Mixture-of-Experts steps (expert tensors to system memory first,
// partial layers) are not here: tiersim models dense decoders.
// Everything here is in bytes as int64, as fit.cpp computes, so the interpolation rounds the same way.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tiersim::strategy::llamacpp {

// llama.cpp's projected memory of one device (llama_memory_breakdown_data): bytes.
struct DeviceProjection {
  std::int64_t model = 0, context = 0, compute = 0;
  std::int64_t total() const { return model + context + compute; }
};

// The placement being projected: -ngl (layers + output slots) and the layers per GPU (-ts; empty: the
// default split).
// A tensor buffer override the fit writes (-ot PATTERN=BUFFER): device -1 is the CPU, k is CUDAk.
struct TensorOverride {
  std::string pattern;
  int device = -1;
};

struct Assignment {
  int ngl = 0;
  std::vector<double> tensor_split;
  std::vector<TensorOverride> overrides;  // the fit's for a mixture of experts; empty: the user's -ot, if any
};

// Projection of every GPU for an assignment and a context size (already a multiple of 256).
using Projector = std::function<std::vector<DeviceProjection>(const Assignment&, std::uint32_t n_ctx)>;

struct FitRequest {
  int n_layer = 0;                       // repeating layers (hparams.n_layer); slots = n_layer + 1
  std::uint32_t n_ctx_train = 0;         // the model's training context
  std::uint32_t n_ctx = 0;               // -c; 0: not given (the training context)
  std::uint32_t n_ctx_min = 4096;        // --fit-ctx
  std::optional<int> ngl;                // -ngl if given
  bool tensor_split_given = false;       // -ts given
  bool overrides_given = false;          // -ot given (--cpu-moe and --n-cpu-moe are -ot patterns too)
  bool moe = false;                      // a mixture-of-experts model (hparams.n_expert > 0)
  std::vector<std::int64_t> free;        // bytes free per GPU
  std::vector<std::int64_t> margin;      // --fit-target per GPU, bytes
};

struct FitResult {
  bool success = true;
  std::uint32_t n_ctx = 0;               // as -c after the fit (0: unchanged from "not given")
  std::optional<int> ngl;                // -ngl chosen by the fit (nullopt: not changed)
  std::vector<double> tensor_split;      // -ts chosen (more than one GPU), else empty
  std::vector<TensorOverride> overrides;  // -ot chosen (a mixture of experts: tensors overflowing to the CPU or the next GPU)
  std::vector<DeviceProjection> projected;  // the projection of the result, per GPU
  std::vector<std::string> log;          // what each step decided, in fit.cpp's words
  // A mixture of experts whose fit came to a state fit.cpp reaches only through unsigned wrap-around (a partial-layer
  // count past the layers, on several GPUs): not modelled; the result holds steps 1 and 2 only.
  bool moe_steps_not_modelled = false;
};

// The context llama.cpp allocates for -c N (0: the training context): rounded up to a multiple of 256.
std::uint32_t padded_context(std::uint32_t n_ctx, std::uint32_t n_ctx_train);

FitResult fit(const FitRequest& request, const Projector& project);

}  // namespace tiersim::strategy::llamacpp
