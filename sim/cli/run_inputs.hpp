#pragma once
// Everything one prediction depends on, resolved: the trace (a file, or a model description with its
// generation settings), the hardware and runtime numbers actually used, the strategy's parts with their
// options, the engine and the run options. A result's JSON carries it as "inputs", and `sim run
// --config RESULT.json` reads it back to re-run the prediction to the same bytes.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/simulation.hpp"
#include "hardware/profile.hpp"
#include "policies/strategy/strategy.hpp"
#include "runtime/runtime_profile.hpp"

namespace tiersim::app {

// `sim run --image-job`: the whole ComfyUI job of a FLUX or Qwen-Image run (cli/image_job_run.hpp); `--video-job` a
// Wan video's (cli/expert_job_run.hpp).
struct ImageJobOptions {
  // The text encoder's checkpoint, as ComfyUI's files are published: FLUX's T5-XXL and Wan's umT5-XXL fp16
  // (t5xxl_fp16, umt5_xxl_fp16: the default) or fp8 (*_fp8_e4m3fn); Qwen-Image's Qwen2.5-VL fp8_scaled
  // (qwen_2.5_vl_7b_fp8_scaled: the default) or bf16 (qwen_2.5_vl_7b). See job_text_encoder_dtypes.
  std::string text_encoder_dtype = "fp16";
  bool scaled() const { return text_encoder_dtype == "fp8_scaled"; }
  model::WeightDtype weight_dtype() const { return model::parse_weight_dtype(scaled() ? "fp8" : text_encoder_dtype); }
};

// The text encoder formats the job of the model at `model_path` reads (its family's published checkpoints), the
// default first: "fp16, fp8" for FLUX and Wan, "fp8_scaled, bf16" for Qwen-Image.
std::vector<std::string> job_text_encoder_dtypes(const std::string& model_path);

struct RunInputs {
  TraceSpec trace;
  hw::HardwareProfile hw;
  runtime::RuntimeProfile runtime;
  strategy::StrategySpec strategy;
  EngineKind engine = EngineKind::Event;
  bool fresh_lengths = false;
  std::optional<ImageJobOptions> image_job;  // set: report the whole job too
  bool sampler_job = false;  // a two-expert model: report ComfyUI's two sampler nodes too (cli/expert_job_run.hpp)
  // set: a Wan video's text encoder, sampler node(s) and VAE decode (cli/expert_job_run.hpp)
  std::optional<ImageJobOptions> video_job;
  std::string alloc_conf;  // PYTORCH_CUDA_ALLOC_CONF for PyTorch's caching allocator model (empty: unset)
  replay::RunSetup setup() const { return {hw, runtime, fresh_lengths}; }
};

nlohmann::ordered_json inputs_to_json(const RunInputs& in);
// Reads the "inputs" object of a result (or a file holding just such an object under "inputs") with
// the strict reader: errors name the file, line and key.
RunInputs inputs_from_config(const std::string& path);
// The same from the config's text (`path` names it in messages; the files it names are still read).
RunInputs inputs_from_config_text(const std::string& text, const std::string& path);

}  // namespace tiersim::app
