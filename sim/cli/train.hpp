#pragma once
// `sim train`: will one training step of a dense decoder fit a GPU, and what takes its memory (training_memory.hpp).
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "hardware/profile.hpp"
#include "model/model_config.hpp"
#include "model/training/optimizer_offload.hpp"
#include "model/training/training_memory.hpp"
#include "model/training/training_trace.hpp"
#include "replay/run_setup.hpp"
#include "report/reporters.hpp"

namespace tiersim::app {

// The runtime `sim train` prices host costs with when none is named: the one whose `training:` costs were
// calibrated (experiments/validate/train_host_fit.py); the run default (pytorch-eager) has none.
inline constexpr const char* kDefaultTrainingRuntime = "pytorch-hf-h100";

struct TrainReport {
  model::ModelConfig model;
  model::TrainingOptions options;
  model::TrainingMemory memory;
  std::string hw_name;
  int gpu_count = 1;         // the machine's; the step runs on one (data parallelism is not modelled)
  double gpu_available = 0;  // bytes the step may use: the GPU's memory less its reserve
  // PyTorch's caching allocator replaying the loop's allocations (training_allocations.hpp) for three steps on
  // that much memory: the third step's peaks (as torch.cuda.max_memory_allocated/reserved after two warm-up
  // steps), or the allocation that does not fit.
  double allocator_peak_allocated = 0, allocator_peak_reserved = 0;
  std::optional<report::AllocationFailure> oom;
  // With the optimizer offloaded: what its host buffers and state need against the host's memory.
  double host_memory = 0;
  bool host_fits() const { return memory.host_pinned + memory.host_optimizer_state <= host_memory; }
  bool fits() const { return !oom && host_fits(); }
  // A step's time from the event engine (training_trace.hpp), everything resident; 0 when it does not fit.
  double step_seconds = 0, forward_backward_flops = 0;
  // The step's host time by phase and what it is made of; priced with the runtime's training costs where it has
  // them (host_priced), else every op at its inference host cost.
  model::TrainingHostModel host;
  bool host_priced = false;
  std::string runtime_name;
  std::string alloc_conf;
  // --optimizer-offload: what the offloaded optimizer adds to the step (optimizer_offload.hpp), and the backward
  // pass's share of the engine's step it was placed in.
  std::optional<model::OptimizerOffloadTime> offload;
  double backward_seconds = 0;
};

// Reads the model (a dense decoder's config.json: a mixture of experts or a diffusion model is refused, naming
// the file) and computes the step's memory on `hw`.
// `alloc_conf`: PYTORCH_CUDA_ALLOC_CONF for the caching allocator's replay (empty: unset).
TrainReport train_report(const std::string& model_path, const replay::RunSetup& setup, const model::TrainingOptions& o,
                         const std::string& alloc_conf = "");

void write_train_console(std::ostream& out, const TrainReport& r);
nlohmann::ordered_json train_json(const TrainReport& r);

}  // namespace tiersim::app
