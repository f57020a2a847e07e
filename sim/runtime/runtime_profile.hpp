#pragma once
// A runtime: the framework that issues the work (eager PyTorch + Hugging Face, ComfyUI, llama.cpp)
// and its host-side costs and habits, measured on some host. Apart from the hardware: the same GPU
// runs under different frameworks, and a framework's costs are calibrated from its own runs
// (experiments/validate/). Schema: calib/runtimes/SCHEMA.md. All quantities SI (seconds).
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/rate_curve.hpp"
#include "trace/trace.hpp"

namespace tiersim::runtime {

// Host costs of a training step (sim train), beyond what the inference costs above price: autograd recording in
// the forward pass, the autograd engine's backward nodes, non-reentrant gradient checkpointing, and the optimizer's
// Python and foreach dispatch. Seconds; calibrated from calibration models' training steps
// (experiments/validate/train_host_fit.py).
struct TrainingHostCosts {
  std::string source;
  double forward_scale = 1.0;           // a forward op's host cost over its inference price, weights trained
  double autocast_forward_scale = 1.0;  // the same under fp32 weights with bf16 autocast (the casts included)
  double backward_per_op = 0.0;         // each backward op (tiersim's trace: a Linear's backward is two ops)
  double forward_per_step = 0.0;        // once a step beyond the ops: the model call's own work, the loss's Python
  double backward_per_step = 0.0;       // once a step: loss.backward()'s start and the autograd engine's set-up
  double checkpoint_forward_per_layer = 0.0;   // a checkpointed layer's wrapper in the forward pass
  double checkpoint_backward_per_layer = 0.0;  // its recomputation's wrapper in backward (the ops are priced as forward)
  // optimizer.step() and zero_grad(set_to_none=True): per_step + calls x per_call + tensors x (per_tensor +
  // calls x per_tensor_call), calls = the optimizer's foreach passes (AdamW 8, SGD 1, SGD with momentum 3).
  double optimizer_per_step = 0.0, optimizer_per_call = 0.0, optimizer_per_tensor = 0.0,
         optimizer_per_tensor_call = 0.0;
  // Optional (< 0: absent, each op of an adapter priced as above): the host time of one LoRA-adapted projection's
  // adapter branch (peft's cast, A, B, scaling, sum, cast back) in the forward pass, and of its backward.
  double lora_forward_per_module = -1.0, lora_backward_per_module = -1.0;
};

// The CPU side of an optimizer offloaded to the host (torchao's CPUOffloadOptimizer, torchao/optim/cpu_offload.py:
// step() runs, parameter after parameter, torch.optim.AdamW(fused=True) on the pinned host copy and queues the copy
// back): per offloaded tensor (the event wait, the optimizer call, the copy's issue) and per element by the
// parameter's dtype. Seconds; calibrated on synthetic parameters (experiments/validate/cpu_offload_fit.py).
struct CpuOffloadCosts {
  std::string source;
  double per_tensor = 0.0;
  double per_element_fp32 = 0.0, per_element_bf16 = 0.0;
};

// The framework's matrix-vector kernel priced by its grid (llama.cpp's MMVQ, ggml-cuda/mmvq.cu: one thread block per
// output row; the trace's `blocks` gives the rows): a fixed time (ggml's kernel that quantizes the input to q8_1,
// and the product's start), then the rows at the rate a row of that many bytes streams, which grows with the row's
// length (the reduction). Measured by experiments/llamacpp/cpu_matmul_bench --backend gpu over the models' shapes.
struct GemvRowKernel {
  double fixed = 0;                                  // s
  std::vector<std::pair<double, double>> row_rates;  // (bytes per row, B/s), ascending bytes per row
  // Seconds for `rows` rows of `row_bytes` each: the rate log-interpolated between points, held beyond them.
  double seconds(double rows, double row_bytes) const {
    if (row_rates.empty() || !(rows > 0) || !(row_bytes > 0)) return fixed;
    return fixed + rows * row_bytes / log_interpolated_rate(row_rates, row_bytes);
  }
};

// The framework's prompt-sized matrix product priced by its shape (llama.cpp's MMQ, ggml-cuda/mmq.cuh: tiles of the
// weight's rows, with a stream-k fix-up pass that costs the same whatever the rows): a fixed time, then the FLOPs at
// `rate` as if the matrix had `extra_rows` more rows (so a matrix of few rows runs far below the rate). Measured by
// experiments/llamacpp/cpu_matmul_bench --backend gpu --batch 512 over the models' shapes.
struct GemmRowsKernel {
  double fixed = 0;       // s
  double rate = 0;        // FLOP/s
  double extra_rows = 0;  // rows
  double seconds(double flops, double rows) const { return fixed + flops * (rows + extra_rows) / rows / rate; }
};

struct RuntimeProfile {
  std::string name;
  std::string description;
  std::string origin;        // file path or "preset:<name>"
  std::string source;        // where the numbers came from
  double per_launch = 0.0;   // host time to issue one kernel (Python + dispatcher + launch)
  // Optional: host time to issue one op of a kind, for ops without a measured host time; it replaces
  // launches x per_launch for that kind. A `linear` entry prices gemv and gemm alike: eager PyTorch's
  // host cost of a Linear call does not depend on the batch.
  std::map<trace::OpKind, double> per_op;
  double per_copy = 0.0;     // host time to issue one weight copy on demand
  double per_prefetch = 0.0; // host time to issue one copy ahead of use (stream switch, event, hand-over)
  double per_step = 0.0;     // host time per step outside the ops (sampling, loop, sync)
  // GPU time the framework adds to each copy from another GPU, beyond the link's curve (PyTorch orders
  // a cross-device copy with a two-way barrier between the two devices' streams).
  double peer_copy_sync = 0.0;
  // Whether a copy from another GPU issued ahead of use runs alongside the compute stream's kernels.
  bool peer_copy_overlaps_compute = true;
  // Host time of the first attention call at a sequence length the process has not run before (eager
  // PyTorch's cuDNN SDPA builds an execution plan per shape); charged once per step with --lengths fresh.
  double new_length_attention = 0.0;
  // Host time of one op run on the CPU (a ggml graph node: the thread pool's barrier and dispatch);
  // < 0: the hardware profile's host.op_overhead. Optional.
  double per_cpu_op = -1.0;
  // GPU time floor of one kernel under this runtime (< 0: the hardware's gpu.kernel_min_time, measured
  // for kernels launched one by one). llama.cpp replays its decode graph with CUDA graphs, where
  // back-to-back small kernels take less. Optional.
  double kernel_floor = -1.0;
  // The GPU's own time between kernels the host launches one by one (no CUDA graph), added to each launch's
  // kernel time: the launch latency a graph replay hides (llama.cpp with GGML_CUDA_DISABLE_GRAPHS). Optional, 0.
  double gpu_launch_gap = 0.0;
  // The framework's own GPU kernels for quantised weights, by weight type (lower case, as GGUF ops carry
  // it in their dtype: q4_k, q8_0): a matrix-vector product's weight bytes per second, and a prompt-sized
  // matrix product's FLOP/s. A GEMV takes at least its weight bytes at the gemv rate (the GPU's memory
  // rate still bounds it from below); a GEMM's FLOPs take the gemm rate instead of the dtype's. Optional.
  std::map<std::string, double> gpu_gemv;
  std::map<std::string, double> gpu_gemm;
  // The same for the framework's kernel over a stack of experts (llama.cpp's MUL_MAT_ID: one launch for every expert
  // a batch routed to, its tokens gathered per expert), by weight type: it prices a GEMV or GEMM whose weight is a
  // byte range of a tensor (one expert's slice of a fused experts tensor) in place of gpu_gemv / gpu_gemm. Optional.
  std::map<std::string, double> gpu_gemv_id;
  // The same matrix-vector kernel by weight type priced by its rows (GemvRowKernel): for a GEMV whose trace op gives
  // its grid (`blocks`, one per output row) it replaces gpu_gemv. Optional.
  std::map<std::string, GemvRowKernel> gpu_gemv_rows;
  std::string gpu_gemv_rows_source;
  // The prompt-sized product by weight type priced by its shape (GemmRowsKernel): for a GEMM whose trace op gives its
  // weight's rows (`rows`) it replaces gpu_gemm. Optional.
  std::map<std::string, GemmRowsKernel> gpu_gemm_rows;
  std::string gpu_gemm_rows_source;
  std::map<std::string, double> gpu_gemm_id;
  // Where a weight type has no gpu_gemm_id rate: a prompt-sized product over an expert's slice at this share of the
  // rate a dense matrix of its type would take (0 < share <= 1; 0: not set, the dense rate). A runtime without
  // measured kernels carries the ratio measured on another GPU (the assumed `llamacpp` runtime). Optional.
  double gpu_gemm_id_share = 0;
  // The framework's cast of a weight from its storage type to the compute dtype (ComfyUI's fp8 weights cast to bf16
  // before each Linear; ComfyUI-GGUF's dequantization of GGUF blocks: "q4_k", ...), by storage type ("fp8"): the
  // kernels' rate as a share of the GPU's memory rate, which the
  // cast's bytes (read and written) then take. Optional; without it a cast runs at the memory rate.
  std::map<std::string, double> gpu_cast;
  std::string gpu_cast_source;
  // The bytes per second one thread block of the framework's block reductions streams (PyTorch's GroupNorm
  // statistics, RowwiseMomentsCUDAKernel: one block per (sample, group), each reading its group serially). An op
  // with trace `blocks=N` moves its bytes at most at N times this. Optional; 0: the grid is not priced.
  double gpu_block_rate = 0;
  std::string gpu_block_rate_source;
  // Optional: training's host costs; without it sim train prices every op at its inference cost.
  std::optional<TrainingHostCosts> training;
  // Optional: the CPU optimizer of sim train --optimizer-offload; without it that option is refused.
  std::optional<CpuOffloadCosts> cpu_offload;
};

}  // namespace tiersim::runtime
