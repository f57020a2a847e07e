// `distorch.bytes`, `distorch.ratio`, `distorch.fraction`: ComfyUI-MultiGPU's DisTorch V2 as its code
// places a model (pollockjj/ComfyUI-MultiGPU a38cbda5, distorch_2.py analyze_safetensor_loading and the
// calculate_* functions; wrappers.py for the node's defaults): an expert allocation string (`split`,
// split_string.hpp) or, without one, virtual VRAM (`offload=SIZE`, in GiB as the node reads it; the
// node's default is 4 GiB to the cpu), turned into per-device quotas of 4-decimal fractions of each
// device's total memory, filled tail-first with the model's leaf blocks (tail_first_assignment.hpp).
// `donor=cpu|cuda:N` is where virtual VRAM goes; `text_encoder` applies DisTorch's CLIP rule (the
// embedding tables stay on the compute device, charged to its quota). `dynamic-vram=on` (current
// ComfyUI's default) is refused: its patcher overrides the partially_load DisTorch2 patches, so the
// split only applies with --disable-dynamic-vram (ComfyUI-MultiGPU#191; frameworks.md).
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
    if (o.has("text_encoder")) blocks_.text_encoder = o.flag("text_encoder");
    refuse_dynamic_vram(o, "under ComfyUI's dynamic VRAM (its default since 2026-02-28 on NVIDIA outside WSL) "
                           "DisTorch2's split does not apply (ComfyUI-MultiGPU#191) and the run-time placement is not "
                           "modelled: start ComfyUI with --disable-dynamic-vram and use dynamic-vram=off");
    if (split_ && offload_) o.fail("offload", "give either a split or an amount to offload, not both");
    if (split_ && donor_) o.fail("donor", "with a split the devices are named in the allocation string");
    if (split_) policies::parse_split(*split_, mode_);  // a bad string is an error before anything runs
  }

  std::vector<placement::DeviceId> place(const trace::Header& header, const hw::HardwareProfile& hw, const Completion&,
                                         Resolved& resolved) const override {
    const double model = placement::weight_bytes(header);
    const placement::DeviceId donor = donor_.value_or(placement::kCpu);
    check_on_machine(donor, hw, "donor");
    if (split_)
      for (const auto& e : policies::parse_split(*split_, mode_)) check_on_machine(e.device, hw, "split");
    std::map<placement::DeviceId, double> quotas;
    std::string applied;
    if (split_) {
      quotas = policies::split_quotas(policies::parse_split(*split_, mode_), mode_, model, hw);
      applied = *split_;
    } else {
      // Virtual VRAM: the node's virtual_vram_gb (4 GiB unless given) moved to the donor.
      const double vram = offload_.value_or(kNodeDefaultVirtualVram);
      quotas = policies::virtual_vram_quotas(model, vram, placement::kComputeGpu, {donor}, hw);
      applied = "virtual VRAM: " + both_units(vram) + " to " + placement::device_name(donor) +
                (offload_ ? "" : " (the DisTorch node's default)");
    }
    if (quotas.count(placement::kComputeGpu) == 0) quotas[placement::kComputeGpu] = 0;
    const double head = policies::text_encoder_head_bytes(header, blocks_);
    if (head > 0) quotas[placement::kComputeGpu] = std::max(0.0, quotas[placement::kComputeGpu] - head);
    resolved.emplace_back("split", applied);
    std::string quota_text;
    for (const auto& [device, bytes] : quotas)
      quota_text += (quota_text.empty() ? "" : ", ") + placement::device_name(device) + " " + both_units(bytes);
    resolved.emplace_back("quotas", quota_text);
    return policies::assign_from_tail(header, quotas, blocks_);
  }
  bool may_offload() const override { return true; }

 private:
  static constexpr double kNodeDefaultVirtualVram = 4.0 * 1073741824.0;  // wrappers.py: virtual_vram_gb = 4.0
  SplitMode mode_;
  std::optional<std::string> split_;
  std::optional<double> offload_;
  std::optional<placement::DeviceId> donor_;
  policies::DisTorchBlocks blocks_;
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

void check_on_machine(placement::DeviceId d, const hw::HardwareProfile& hw, const std::string& key,
                      const std::string& file) {
  if (d >= hw.gpu.count)
    throw InputError(file, 0, key, placement::device_name(d) + " is not on '" + hw.name + "' (" +
                                       std::to_string(hw.gpu.count) + " GPU(s))");
}

void refuse_dynamic_vram(config::Section& o, const std::string& why_not) {
  if (!o.has("dynamic-vram")) return;
  const std::string v = o.text("dynamic-vram");
  if (v != "on" && v != "off") o.fail("dynamic-vram", "must be 'on' or 'off', not '" + v + "'");
  if (v == "on") o.fail("dynamic-vram", why_not);
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
