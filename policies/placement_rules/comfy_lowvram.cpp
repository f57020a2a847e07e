// `comfy.lowvram`: ComfyUI's native partial loading, as its code places a model that does not fit
// (Comfy-Org/ComfyUI v0.19.3, 3086026401180c9216bcb6ace442a4e3587d2c66: comfy/model_management.py
// load_models_gpu, minimum_inference_memory, EXTRA_RESERVED_VRAM, pin_memory; comfy/model_patcher.py
// ModelPatcher.partially_load, _load_list, load; mid-2025 7d593baf for version=2025-07). Steps, each
// checked by tests/fixtures/comfyui_partial_loads.jsonl (ComfyUI's own functions run on tiersim's
// models: results/frameworks/comfyui/README.md):
// 1. Budget: reserve = 400 MiB (Windows 600, +100 with more than 15 GiB of VRAM; reserve-vram replaces
//    it); min_inference = 0.8 GiB + reserve; min_required = max(min_inference, (minimum-memory-required
//    or memory-required) + reserve); budget = max(0, free - min_required, min(free x 0 (NVIDIA's
//    MIN_WEIGHT_MEMORY_RATIO), free - min_inference)), 0 -> 0.1 (offload all); 2025-07: the floor is
//    128 MiB. novram -> 0.1. The model loads whole when budget > model size.
// 2. Load list: one leaf per weight, sorted by (bytes, bytes, name) descending, the name compared as
//    a plain string; each leaf is tested on its own (first fit, no stop at the first miss): it stays
//    if loaded + bytes + reserve < budget, where reserve = max(the last reserve, its bytes + the next
//    NS leaves' bytes in the list) is room for the casts in flight (NS = async-offload streams, 2);
//    2025-07: it stays unless loaded + bytes >= budget.
// 3. Pinning (not in 2025-07): offloaded weights are pinned (cudaHostRegister) in list order while the
//    pinned total stays within 0.9 x RAM (0.4 x RAM on Windows; WSL2 is Linux to ComfyUI); a weight that
//    does not fit stays pageable and later, smaller ones may still pin. `pin=off`: none.
// ComfyUI's dynamic VRAM (the default since 2026-02-28 on NVIDIA, not WSL, torch >= 2.8 with
// comfy-aimdo) does not use this budget: weights are faulted into VRAM at run time by memory pressure.
// It is not modelled: `dynamic-vram=on` is refused, saying to start ComfyUI with --disable-dynamic-vram.
// Options: version=current|2025-07, free=SIZE (free VRAM; default memory less the profile's reserve),
// memory-required=SIZE (0: a text encoder; default: a diffusion trace's sampler estimate, else 0),
// minimum-memory-required=SIZE, reserve-vram=SIZE,
// async-offload=N (2; 0 = --disable-async-offload: casts on the compute stream), pin=on|off, novram,
// dynamic-vram=off|on.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

#include "core/error.hpp"
#include "core/units.hpp"
#include "pipeline/comfy_budget.hpp"
#include "policies/placement_rules/rules.hpp"

namespace tiersim::strategy {
namespace {

constexpr double kMiB = 1048576.0;

struct Leaf {
  std::uint32_t tensor;
  double bytes;
  std::string name;  // the module's name: the weight's name without ".weight"
};

std::string module_name(const std::string& tensor_name) {
  const std::string suffix = ".weight";
  if (tensor_name.size() > suffix.size() && tensor_name.compare(tensor_name.size() - suffix.size(), suffix.size(), suffix) == 0)
    return tensor_name.substr(0, tensor_name.size() - suffix.size());
  return tensor_name;
}

class ComfyLowVram final : public PlacementRule {
 public:
  explicit ComfyLowVram(config::Section& o) {
    if (o.has("version")) {
      const std::string v = o.text("version");
      if (v != "current" && v != "2025-07") o.fail("version", "must be 'current' (v0.19.3) or '2025-07', not '" + v + "'");
      mid_2025_ = v == "2025-07";
    }
    if (o.has("free")) free_ = o.bytes("free", true);
    if (o.has("memory-required")) {
      memory_required_ = o.bytes("memory-required", true);
      has_memory_required_ = true;
    }
    if (o.has("minimum-memory-required")) minimum_memory_required_ = o.bytes("minimum-memory-required", true);
    if (o.has("reserve-vram")) reserve_vram_ = o.bytes("reserve-vram", true);
    if (o.has("async-offload")) streams_ = static_cast<int>(o.integer("async-offload", 0, 64));
    if (o.has("pin")) {
      const std::string v = o.text("pin");
      if (v != "on" && v != "off") o.fail("pin", "must be 'on' or 'off', not '" + v + "'");
      pin_ = v == "on";
    }
    if (o.has("novram")) novram_ = o.flag("novram");
    refuse_dynamic_vram(o, "ComfyUI's dynamic VRAM (its default since 2026-02-28 on NVIDIA outside WSL) places "
                           "weights at run time by memory pressure and is not modelled: start ComfyUI with "
                           "--disable-dynamic-vram and use dynamic-vram=off (DisTorch2 splits need "
                           "--disable-dynamic-vram too: ComfyUI-MultiGPU#191)");
    if (mid_2025_ && (o.has("async-offload") || o.has("pin")))
      o.fail(o.has("pin") ? "pin" : "async-offload", "version 2025-07 has no offload streams or pinning");
  }

