#pragma once
// How DisTorch V2 turns per-device quotas into a placement: walking the model's weight modules from
// its tail, each goes to the first device, in the order compute GPU, other GPUs, cpu, whose
// remaining quota holds it; a module no quota holds stays on the compute GPU. Embedding tables and
// modules under 0.01% of the model (norms) stay on the compute GPU, as DisTorch keeps them there.
#include <map>

#include "hardware/profile.hpp"
#include "placement/placement.hpp"
#include "trace/trace.hpp"

namespace tiersim::policies {

// The home of every tensor (non-weights: the compute GPU).
std::vector<placement::DeviceId> assign_from_tail(const trace::Header& header,
                                                 const std::map<placement::DeviceId, double>& quotas);

// Weight bytes the compute GPU can hold for the model when nothing else is said: its memory less the
// reserve, KV cache, activations and, if anything must be offloaded, the staging buffers of
// `staged_layers` copied layers (prefetch + 1 when offloaded weights are copied, 0 when they are not).
double default_gpu_weight_budget(const trace::Header& header, const hw::HardwareProfile& hw, int staged_layers);

// True for tensors DisTorch never distributes (embeddings, and modules under 0.01% of the model).
bool pinned_to_compute_gpu(const trace::Tensor& t, double model_bytes);

}  // namespace tiersim::policies
