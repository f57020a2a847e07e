// `device`: tensors on a GPU live in its device memory (cudaMalloc through the framework's caching
// allocator); the default, and what every split preset uses.
#include "policies/memory_kinds/kinds.hpp"

namespace tiersim::strategy {
namespace {

class DeviceMemory final : public MemoryKind {
 public:
  void apply(const trace::Header&, const hw::HardwareProfile&, placement::Placement&, Resolved&) const override {}
  bool takes_offloaded() const override { return false; }
};

}  // namespace

std::unique_ptr<MemoryKind> make_device_memory(config::Section&) { return std::make_unique<DeviceMemory>(); }

}  // namespace tiersim::strategy
