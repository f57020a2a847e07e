#pragma once
// The hardware a prediction is made for: the compute GPU (and identical peer GPUs), the host, the
// host link, an optional peer link, managed memory and an optional disk. The framework's host costs are a runtime
// profile apart from it (runtime/runtime_profile.hpp). Schema: calib/profiles/SCHEMA.md.
// All quantities are SI: bytes, seconds, bytes/s, FLOP/s.
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trace/trace.hpp"

namespace tiersim::hw {

// Time to move `bytes` in one direction of a link from one kind of memory: latency + bytes/bandwidth,
// or, when measured points are given, the measured effective bandwidth interpolated in log(size)
// (and held at the last point's value beyond it).
struct TransferCurve {
  double bandwidth = 0.0;  // asymptotic, B/s
  double latency = 0.0;    // s
  std::vector<std::pair<double, double>> points;  // (bytes, effective B/s), ascending bytes
  // Decomposes a transfer into a fixed latency and a rate for its bytes (used by the shared link).
  std::pair<double, double> latency_and_rate(double bytes) const;
  double seconds(double bytes) const;
};

struct GpuSpec {
  std::string name;
  int count = 1;                     // identical GPUs: cuda:0 computes, the others can be donors
  double memory = 0.0;               // bytes per GPU
  double reserved = 0.0;             // CUDA context + framework, not usable for the model
  double memory_bandwidth = 0.0;
  double memory_efficiency = 1.0;    // share of memory_bandwidth that decode kernels reach
  std::map<std::string, double> compute;  // dtype -> dense FLOP/s
  double compute_efficiency = 1.0;
  // Attention without a mask (a diffusion transformer's SDPA: cuDNN's or flash's kernel) by the op's FLOPs, (FLOPs,
  // share of the dtype's rate), measured: it takes compute_efficiency's place for such an op (log-log interpolated,
  // held beyond the ends). Empty: compute_efficiency.
  std::vector<std::pair<double, double>> attention_efficiency;
  // cuBLAS fp32 matrix products without TF32 (what PyTorch runs for an fp32 matmul: ComfyUI's text encoders),
  // measured (tiersim_calib --only fp32_gemm, M 16 to 2048; fitted by tiersim_fit): the share of the fp32 rate by
  // output elements (rows x features) at whole row tiles, (outputs, share), and the tile's rows. A product of M rows
  // computes ceil(M / tile) tiles of rows: it reaches the curve's share at the padded rows times M over them (134
  // rows pay for 192). It takes compute_efficiency's place for a GEMM computing in fp32 that gives its output features
  // (`rows=`: ComfyUI's text encoders' Linears; fp32_gemm_share). Empty: compute_efficiency.
  std::vector<std::pair<double, double>> fp32_gemm_efficiency;
  double fp32_gemm_row_tile = 0;
  // The share of the fp32 rate a product of m rows and n output features reaches; -1 without a curve.
  double fp32_gemm_share(double m, double n) const;
  // cuDNN convolutions as PyTorch calls them (conv2d/conv3d on NCHW/NCDHW bf16: the layout transposes included), by
  // kernel and channels, each (output positions, share of the dtype's rate), measured (experiments/calibrate/
  // conv_rate.py): a trace op with `conv=` takes its kernel and channels' curve (log-log interpolated, held beyond the
  // ends), or the nearest channel pair's of the same kernel, in compute_efficiency's place. Empty: compute_efficiency.
  struct ConvolutionRate {
    trace::ConvShape shape;
    std::vector<std::pair<double, double>> points;
  };
  std::vector<ConvolutionRate> convolution_efficiency;
  // The share of the dtype's rate a convolution of `positions` output positions reaches: its kernel and channels'
  // curve, else the nearest channel pair's (in log of each channel count) of its kernel; -1 where the profile has
  // none of its kernel.
  double convolution_share(const trace::ConvShape& shape, double positions) const;
  double kernel_min_time = 0.0;      // shortest kernel, s (launch-to-completion on the device)
  // Where the speed-setting values (memory_efficiency, compute_efficiency) come from, the weaker of the two:
  // measured (here, by calib), published (a cited microbenchmark of this card), architecture-prior (derived from a
  // measured or published sibling of its architecture) or datasheet (assumed). Absent from a file: datasheet.
  std::string provenance = "datasheet";
};

// How fast the host's CPU runs llama.cpp's (ggml's) CPU kernels, by thread count: measured by
// experiments/llamacpp/cpu_matmul_bench.cpp and fitted by `tiersim_fit --cpu`. Optional: without it an op
// run on the CPU costs the whole CPU's memory bandwidth and compute whatever the thread count.
struct CpuKernelSpec {
  int cores = 0;  // physical cores: llama.cpp's default thread count (cpu_get_num_math)
  // Streaming read bandwidth by threads, (threads, B/s): what ops without a measured kernel reach.
  std::vector<std::pair<double, double>> read_bandwidth;
  // ggml's matrix-vector product (one token) by weight type (lower case: q4_k, q8_0, f16), (threads,
  // weight bytes per second): dequantisation and dot products, not only memory, bound it.
  std::map<std::string, std::vector<std::pair<double, double>>> gemv;
  // ggml's MUL_MAT_ID over a stack of experts (one token's k experts), by weight type, (threads, bytes per second of
  // the experts used): what an op over an expert's slice of a fused experts tensor takes in place of gemv. Optional.
  std::map<std::string, std::vector<std::pair<double, double>>> gemv_id;
  // A rate of a (threads, rate) curve at `threads`: linear between points, proportional below the
  // first, held at the last point's value beyond it (more threads than measured are assumed to add nothing).
  static double at(const std::vector<std::pair<double, double>>& curve, int threads);
};

struct HostSpec {
  std::string name;
  double memory = 0.0;
  double memory_bandwidth = 0.0;
  double memory_efficiency = 1.0;
  std::map<std::string, double> compute;  // dtype -> FLOP/s for layers run on the CPU
  double compute_efficiency = 1.0;
  double op_overhead = 0.0;          // per op run on the CPU, s
  std::optional<CpuKernelSpec> kernels;
};

struct HostLinkSpec {
  std::string type;                  // pcie
  int generation = 0;
  int width = 0;
  TransferCurve h2d_pinned, d2h_pinned, h2d_pageable, d2h_pageable;
  // A device-to-host copy into freshly allocated pageable memory (PyTorch's tensor.to("cpu"): the host pages are
  // first touched by the copy), measured (experiments/calibrate/fresh_d2h.py): what a framework's unload of a model
  // costs. Absent: d2h_pageable.
  std::optional<TransferCurve> d2h_fresh_pageable;
  double bidirectional = 0.0;        // both directions together, B/s
  const TransferCurve& unload_curve() const { return d2h_fresh_pageable ? *d2h_fresh_pageable : d2h_pageable; }
};

struct PeerLinkSpec {
  std::string type;                  // nvlink or pcie
  TransferCurve transfer;            // one direction
  double bidirectional = 0.0;
};

// CUDA managed memory on this machine (x86 + PCIe: fault-and-migrate). Driver constants default to
// nvidia-uvm's own; costs come from calibration (calib/src/bench_managed.cu).
struct ManagedMemorySpec {
  double va_block = 2.0 * 1048576;        // migration and eviction unit (uvm VA block / root chunk)
  double big_page = 65536;                 // a lone fault migrates at least this much
  double prefetch_threshold = 0.51;        // uvm_perf_prefetch_threshold: share of a block that triggers all of it
  int fault_batch_count = 256;             // uvm_perf_fault_batch_count
  double fault_latency = 0;                // a kernel's first fault: stall until its batch is serviced
  double fault_block_overhead = 0;         // driver work per VA block serviced
  double fault_migration_bandwidth = 0;    // bytes moved by fault-driven migration to the GPU
  double prefetch_to_gpu = 0;              // cudaMemPrefetchAsync to the GPU
  double evict_to_cpu = 0;                 // write-back of evicted blocks (and prefetch to the CPU)
  // Faults past the GPU's memory (calib's oversubscribe rows, a balloon shrinking the GPU; tiersim_fit
  // --oversubscribe). Each fault that must evict takes a root chunk from the LRU head and re-runs its block's
  // service (nvidia-uvm uvm_pmm_gpu.c evict_root_chunk, NV_ERR_MORE_PROCESSING_REQUIRED): evict_block_overhead per
  // evicted block. The evicted chunk's copy back runs on the GPU->CPU copy engine while the next block's fill waits
  // only for its own chunk (uvm_va_block.c's trackers), so write-back overlaps the fault path in part: a written-back
  // byte adds 1 / evict_writeback_bandwidth to the faulting kernel. Optional (0: not measured; evictions then cost
  // nothing more and write-back runs after the faults at evict_to_cpu, one after the other).
  double evict_block_overhead = 0;
  double evict_writeback_bandwidth = 0;
  // Or, measured with the kernels a decode faults with (calib's oversubscribe_decoder: a decoder's weights, one range
  // each, read by cuBLAS's GEMV past a ballooned GPU), the bytes a fault that must evict migrates per second, all its
  // driver work included but its batches' latency and the write-back: the evicting share of a kernel's faults
  // (evicted over faulted blocks) is priced at this rate in place of fault_block_overhead, fault_migration_bandwidth
  // and evict_block_overhead (those GEMVs' faults batch better than the streaming first touch that path is fitted
  // from: 13-15 GB/s against 12.8 on the H200). Optional (0: not measured); not with evict_block_overhead.
  double evicting_fault_bandwidth = 0;
  double remote_read_bandwidth = 0;        // GPU kernels reading host-resident managed memory
  // A GEMV whose input vector is host-resident reads it over the link once per output row: its
  // weight's bytes at this rate. Optional (0: not measured; such reads are then charged once, at
  // remote_read_bandwidth, which under-predicts them by far).
  double gemv_remote_input_bandwidth = 0;
  // cuBLAS GEMVs with a host-resident input vector, per shape (calib's remote_gemv: bf16, operands in managed memory
  // advised PreferredLocation=CPU + AccessedBy): an uncached input is re-read by every thread block, so the time
  // follows cuBLAS's grid for the shape, not the vector's or the weight's bytes (0.9 ms for 2048 x 2048, 5.4 ms for
  // 5120 x 5120, 19 ms for a 151936 x 5120 LM head on the H200). Each row: the input vector's bytes, the weight's
  // bytes, the time with the weight on the GPU, the time with the weight host-resident too. Optional (empty:
  // gemv_remote_input_bandwidth prices the re-reads).
  struct RemoteGemv {
    double input_bytes = 0, weight_bytes = 0, input_seconds = 0, both_seconds = 0;
  };
  std::vector<RemoteGemv> remote_gemv;  // ascending by input_bytes, then weight_bytes
  // Seconds such a GEMV takes: the rows of the measured input size nearest (in ratio) to `input_bytes`, log-log
  // interpolated in the weight's bytes, in proportion to the weight's bytes past the first or last row, and in
  // proportion to the input's bytes over the row's (each block re-reads the whole vector). 0 without rows.
  double remote_gemv_seconds(double input_bytes, double weight_bytes, bool weight_remote) const;
  // Whether remote_gemv has a row of exactly this shape (its time as measured, not from the nearest input width).
  bool remote_gemv_measured(double input_bytes, double weight_bytes) const;
  // A matrix product reads its weight once per tile of its M rows, and a host-resident weight is not cached by the
  // GPU: every re-read crosses the link. [rows, times] points (calib's remote_gemm: cuBLAS bf16 GEMM on managed
  // PreferredLocation=CPU weights, the median over shapes of the time over the time at M <= 64). Optional (empty:
  // every product reads its weight once, as before it was measured).
  std::vector<std::pair<double, double>> remote_gemm_reads;
  // Times a product of `rows` rows reads a host-resident weight: 1 below the first point, log-log interpolated
  // between points, in proportion to the rows beyond the last.
  double gemm_weight_reads(double rows) const;
  // The first GPU write of a fresh cudaMallocManaged range, which the driver populates on that touch: what a
  // per-tensor managed allocator pays for every tensor an op writes. [size, effective rate] points (calib's
  // fresh_touch: the first write's time over a second write's, per size). Optional (empty: not charged).
  std::vector<std::pair<double, double>> fresh_touch;
  // Seconds the first write of a fresh `bytes`-byte range stalls its kernel: its bytes at the rate log-log
  // interpolated at its size (the first point's rate below, the last's beyond). 0 without points.
  double fresh_touch_seconds(double bytes) const;
  // What a framework's new allocation pays at its first write: fresh_touch_seconds for one of a VA block or more;
  // nothing below, since the driver places small managed ranges on blocks that live tensors keep populated (calib
  // fresh_touch's um_fresh_touch_live rows: 8 and 64 KiB beside live ranges write as fast as populated memory, 2 MiB
  // pays in full).
  double fresh_first_write_seconds(double bytes) const { return bytes >= va_block ? fresh_touch_seconds(bytes) : 0.0; }
  // What seed 000's advice adds to one activation under a per-tensor allocator: the whole cycle (cudaMallocManaged,
  // cudaMemAdvise PreferredLocation=CPU then AccessedBy or ReadMostly, a kernel writing the range, one reading it,
  // cudaFree) less the same cycle without advice, by size (calib's advised_cycle, the medians' difference). One table
  // per advice; each optional (empty: not charged).
  struct AdvisedCycle {
    std::vector<std::pair<double, double>> prefer_cpu, prefer_cpu_accessed_by, prefer_cpu_read_mostly;  // [size, s]
    bool empty() const { return prefer_cpu.empty() && prefer_cpu_accessed_by.empty() && prefer_cpu_read_mostly.empty(); }
  };
  AdvisedCycle advised_cycle;
  // Seconds for a `bytes`-byte activation advised PreferredLocation=CPU (with AccessedBy, or ReadMostly, when said):
  // interpolated linearly in the log of the size between points, the first point's below them and the last one's
  // beyond (measured to 256 KiB: a larger activation is charged what 256 KiB cost). 0 without the table.
  double advised_cycle_seconds(bool accessed_by, bool read_mostly, double bytes) const;
  double mapping_fault_cost = 0;           // per block, establishing a remote mapping (PreferredLocation=CPU)
  double alloc_call = 0;                   // host time of one cudaMallocManaged
  double free_call = 0;                    // host time of one cudaFree (which also synchronizes the device)
};

// The disk weights are offloaded to when RAM is short too (accelerate's "disk"): read into pageable host
// memory on each use, then copied to the GPU. Optional: only disk placements need it.
struct DiskSpec {
  double read_bandwidth = 0;  // sequential read of a safetensors file, B/s (page cache cold)
  double read_latency = 0;    // per tensor read (open, seek, first bytes), s
};

struct HardwareProfile {
  std::string name;
  std::string description;
  std::string origin;        // file path or "preset:<name>"
  GpuSpec gpu;
  HostSpec host;
  HostLinkSpec host_link;
  std::optional<PeerLinkSpec> peer_link;
  std::optional<ManagedMemorySpec> managed_memory;
  std::optional<DiskSpec> disk;
  std::map<std::string, std::string> sources;  // section -> where its numbers came from
  std::map<std::string, std::string> extra;    // free-form facts (driver, measured date), reported as-is

  double gpu_rate(const std::string& dtype) const;   // falls back to bf16 then any
  double host_rate(const std::string& dtype) const;
};

}  // namespace tiersim::hw
