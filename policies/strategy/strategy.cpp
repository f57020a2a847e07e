#include "policies/strategy/strategy.hpp"

#include <optional>

#include "core/error.hpp"
#include "core/units.hpp"
#include "policies/platforms/sysmem_fallback.hpp"
#include "policies/strategy/parts.hpp"

namespace tiersim::strategy {
namespace {

// Where an option belongs, said when a part is given one it does not read.
std::string hint(const std::string& key) {
  if (key == "split" || key == "offload") return "it is for the distorch.* placements (presets bytes, ratio, fraction)";
  if (key == "layers") return "it is for the layers placement";
  if (key == "ngl" || key == "ts" || key == "output-first" || key == "fit" || key == "ctx" || key == "fit-target" ||
      key == "fit-ctx")
    return "it is for the llamacpp.ngl placement (preset llamacpp)";
  if (key == "donor") return "it is for placements that choose the donor (distorch.* without a split, layers)";
  if (key == "allocator" || key == "scope" || key == "prefer-cpu" || key == "accessed-by" || key == "read-mostly" ||
      key == "filled" || key == "advise")
    return "it is for managed memory (--memory managed, the um* presets)";
  if (key == "prefetch" || key == "host" || key == "sync" || key == "peer" || key == "pinned" || key == "pageable")
    return "it is for the copy offload path";
  return "see sim parts";
}

template <typename Part>
std::unique_ptr<Part> build(const std::vector<PartInfo<Part>>& family, const PartSpec& spec, const std::string& flag,
                            const std::string& family_name, const std::string& label) {
  const std::string origin = spec.origin.empty() ? flag : spec.origin;
  const PartInfo<Part>* info = nullptr;
  std::string known;
  for (const auto& i : family) {
    if (i.name == spec.name) info = &i;
    known += (known.empty() ? "" : ", ") + i.name;
  }
  if (!info) {
    const std::string message = "unknown " + family_name + " '" + spec.name + "' (known: " + known + ")";
    if (origin.rfind("--", 0) != 0) throw InputError(origin, 0, "name", message);  // from a --config file
    throw InputError("", 0, origin, message);
  }
  config::Section options(spec.node(), "", origin);
  try {
    auto part = info->make(options);
    options.finish();
    return part;
  } catch (const InputError& e) {
    const auto by = spec.given_by.find(e.key());
    if (by == spec.given_by.end()) {
      // An option read from a --config file: named by its key in that file (inputs.strategy.placement.ot), not by
      // the bare option name.
      if (origin.rfind("--", 0) != 0 && e.file() == origin && !e.key().empty() && e.key().find('.') == std::string::npos)
        throw InputError(origin, e.line(), "inputs.strategy." + flag.substr(2) + "." + e.key(), e.message());
      throw;
    }
    const std::string message = e.message() == "unknown key"
                                    ? label + " does not use this option (its " + family_name + " " + spec.name +
                                          " has no '" + e.key() + "'); " + hint(e.key())
                                    : e.message();
    // A legacy flag names itself; an option inside a part's text names the part's flag and the option.
    const bool part_flag = by->second == "--placement" || by->second == "--memory" || by->second == "--offload";
    if (part_flag) throw InputError("", 0, by->second, "option '" + e.key() + "': " + message);
    throw InputError("", 0, by->second, message);
  }
}

// The rest of a strategy, for placement rules that fill a GPU as far as it goes.
class Composer final : public Completion {
 public:
  Composer(const trace::Header& header, const hw::HardwareProfile& hw, const PlacementRule& rule,
           const MemoryKind& memory, const OffloadPath& offload, const Platform& platform, std::string platform_name,
           std::string memory_flag, std::string label)
      : header_(header), hw_(hw), rule_(rule), memory_(memory), offload_(offload), platform_(platform),
        platform_name_(std::move(platform_name)), memory_flag_(std::move(memory_flag)), label_(std::move(label)) {}

  // `final`: the placement that runs, where the platform's sysmem fallback applies. A placement rule's
  // fit tests do not see it: frameworks size their splits by the VRAM the driver reports.
  placement::Placement complete(const std::vector<placement::DeviceId>& homes, Resolved& resolved,
                                bool final = false) const {
    placement::Placement p;
    p.device = homes;
    p.path.assign(homes.size(), placement::Path::Local);
    memory_.apply(header_, hw_, p, resolved);
    platform_.apply_managed(p, memory_flag_, resolved);
    offload_.apply(header_, p, resolved);
    rule_.annotate(header_, hw_, platform_name_, p, resolved);
    if (final && platform_.sysmem_fallback()) spill_to_system_memory(header_, hw_, p, resolved);
    placement::finalize(header_, hw_, p, label_);
    return p;
  }
  bool fits(const std::vector<placement::DeviceId>& homes) const override { return !overflow(homes); }
  bool fits_compute_gpu(const std::vector<placement::DeviceId>& homes) const override {
    const auto device = overflow(homes);
    return !device || *device != "cuda:0";
  }
  int staged_layers(placement::DeviceId donor) const override {
    if (donor == placement::kCpu && memory_.takes_offloaded()) return 0;
    return offload_.staged_layers(donor);
  }
  const std::string& platform() const override { return platform_name_; }

