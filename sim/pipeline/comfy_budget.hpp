#pragma once
// ComfyUI's load budget (comfy/model_management.py: minimum_inference_memory, EXTRA_RESERVED_VRAM, load_models_gpu's
// lowvram_model_memory): what of a model may be put on the GPU. One rule for the placement (policies'
// comfy.lowvram, one model on an otherwise empty GPU) and for the job (ComfyModelManager, between the nodes).
namespace tiersim::pipeline::comfy {

inline constexpr double kReserveLinux = 400.0 * 1048576;  // EXTRA_RESERVED_VRAM on Linux
inline constexpr double kMid2025Floor = 128.0 * 1048576;  // lowvram_model_memory's floor at 7d593baf / a125cd84

// minimum_inference_memory(): 0.8 GiB + the reserve.
double minimum_inference(double reserve);
// load_models_gpu's minimum_memory_required: max(minimum_inference, the node's requirement + the reserve).
double minimum_required(double reserve, double memory_required);
// lowvram_model_memory: max(floor, free - min_required, min(free x MIN_WEIGHT_MEMORY_RATIO (0 on NVIDIA),
// free - min_inference)), floor 128 MiB in mid-2025 (7d593baf, a125cd84) and 0 in v0.19.3; a budget of 0 becomes 0.1
// (offload everything). `free`: free VRAM with the model's own loaded bytes counted free.
double lowvram_budget(double free, double min_required, double min_inference, bool mid_2025);

}  // namespace tiersim::pipeline::comfy
