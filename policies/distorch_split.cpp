// `bytes`, `ratio`, `fraction`: ComfyUI-MultiGPU DisTorch allocation strings (split_string.hpp), placed
// tail-first as DisTorch V2 places them (tail_first_assignment.hpp). Without --split the compute GPU
// is filled as far as it goes and the rest goes to the donor (--donor, cpu by default); with
// --offload-gb (virtual VRAM, as in DisTorch's simple mode) exactly that much goes to the donor.
#include "core/error.hpp"
#include "core/units.hpp"
#include "policies/policies.hpp"
#include "policies/split_string.hpp"
#include "policies/tail_first_assignment.hpp"

namespace tiersim::policies {
namespace {

class DisTorchSplit final : public Policy {
 public:
  DisTorchSplit(SplitMode mode, std::string name) : mode_(mode), name_(std::move(name)) {}

  placement::Placement place(const trace::Header& header, const hw::HardwareProfile& hw,
                             const PolicyOptions& options) const override {
    const double model = placement::weight_bytes(header);
    std::map<placement::DeviceId, double> quotas;
    std::string applied;
    if (options.split && options.offload_bytes)
      throw InputError("", 0, "--offload-gb", "give either --split or --offload-gb, not both");
    if (options.split && options.donor)
      throw InputError("", 0, "--donor", "with --split the devices are named in the allocation string");
    reject_unread_options(options, name_, {.split = true, .layers = false, .offload = true, .donor = true});
    const placement::DeviceId donor = options.donor.value_or(placement::kCpu);
    if (options.split) {
      quotas = split_quotas(parse_split(*options.split, mode_), mode_, model, hw);
      applied = *options.split;
    } else if (options.offload_bytes) {
      // Tail-first filling gives the compute GPU its quota first, so the donor gets exactly what the
      // GPU's quota leaves of the distributable modules (up to one module's rounding).
      double distributable = 0;
      for (const auto& t : header.tensors)
        if (t.kind == trace::TensorKind::Weight && !pinned_to_compute_gpu(t, model)) distributable += static_cast<double>(t.bytes);
      const double moved = std::min(*options.offload_bytes, distributable);
      quotas[placement::kComputeGpu] = distributable - moved;
      quotas[donor] += moved;
      applied = "virtual VRAM: " + units::format_bytes(moved) + " to " + placement::device_name(donor);
    } else {
      // The budget covers the tensors DisTorch keeps on the GPU regardless of quota (embeddings, norms);
      // the quota is what is left of it for the distributable ones.
      const double budget = std::min(model, default_gpu_weight_budget(header, hw, options.exec));
      double pinned = 0;
      for (const auto& t : header.tensors)
        if (t.kind == trace::TensorKind::Weight && pinned_to_compute_gpu(t, model)) pinned += static_cast<double>(t.bytes);
      quotas[placement::kComputeGpu] = std::max(0.0, budget - pinned);
      if (model > budget) quotas[donor] += model - budget;
      applied = "default: fill cuda:0, rest to " + placement::device_name(donor);
    }
    placement::Placement p = assign_from_tail(header, quotas);
    p.exec = options.exec;
    p.resolved.emplace_back("split", applied);
    finalize(header, hw, p, name_);
    return p;
  }

 private:
  SplitMode mode_;
  std::string name_;
};

}  // namespace

std::unique_ptr<Policy> make_bytes_split() { return std::make_unique<DisTorchSplit>(SplitMode::Bytes, "bytes"); }
std::unique_ptr<Policy> make_ratio_split() { return std::make_unique<DisTorchSplit>(SplitMode::Ratio, "ratio"); }
std::unique_ptr<Policy> make_fraction_split() {
  return std::make_unique<DisTorchSplit>(SplitMode::Fraction, "fraction");
}

}  // namespace tiersim::policies
