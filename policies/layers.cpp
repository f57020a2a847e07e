// `layers`: the first N transformer layers on the compute GPU, the rest on the donor (cpu by default),
// as accelerate's device_map and llama.cpp's -ngl split a model by whole layers. The embedding stays
// on the GPU; the final norm and LM head stay there only when every layer does. Without --layers, N
// is the most layers that fit.
#include <algorithm>

#include "core/error.hpp"
#include "policies/policies.hpp"
#include "policies/tail_first_assignment.hpp"

namespace tiersim::policies {
namespace {

class Layers final : public Policy {
 public:
  placement::Placement place(const trace::Header& header, const hw::HardwareProfile& hw,
                             const PolicyOptions& options) const override {
    reject_unread_options(options, "layers", {.split = false, .layers = true, .offload = false, .donor = true});
    const placement::DeviceId donor = options.donor.value_or(placement::kCpu);
    std::int32_t n_layers = 0;
    for (const auto& t : header.tensors)
      if (t.kind == trace::TensorKind::Weight) n_layers = std::max(n_layers, t.layer);
    // Tensors of layer n_layers (after the last transformer layer) are the head.
    int keep = 0;
    if (options.layers) {
      keep = *options.layers;
      if (keep < 0 || keep > n_layers)
        throw InputError("", 0, "--layers", "must be between 0 and " + std::to_string(n_layers) + " for this model");
    } else {
      keep = most_layers_that_fit(header, hw, options, n_layers, donor);
    }
    placement::Placement p = split_at(header, keep, n_layers, donor);
    p.exec = options.exec;
    p.resolved.emplace_back("layers_on_gpu", std::to_string(keep) + " of " + std::to_string(n_layers));
    finalize(header, hw, p, "layers");
    return p;
  }

 private:
  static placement::Placement split_at(const trace::Header& header, int keep, int n_layers, placement::DeviceId donor) {
    placement::Placement p;
    p.device.assign(header.tensors.size(), placement::kComputeGpu);
    for (const auto& t : header.tensors) {
      if (t.kind != trace::TensorKind::Weight) continue;
      const bool on_gpu = t.layer < keep || (t.layer >= n_layers && keep == n_layers) || t.layer < 0;
      if (!on_gpu && !pinned_to_compute_gpu(t, 0)) p.device[t.id] = donor;
    }
    return p;
  }

  static int most_layers_that_fit(const trace::Header& header, const hw::HardwareProfile& hw,
                                  const PolicyOptions& options, int n_layers, placement::DeviceId donor) {
    for (int keep = n_layers; keep > 0; --keep) {
      placement::Placement p = split_at(header, keep, n_layers, donor);
      p.exec = options.exec;
      try {
        finalize(header, hw, p, "layers");
        return keep;
      } catch (const CapacityError&) {
      }
    }
    return 0;
  }
};

}  // namespace

std::unique_ptr<Policy> make_layers() { return std::make_unique<Layers>(); }

}  // namespace tiersim::policies
