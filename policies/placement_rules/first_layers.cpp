// `layers`: the first N transformer layers on the compute GPU, the rest on the donor (cpu by default),
// as accelerate's sequential device_map splits a model by whole layers (its own rules, and llama.cpp's
// -ngl, which keeps the *last* layers, are their own issues). The embedding stays on the GPU; the final
// norm and LM head stay there only when every layer does. Without `layers`, N is the most that fit.
#include <algorithm>

#include "core/error.hpp"
#include "policies/placement_rules/rules.hpp"
#include "policies/placement_rules/tail_first_assignment.hpp"

namespace tiersim::strategy {
namespace {

class FirstLayers final : public PlacementRule {
 public:
  explicit FirstLayers(config::Section& o) {
    if (o.has("layers")) layers_ = o.integer("layers", 0, 1000000);
    if (o.has("donor")) donor_ = read_donor(o);
  }

  std::vector<placement::DeviceId> place(const trace::Header& header, const hw::HardwareProfile& hw,
                                         const Completion& rest, Resolved& resolved) const override {
    const placement::DeviceId donor = donor_.value_or(placement::kCpu);
    check_on_machine(donor, hw, "donor");
    std::int32_t n_layers = 0;
    for (const auto& t : header.tensors)
      if (t.kind == trace::TensorKind::Weight) n_layers = std::max(n_layers, t.layer);
    // Tensors of layer n_layers (after the last transformer layer) are the head.
    int keep = 0;
    if (layers_) {
      keep = *layers_;
      if (keep > n_layers)
        throw InputError("", 0, "layers", "must be between 0 and " + std::to_string(n_layers) + " for this model");
    } else {
      // The most layers that fit, by bisection (a linear scan over a trace whose layer numbers are
      // sparse took hours): all of them if they fit; else the largest N below that the compute GPU
      // holds, taking its memory to grow with N below all-resident (true when layers are alike: the
      // staging buffers then do not change with N). A donor too small for the rest is then too small
      // for any smaller N as well, and finalize says so.
      if (rest.fits(split_at(header, n_layers, n_layers, donor))) {
        keep = n_layers;
      } else {
        int lo = 0, hi = n_layers - 1;
        while (lo < hi) {
          const int mid = lo + (hi - lo + 1) / 2;
          if (rest.fits_compute_gpu(split_at(header, mid, n_layers, donor))) lo = mid;
          else hi = mid - 1;
        }
        keep = lo;
      }
    }
    resolved.emplace_back("layers_on_gpu", std::to_string(keep) + " of " + std::to_string(n_layers));
    return split_at(header, keep, n_layers, donor);
  }
  bool may_offload() const override { return true; }

 private:
  static std::vector<placement::DeviceId> split_at(const trace::Header& header, int keep, int n_layers,
                                                   placement::DeviceId donor) {
    std::vector<placement::DeviceId> homes(header.tensors.size(), placement::kComputeGpu);
    for (const auto& t : header.tensors) {
      if (t.kind != trace::TensorKind::Weight) continue;
      const bool on_gpu = t.layer < keep || (t.layer >= n_layers && keep == n_layers) || t.layer < 0;
      if (!on_gpu && !policies::is_embedding(t)) homes[t.id] = donor;
    }
    return homes;
  }

  std::optional<int> layers_;
  std::optional<placement::DeviceId> donor_;
};

}  // namespace

std::unique_ptr<PlacementRule> make_first_layers(config::Section& o) { return std::make_unique<FirstLayers>(o); }

}  // namespace tiersim::strategy
