#pragma once
// Reporters turn a finished simulation into text. They never run the engine (google/benchmark style).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <optional>
#include <string>
#include <vector>

#include "hardware/profile.hpp"
#include "pipeline/expert_job.hpp"
#include "pipeline/image_job.hpp"
#include "placement/placement.hpp"
#include "runtime/runtime_profile.hpp"
#include "result/run_result.hpp"
#include "trace/trace.hpp"

namespace tiersim::report {

inline constexpr int kJsonSchemaVersion = 1;

// Everything a report says about one simulation.
// PyTorch's caching allocator replaying the framework's own allocations of the run (sim/cli/inference_memory.hpp):
// what torch.cuda.max_memory_allocated/reserved would say for the prefill and the decode steps, or the allocation
// that would fail. `not_modelled` non-empty: no prediction, and why.
// The allocation PyTorch's caching allocator could not make, as torch.OutOfMemoryError names it: the step and
// phase of the loop, the tensor, what it asked for, and what was reserved and allocated then (bytes).
struct AllocationFailure {
  std::uint32_t step = 0;
  std::string phase, tensor;
  double requested = 0, reserved = 0, allocated = 0;
};

struct AllocatorMemory {
  std::string framework;  // what was replayed ("transformers generate, DynamicCache")
  std::string not_modelled;
  double capacity = 0;    // bytes the allocator may reserve (the GPU's memory less its reserve)
  double prefill_allocated = 0, prefill_reserved = 0, decode_allocated = 0, decode_reserved = 0;
  bool iterations = false;  // a diffusion model's: its iterations' peaks instead of prefill's and decode's
  double iteration_allocated = 0, iteration_reserved = 0;
  std::string iteration_label = "iteration";  // what the iterations' peaks are of ("decode": a VAE's decoder calls)
  std::optional<AllocationFailure> oom;
};

struct Context {
  std::string policy;
  std::string strategy;  // the composition: placement + memory + offload, with options
  std::string trace_name;
  const trace::Header* header = nullptr;
  const hw::HardwareProfile* hw = nullptr;
  const runtime::RuntimeProfile* runtime = nullptr;
  bool fresh_lengths = false;
  const placement::Placement* placement = nullptr;
  const result::RunResult* result = nullptr;
  const nlohmann::ordered_json* inputs = nullptr;  // the resolved inputs (JSON only), to re-run from
  const AllocatorMemory* allocator = nullptr;      // absent: the run's framework has no allocator model
  // sim run --image-job: the ComfyUI job around the run's iterations, and its text encoders' seconds.
  const pipeline::ImageJob* image_job = nullptr;
  const pipeline::ImageJobSpec* image_job_spec = nullptr;
  std::vector<std::pair<std::string, double>> image_job_text;  // ("T5", s), ("CLIP", s); ("Qwen2.5-VL", s)
  const pipeline::ExpertJob* expert_job = nullptr;  // sim run --sampler-job
  const pipeline::ExpertJobSpec* expert_job_spec = nullptr;
};

std::string version();  // tiersim's version, e.g. "0.1.0"
std::string git_sha();  // the commit it was built from

void write_console(std::ostream& out, const Context& c);
void write_json(std::ostream& out, const Context& c);

// One row per point of a latency-vs-offload sweep.
struct SweepRow {
  double offload_gb = 0;
  std::string donor;
  bool ok = false;
  std::string error;
  result::Summary summary;
  double vram_peak = 0;
  double offloaded = 0;
  std::string error_band;  // accuracy::Band::short_text() of the point's class
};
// step_seconds is the median decode step, or the median diffusion iteration for a trace without decode.
void write_sweep_csv(std::ostream& out, const std::vector<SweepRow>& rows);

// One row per point of a grid sweep (sim sweep with lists): the axes' values, then the prediction.
struct GridRow {
  std::vector<std::string> values;  // by axis
  bool ok = false;
  std::string error;                // why the point has no prediction (it does not fit)
  result::Summary summary;
  double vram_peak = 0;
  double offloaded = 0;
  std::string error_band;           // accuracy::Band::short_text() of the point's class
  std::string command;              // the sim command that reproduces the point
};
enum class GridFormat { Csv, Jsonl, Markdown };
// CSV as RFC 4180 (CRLF line ends; a field with a comma, quote or line break quoted, quotes doubled),
// JSON lines, or a markdown table; the columns are the axes (by option name without dashes), then
// tps, decode_step_seconds, iteration_seconds (only when some point has diffusion iterations),
// prefill_seconds, vram_peak_bytes, offloaded_bytes, h2d_bytes_per_step,
// peer_bytes_per_step, status (ok or error), error_band (the validation rows' error of the point's class), error
// and command.
// A byte count as every JSON output writes it: whole bytes (the model sums fractional reserves in doubles).
std::int64_t whole_bytes(double bytes);
// One CSV field as RFC 4180 writes it: quoted where it holds a comma, a double quote or a line break, quotes doubled.
std::string csv_field(const std::string& s);
// A table of cells as RFC 4180 CSV or markdown (format Csv or Markdown): the grid's and sim plan's writer.
void write_table(std::ostream& out, GridFormat format, const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows);
void write_grid(std::ostream& out, GridFormat format, const std::vector<std::string>& axes,
                const std::vector<GridRow>& rows);

}  // namespace tiersim::report