  std::vector<placement::DeviceId> place(const trace::Header& header, const hw::HardwareProfile& hw,
                                         const Completion& rest, Resolved& resolved) const override {
    const bool windows = rest.platform() == "windows";
    const double budget = load_budget(header, hw, windows, resolved);
    std::vector<placement::DeviceId> homes(header.tensors.size(), placement::kComputeGpu);
    const std::vector<bool> offloaded = offload(header, budget);
    for (const auto& t : header.tensors)
      if (offloaded[t.id]) homes[t.id] = placement::kCpu;
    return homes;
  }
  bool may_offload() const override { return true; }

  void annotate(const trace::Header& header, const hw::HardwareProfile& hw, const std::string& platform,
                placement::Placement& p, Resolved& resolved) const override {
    if (streams() == 0 && p.copy.stream) {
      p.copy.stream = false;
      resolved.emplace_back("casts", "on the compute stream (--disable-async-offload)");
    }
    if (p.copy.stream) p.copy.streams = streams();
    if (mid_2025_) {
      // That ComfyUI cast on the compute stream from pageable memory: its runtime, whatever the path said.
      if (p.copy.stream || p.copy.host_memory == placement::HostMemory::Pinned)
        resolved.emplace_back("casts", "on the compute stream from pageable memory (ComfyUI 2025-07: no offload "
                                       "streams, no pinning)");
      p.copy.stream = false;
      p.copy.host_memory = placement::HostMemory::Pageable;
      return;
    }
    if (p.copy.host_memory != placement::HostMemory::Pinned) return;
    // Pinning in load-list order within ComfyUI's RAM budget; what misses stays pageable.
    const double cap = !pin_ ? -1 : (platform == "windows" ? 0.4 : 0.9) * hw.host.memory;
    double pinned = 0, pageable = 0;
    for (const Leaf& leaf : sorted_leaves(header)) {
      if (p.device[leaf.tensor] != placement::kCpu || p.path[leaf.tensor] != placement::Path::Copy) continue;
      if (cap >= 0 && pinned + leaf.bytes <= cap) {
        pinned += leaf.bytes;
        continue;
      }
      if (p.pageable.empty()) p.pageable.assign(header.tensors.size(), false);
      p.pageable[leaf.tensor] = true;
      pageable += leaf.bytes;
    }
    if (pageable > 0)
      resolved.emplace_back("pinned", units::format_bytes(pinned) + " of the offloaded weights (" +
                                          (pin_ ? "ComfyUI's cap: " + units::format_bytes(cap) : std::string("pin=off")) +
                                          "); " + units::format_bytes(pageable) + " stay pageable");
  }

 private:
  int streams() const { return streams_.value_or(mid_2025_ ? 1 : 2); }

