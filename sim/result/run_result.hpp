#pragma once
// What a simulation produces, whichever engine made it. Metric definitions: README "Metrics".
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trace/trace.hpp"

namespace tiersim::result {

struct StepResult {
  trace::StepKind kind = trace::StepKind::Decode;
  std::uint32_t tokens = 0;
  double seconds = 0;        // from the host starting the step to the host starting the next one
  double h2d_bytes = 0;      // host -> compute GPU over the host link (weights and activations)
  double d2h_bytes = 0;      // compute GPU -> host
  double peer_bytes = 0;     // peer GPU -> compute GPU
  double gpu_busy_seconds = 0;  // compute stream busy (kernels and on-stream copies)
  // Managed memory (unified-memory policies).
  double remote_read_bytes = 0;   // read by kernels over the host link without migrating
  std::uint64_t faulted_blocks = 0, evicted_blocks = 0;
};

// Totals of the managed-memory driver over a run.
struct ManagedTotals {
  bool enabled = false;
  std::uint64_t faulted_blocks = 0, fault_batches = 0, mapping_faults = 0, evicted_blocks = 0;
  double migrated_bytes = 0, written_back_bytes = 0, remote_bytes = 0, prefetched_bytes = 0;
  double peak_resident_bytes = 0;
  // The last step's working set on the GPU (managed::ManagedMemory::step_working_bytes) and the GPU memory managed
  // blocks may take: within kCapacityEdge of each other the run is at the capacity edge (event engine; 0: not known).
  double working_set_bytes = 0, capacity_bytes = 0;
  // Distinct host-input GEMV shapes priced from measured rows of that shape / from the nearest measured input width
  // (managed::GemvShapeCoverage).
  std::uint64_t gemv_shapes_measured = 0, gemv_shapes_from_nearest = 0;
  // At the capacity edge, where a real run is neither the fit nor the thrash tiersim predicts: the GPU's memory for
  // managed blocks within kCapacityEdge of the working set. Measured on the H200 (results/validation/
  // um-oversubscription rows_8b_edge.jsonl, Qwen3-8B mode 1, tiersim's 14.12 GiB working set against the memory
  // left): 2.3% and 1.3% more memory ran every token fast, 0.2% more mostly fast with two slow tokens in seven, 0.9%
  // less alternated slow and fast tokens, 1.8% less ran every token slow (docs/managed-memory.md). Never when either
  // is unknown (0).
  static constexpr double kCapacityEdge = 0.01;
  bool at_capacity_edge() const {
    return working_set_bytes > 0 && capacity_bytes > 0 && std::abs(capacity_bytes / working_set_bytes - 1.0) <= kCapacityEdge;
  }
};

struct RunResult {
  std::string engine;        // "event" or "analytic"
  std::vector<StepResult> steps;
  std::map<std::string, double> peak_bytes;   // device name -> peak bytes resident (cuda:0 incl. reserve)
  // GPU name -> the most transient activation bytes (trace kind tmp) alive at once on it in any step (in peak_bytes
  // too; reported with the activations). Absent where none.
  std::map<std::string, double> transient_peak_bytes;
  std::uint64_t events = 0;  // events processed (event engine)
  ManagedTotals managed;
};

// Summary statistics used by every reporter.
struct Summary {
  // The steps the per-step figures describe: decode tokens if the trace has any, else diffusion
  // iterations (then tps is 0 and iteration_median is set).
  trace::StepKind main_kind = trace::StepKind::Decode;
  std::size_t prefill_steps = 0;
  std::size_t iteration_steps = 0;
  double iteration_median = 0;    // s per diffusion iteration (median)
  double decode_step_median = 0;  // s
  double decode_step_mean = 0;
  double prefill_seconds = 0;     // sum of prefill steps
  std::uint64_t prefill_tokens = 0;  // the prefill steps' tokens (the batch's prompts)
  // Prompt processing speed (llama-bench's pp t/s): prefill tokens over prefill seconds; 0 without a prefill.
  double prefill_tps() const { return prefill_seconds > 0 ? static_cast<double>(prefill_tokens) / prefill_seconds : 0; }
  double tps = 0;                 // batch tokens per second at the median decode step
  double total_seconds = 0;
  std::size_t decode_steps = 0;
  double h2d_bytes_per_step = 0;  // at the median decode step
  double d2h_bytes_per_step = 0;
  double peer_bytes_per_step = 0;
  double gpu_busy_share = 0;      // compute-stream busy / step time, at the median decode step
  double remote_read_bytes_per_step = 0;
  std::uint64_t faulted_blocks_per_step = 0, evicted_blocks_per_step = 0;
};
Summary summarize(const RunResult& r);

}  // namespace tiersim::result
