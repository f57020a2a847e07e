#pragma once
// A runtime: the framework that issues the work (eager PyTorch + Hugging Face, ComfyUI, llama.cpp)
// and its host-side costs and habits, measured on some host. Apart from the hardware: the same GPU
// runs under different frameworks, and a framework's costs are calibrated from its own runs
// (experiments/validate/). Schema: calib/runtimes/SCHEMA.md. All quantities SI (seconds).
#include <map>
#include <string>

#include "trace/trace.hpp"

namespace tiersim::runtime {

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
  // The framework's own GPU kernels for quantised weights, by weight type (lower case, as GGUF ops carry
  // it in their dtype: q4_k, q8_0): a matrix-vector product's weight bytes per second, and a prompt-sized
  // matrix product's FLOP/s. A GEMV takes at least its weight bytes at the gemv rate (the GPU's memory
  // rate still bounds it from below); a GEMM's FLOPs take the gemm rate instead of the dtype's. Optional.
  std::map<std::string, double> gpu_gemv;
  std::map<std::string, double> gpu_gemm;
};

}  // namespace tiersim::runtime