  // comfy/model_management.py load_models_gpu (and partially_load's full_load), for one model on an
  // otherwise empty GPU.
  double load_budget(const trace::Header& header, const hw::HardwareProfile& hw, bool windows, Resolved& resolved) const {
    if (free_ && *free_ > hw.gpu.memory)
      throw InputError("", 0, "free", units::format_bytes(*free_) + " of free VRAM is more than the " +
                                          units::format_bytes(hw.gpu.memory) + " of '" + hw.name + "'");
    const double free = free_.value_or(hw.gpu.memory - hw.gpu.reserved);
    double reserve = pipeline::comfy::kReserveLinux;
    if (windows) reserve = 600 * kMiB + (hw.gpu.memory > 15 * 1024 * kMiB ? 100 * kMiB : 0);
    if (reserve_vram_) reserve = *reserve_vram_;
    const double min_inference = pipeline::comfy::minimum_inference(reserve);
    // A diffusion model is loaded by its sampler node with the sampler's estimates (comfy/sampler_helpers.py
    // _prepare_sampling: model_base.memory_required at the batch doubled, and at the batch as the minimum), which its
    // trace's generator writes per prompt; given ones win, and a trace without it (a language model) has none.
    double minimum = minimum_memory_required_.value_or(memory_required_);
    const bool sampler = !has_memory_required_ && !minimum_memory_required_ && header.meta.count("comfy_memory_per_cond");
    if (sampler) minimum = std::stod(header.meta.at("comfy_memory_per_cond"));
    const double min_required = pipeline::comfy::minimum_required(reserve, minimum);
    double budget = pipeline::comfy::lowvram_budget(free, min_required, min_inference, mid_2025_);
    if (novram_) budget = 0.1;
    const double model = placement::weight_bytes(header);
    const bool full = budget > model;
    char line[256];
    std::snprintf(line, sizeof line, "%s for weights of %s free VRAM (reserve %s%s)%s",
                  units::format_bytes(budget).c_str(), units::format_bytes(free).c_str(),
                  units::format_bytes(reserve).c_str(),
                  sampler ? (", the sampler's estimate " + units::format_bytes(minimum)).c_str() : "",
                  full ? ": the model loads whole" : "");
    resolved.emplace_back("ComfyUI budget", line);
    resolved.emplace_back("ComfyUI", std::string(mid_2025_ ? "mid-2025 (7d593baf)" : "v0.19.3") +
                                         ", started with --disable-dynamic-vram");
    return full ? -1 : budget;  // -1: everything loads
  }

  std::vector<Leaf> sorted_leaves(const trace::Header& header) const {
    std::vector<Leaf> leaves;
    for (const auto& t : header.tensors)
      if (t.kind == trace::TensorKind::Weight) leaves.push_back({t.id, static_cast<double>(t.bytes), module_name(t.name)});
    // (offload_mem, module_mem, name) descending; offload_mem = module_mem for weights run in their dtype.
    std::sort(leaves.begin(), leaves.end(), [](const Leaf& a, const Leaf& b) {
      if (a.bytes != b.bytes) return a.bytes > b.bytes;
      return a.name > b.name;
    });
    return leaves;
  }

  // comfy/model_patcher.py ModelPatcher.load: which leaves are left offloaded (comfy_cast_weights).
  std::vector<bool> offload(const trace::Header& header, double budget) const {
    std::vector<bool> off(header.tensors.size(), false);
    if (budget < 0) return off;
    const std::vector<Leaf> list = sorted_leaves(header);
    const int ns = streams();
    double loaded = 0, buffer = 0;
    for (std::size_t i = 0; i < list.size(); ++i) {
      const double size = list[i].bytes;
      if (mid_2025_) {
        if (loaded + size >= budget) off[list[i].tensor] = true;
        else loaded += size;
        continue;
      }
      double ahead = size;
      for (std::size_t j = i + 1; j < list.size() && j <= i + static_cast<std::size_t>(ns); ++j) ahead += list[j].bytes;
      const double pot = std::max(buffer, ahead);
      if (loaded + size + pot < budget) {
        loaded += size;
      } else {
        off[list[i].tensor] = true;
        buffer = pot;
      }
    }
    return off;
  }

  bool mid_2025_ = false;
  std::optional<double> free_, minimum_memory_required_, reserve_vram_;
  double memory_required_ = 0;
  bool has_memory_required_ = false;
  std::optional<int> streams_;
  bool pin_ = true;
  bool novram_ = false;
};

}  // namespace

std::unique_ptr<PlacementRule> make_comfy_lowvram(config::Section& o) { return std::make_unique<ComfyLowVram>(o); }

}  // namespace tiersim::strategy
