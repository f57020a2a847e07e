#pragma once
// How ComfyUI-MultiGPU's DisTorch V2 turns per-device quotas into a placement (distorch_2.py,
// analyze_safetensor_loading; read at pollockjj/ComfyUI-MultiGPU a38cbda5, v2.6.3). Its blocks are the
// leaf modules of ComfyUI's load list (one per weight tensor here). A block under 0.01% of the model is
// "tiny" and stays on the compute device; for a text encoder (is_clip) the embedding tables (names with
// embed, wte, wpe, token_embedding, position_embedding) stay there too and are charged to its quota.
// The others are walked from the model's tail, each to the first device, in the order (non-cpu devices
// by name, lexicographically; then the cpu), whose remaining quota holds it; one that fits nowhere
// goes to the compute device outside every quota (DisTorch only warns; capacity is checked after).
#include <map>
#include <vector>

#include "hardware/profile.hpp"
#include "placement/placement.hpp"
#include "trace/trace.hpp"

namespace tiersim::policies {

struct DisTorchBlocks {
  bool text_encoder = false;  // ComfyUI's is_clip
};

// The home of every tensor (non-weights: the compute GPU, cuda:0).
std::vector<placement::DeviceId> assign_from_tail(const trace::Header& header,
                                                 const std::map<placement::DeviceId, double>& quotas,
                                                 DisTorchBlocks blocks);

// Bytes of the embedding tables a text encoder keeps on the compute device (0 otherwise).
double text_encoder_head_bytes(const trace::Header& header, DisTorchBlocks blocks);

// Whether a weight is an embedding table by DisTorch's names.
bool is_embedding(const trace::Tensor& t);

}  // namespace tiersim::policies