 private:
  // The device that these homes overflow once completed (CapacityError's, "" when it names none), or none.
  std::optional<std::string> overflow(const std::vector<placement::DeviceId>& homes) const {
    Resolved ignored;
    try {
      complete(homes, ignored);
      return std::nullopt;
    } catch (const CapacityError& e) {
      return e.device();
    }
  }

 private:
  const trace::Header& header_;
  const hw::HardwareProfile& hw_;
  const PlacementRule& rule_;
  const MemoryKind& memory_;
  const OffloadPath& offload_;
  const Platform& platform_;
  std::string platform_name_;
  std::string memory_flag_;
  std::string label_;
};

// The flag that chose the offload path, else the first that gave it an option (for the error when
// none can apply).
std::string offload_flag(const PartSpec& offload) {
  if (!offload.origin.empty()) return offload.origin;
  for (const auto& [key, flag] : offload.given_by) return flag;
  return "--offload";
}

}  // namespace

std::string StrategySpec::label() const {
  const std::string on = platform.name == "linux" && platform.options.empty() ? "" : " on " + platform.text();
  if (!custom && !preset.empty()) return preset + on;
  return placement.text() + " + " + memory.text() + " + " + offload.text() + on;
}

placement::Placement compose(const trace::Header& header, const hw::HardwareProfile& hw, const StrategySpec& spec) {
  const std::string label = spec.label();
  const std::string named = (!spec.custom && !spec.preset.empty() ? "policy '" : "strategy '") + label + "'";
  auto rule = build(placement_rules(), spec.placement, "--placement", "placement", named);
  auto memory = build(memory_kinds(), spec.memory, "--memory", "memory kind", named);
  auto offload = build(offload_paths(), spec.offload, "--offload", "offload path", named);
  auto platform = build(platforms(), spec.platform, "--platform", "platform", named);
  if (spec.offload.given && !rule->may_offload())
    throw InputError("", 0, offload_flag(spec.offload),
                     named + " offloads no weight to copy or execute elsewhere (placement " + spec.placement.name +
                         " keeps every weight on the GPU), so the offload path's options would have no effect");

  const std::string memory_flag = !spec.memory.origin.empty() ? spec.memory.origin
                                  : spec.memory.given_by.empty() ? (spec.preset.empty() ? "--memory" : "--policy")
                                                                 : spec.memory.given_by.begin()->second;
  Composer composer(header, hw, *rule, *memory, *offload, *platform, spec.platform.name, memory_flag, label);
  Resolved resolved;
  std::vector<placement::DeviceId> homes;
  try {
    homes = rule->place(header, hw, composer, resolved);
  } catch (const InputError& e) {
    // An option found wrong only against the model or the hardware: named by the flag that gave it.
    const auto by = spec.placement.given_by.find(e.key());
    if (!e.file().empty() || by == spec.placement.given_by.end()) throw;
    if (by->second == "--placement") throw InputError("", 0, by->second, "option '" + e.key() + "': " + e.message());
    throw InputError("", 0, by->second, e.message());
  }
  placement::Placement p = composer.complete(homes, resolved, true);
  if (p.managed.enabled) {
    const double footprint = placement::paged_managed_usage(header, p).total();
    for (std::size_t i = 0; i < p.path.size(); ++i)
      if (p.path[i] == placement::Path::Execute)
        throw InputError("", 0, footprint > 0 ? memory_flag : "--platform",
                         std::string(footprint > 0 ? "managed memory" : "the sysmem fallback") +
                             " with layers executed off the compute GPU (on the CPU or another GPU) is not "
                             "modelled; use the copy offload path");
    if (!hw.managed_memory)
      throw InputError(hw.origin, 0, "managed_memory",
                       "the sysmem fallback reads system memory at the profile's managed_memory.remote_read_bandwidth; "
                       "this profile has no managed_memory section");
    if (footprint > 0) {
      const double capacity = placement::managed_gpu_capacity(header, hw, p);
      if (capacity < hw.managed_memory->va_block)
        throw CapacityError("'" + label + "' leaves no GPU memory for managed blocks on '" + hw.name + "'");
      if (footprint > capacity && !p.managed.demand_paging)
        throw CapacityError("'" + label + "' puts " + units::format_bytes(footprint) + " in managed memory, but " +
                                spec.platform.name + " cannot oversubscribe GPU memory (no concurrentManagedAccess: CUDA "
                                "Programming Guide, 'Limited unified memory support') and " +
                                units::format_bytes(capacity) + " are left for it on '" + hw.name + "'",
                            "cuda:0", footprint, capacity);
      resolved.emplace_back("managed footprint", units::format_bytes(footprint) + " for " + units::format_bytes(capacity) +
                                                     " of GPU memory" + (footprint > capacity ? " (oversubscribed)" : ""));
    }
  }
  p.resolved = std::move(resolved);
  return p;
}

}  // namespace tiersim::strategy
