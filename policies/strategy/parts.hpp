#pragma once
// The parts a strategy is composed of (architecture.md): a placement rule decides each weight's home
// device; a memory kind decides what kind of GPU-side memory tensors live in (device memory through the
// framework's allocator, or CUDA managed memory with advice); an offload path decides how a weight
// homed off the compute GPU is used (copied to it when used, or its layer executed where it lives).
// The platform (the OS's driver model: Linux, Windows, WSL2) decides what the driver does with managed
// memory and with device allocations past VRAM. The runtime (runtime/) and the hardware are apart. Each part is registered by name with its options
// (registry.cpp); `sim parts` lists them.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/strict_reader.hpp"
#include "hardware/profile.hpp"
#include "placement/placement.hpp"
#include "trace/trace.hpp"

namespace tiersim::strategy {

using Resolved = std::vector<std::pair<std::string, std::string>>;  // settings as applied, for reports

// What a placement rule may ask of the rest of the strategy.
class Completion {
 public:
  virtual ~Completion() = default;
  // Whether these weight homes fit once the memory kind and offload path are applied.
  virtual bool fits(const std::vector<placement::DeviceId>& homes) const = 0;
  // Whether they fit on the compute GPU (other devices may still be too small).
  virtual bool fits_compute_gpu(const std::vector<placement::DeviceId>& homes) const = 0;
  // Layers' worth of staging buffers the compute GPU keeps for weights homed on `donor` (0: not copied).
  virtual int staged_layers(placement::DeviceId donor) const = 0;
  // The platform's name (linux, windows, wsl2): frameworks reserve VRAM and RAM differently on Windows.
  virtual const std::string& platform() const = 0;
};

class PlacementRule {
 public:
  virtual ~PlacementRule() = default;
  // The home of every tensor (KV cache and activations: the compute GPU; finalize moves them).
  virtual std::vector<placement::DeviceId> place(const trace::Header& header, const hw::HardwareProfile& hw,
                                                 const Completion& rest, Resolved& resolved) const = 0;
  // Whether it can ever put a weight off the compute GPU (if not, offload options mean nothing).
  virtual bool may_offload() const = 0;
  // After the memory kind and offload path are applied, for a rule whose framework also decides how
  // its offloaded weights are held or copied (ComfyUI pins them within a RAM budget). Default: nothing.
  virtual void annotate(const trace::Header&, const hw::HardwareProfile&, const std::string& /*platform*/,
                        placement::Placement&, Resolved&) const {}
};

class MemoryKind {
 public:
  virtual ~MemoryKind() = default;
  // Marks the tensors it takes (path Managed, advice) in a placement whose homes are set.
  virtual void apply(const trace::Header& header, const hw::HardwareProfile& hw, placement::Placement& p,
                     Resolved& resolved) const = 0;
  // Whether it takes every weight the placement puts in host memory (nothing left to copy or execute).
  virtual bool takes_offloaded() const = 0;
};

class OffloadPath {
 public:
  virtual ~OffloadPath() = default;
  // Sets the path of every weight homed off the compute GPU that the memory kind did not take.
  virtual void apply(const trace::Header& header, placement::Placement& p, Resolved& resolved) const = 0;
  virtual int staged_layers(placement::DeviceId donor) const = 0;
};

class Platform {
 public:
  virtual ~Platform() = default;
  // Adjusts or refuses what the memory kind put in managed memory, by the driver's unified-memory
  // model (marks placement.managed.demand_paging); `flag` names the option that chose managed memory.
  virtual void apply_managed(placement::Placement& p, const std::string& flag, Resolved& resolved) const = 0;
  // Whether device allocations the compute GPU cannot hold go to shared system memory (read by kernels
  // over the link) instead of failing with out-of-memory.
  virtual bool sysmem_fallback() const = 0;
};

// Each family's registry row: the name, a one-line description, its options, and a factory that reads
// them from a strict-reader section (the caller rejects what it did not read).
template <typename Part>
struct PartInfo {
  std::string name;
  std::string description;
  std::string options;  // "key=values (default)" list for `sim parts`
  std::unique_ptr<Part> (*make)(config::Section& options);
};

const std::vector<PartInfo<PlacementRule>>& placement_rules();
const std::vector<PartInfo<MemoryKind>>& memory_kinds();
const std::vector<PartInfo<OffloadPath>>& offload_paths();
const std::vector<PartInfo<Platform>>& platforms();

}  // namespace tiersim::strategy
