// `distorch.bytes`, `distorch.ratio`, `distorch.fraction`: ComfyUI-MultiGPU DisTorch allocation strings
// (split_string.hpp), placed tail-first as DisTorch V2 places them (tail_first_assignment.hpp). Without
// `split` the compute GPU is filled as far as it goes and the rest goes to the donor (`donor`, cpu by
// default); with `offload` (virtual VRAM, as DisTorch's simple mode) that much goes to the donor.
#include <algorithm>
#include <cstdio>

#include "core/error.hpp"
#include "core/units.hpp"
#include "policies/placement_rules/rules.hpp"
#include "policies/placement_rules/split_string.hpp"
#include "policies/placement_rules/tail_first_assignment.hpp"

namespace tiersim::strategy {
namespace {

// Both units where they differ by 7%: "7.45 GiB (8.00 GB)".
std::string both_units(double bytes) {
  char gb[32];
  std::snprintf(gb, sizeof gb, " (%.2f GB)", bytes / 1e9);
  return units::format_bytes(bytes) + gb;
}

using policies::SplitMode;

class DisTorchSplit final : public PlacementRule {
 public:
  DisTorchSplit(SplitMode mode, config::Section& o) : mode_(mode) {
    if (o.has("split")) split_ = o.text("split");
    if (o.has("offload")) offload_ = o.bytes("offload", true);
    if (o.has("donor")) donor_ = read_donor(o);
    if (split_ && offload_) o.fail("offload", "give either a split or an amount to offload, not both");
    if (split_ && donor_) o.fail("donor", "with a split the devices are named in the allocation string");
    if (split_) policies::parse_split(*split_, mode_);  // a bad string is an error before anything runs
  }

  std::vector<placement::DeviceId> place(const trace::Header& header, const hw::HardwareProfile& hw,
                                         const Completion& rest, Resolved& resolved) const override {
    const double model = placement::weight_bytes(header);
    const placement::DeviceId donor = donor_.value_or(placement::kCpu);
    std::map<placement::DeviceId, double> quotas;
    std::string applied;
    if (split_) {
      quotas = policies::split_quotas(policies::parse_split(*split_, mode_), mode_, model, hw);
      applied = *split_;
    } else if (offload_) {
      // Tail-first filling gives the compute GPU its quota first, so the donor gets exactly what the
      // GPU's quota leaves of the distributable modules (up to one module's rounding).
      double distributable = 0;
      for (const auto& t : header.tensors)
        if (t.kind == trace::TensorKind::Weight && !policies::pinned_to_compute_gpu(t, model))
          distributable += static_cast<double>(t.bytes);
      const double moved = std::min(*offload_, distributable);
      quotas[placement::kComputeGpu] = distributable - moved;
      quotas[donor] += moved;
      applied = "virtual VRAM: " + both_units(moved) + " to " + placement::device_name(donor);
    } else {
      // The budget covers the tensors DisTorch keeps on the GPU regardless of quota (embeddings, norms);
      // the quota is what is left of it for the distributable ones.
      const double budget = std::min(model, policies::default_gpu_weight_budget(header, hw, rest.staged_layers(donor)));
      double pinned = 0;
      for (const auto& t : header.tensors)
        if (t.kind == trace::TensorKind::Weight && policies::pinned_to_compute_gpu(t, model)) pinned += static_cast<double>(t.bytes);
      quotas[placement::kComputeGpu] = std::max(0.0, budget - pinned);
      if (model > budget) quotas[donor] += model - budget;
      applied = "default: fill cuda:0, rest to " + placement::device_name(donor);
    }
    resolved.emplace_back("split", applied);
    std::string quota_text;
    for (const auto& [device, bytes] : quotas)
      quota_text += (quota_text.empty() ? "" : ", ") + placement::device_name(device) + " " + both_units(bytes);
    resolved.emplace_back("quotas", quota_text);
    return policies::assign_from_tail(header, quotas);
  }
  bool may_offload() const override { return true; }

 private:
  SplitMode mode_;
  std::optional<std::string> split_;
  std::optional<double> offload_;
  std::optional<placement::DeviceId> donor_;
};

}  // namespace

std::unique_ptr<PlacementRule> make_distorch_bytes(config::Section& o) {
  return std::make_unique<DisTorchSplit>(SplitMode::Bytes, o);
}
std::unique_ptr<PlacementRule> make_distorch_ratio(config::Section& o) {
  return std::make_unique<DisTorchSplit>(SplitMode::Ratio, o);
}
std::unique_ptr<PlacementRule> make_distorch_fraction(config::Section& o) {
  return std::make_unique<DisTorchSplit>(SplitMode::Fraction, o);
}

placement::DeviceId read_donor(config::Section& o) {
  const std::string text = o.text("donor");
  placement::DeviceId d = placement::kCpu;
  try {
    d = placement::parse_device(text);
  } catch (const std::invalid_argument& e) {
    o.fail("donor", e.what());
  }
  if (d == placement::kComputeGpu) o.fail("donor", "the donor cannot be the compute GPU cuda:0");
  return d;
}

}  // namespace tiersim::strategy
