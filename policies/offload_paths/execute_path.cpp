// `execute`: a layer whose weights are homed off the compute GPU runs where they live: on the CPU next to
// its weights and KV cache (llama.cpp's offloaded layers), or on the GPU that holds it (llama.cpp's and
// accelerate's multi-GPU splits: a pipeline in which only hidden states cross between devices). Layers
// are moved whole to the device holding most of their bytes, as llama.cpp offloads whole layers.
// Options:
//   threads=N        CPU threads (llama.cpp -t; default: the host's physical cores, host.cpu_kernels.cores)
//   op-offload=N     steps of at least N tokens run CPU-homed layers on the compute GPU, their weights
//                    copied over per step (ggml's op offload, GGML_OP_OFFLOAD_MIN_BATCH: llama.cpp's 32;
//                    default 0 = off, as --no-op-offload)
//   host=pinned|pageable   host memory those copies come from. llama.cpp's CPU buffer list starts with the
//                    CUDA backend's pinned host buffer, but with mmap (its default load mode) the loader
//                    avoids it ("avoid using a host buffer when using mmap": llama_model_loader::create_tensor)
//                    and the weights stay in the mapped file, pageable; -lm none pins them. Default pinned.
#include <map>

#include "core/error.hpp"
#include "policies/offload_paths/paths.hpp"

namespace tiersim::strategy {
namespace {

class ExecutePath final : public OffloadPath {
 public:
  explicit ExecutePath(config::Section& o) {
    if (o.has("threads")) execute_.threads = o.integer("threads", 1, 4096);
    if (o.has("op-offload")) execute_.op_offload_batch = o.integer("op-offload", 0, 1 << 20);
    if (o.has("host")) {
      const std::string h = o.text("host");
      if (h != "pinned" && h != "pageable") o.fail("host", "must be 'pinned' or 'pageable', not '" + h + "'");
      host_memory_ = h == "pageable" ? placement::HostMemory::Pageable : placement::HostMemory::Pinned;
    }
  }

  void apply(const trace::Header& header, placement::Placement& p, Resolved&) const override {
    p.execute = execute_;
    p.copy.host_memory = host_memory_;
    for (const auto& t : header.tensors)
      if (t.kind == trace::TensorKind::Weight && p.device[t.id] == placement::kDisk)
        throw InputError("", 0, "--offload",
                         "weights on disk (" + t.name + ") are read into memory and copied to the GPU when used; "
                         "nothing executes on a disk: use the copy offload path");
    snap_layers(header, p, [](placement::DeviceId d) { return d != placement::kComputeGpu; });
    for (const auto& t : header.tensors) {
      if (t.kind != trace::TensorKind::Weight || p.path[t.id] == placement::Path::Managed) continue;
      if (p.device[t.id] != placement::kComputeGpu) p.path[t.id] = placement::Path::Execute;
    }
  }
  int staged_layers(placement::DeviceId) const override { return 0; }

 private:
  placement::ExecuteOptions execute_;
  placement::HostMemory host_memory_ = placement::HostMemory::Pinned;
};

}  // namespace

std::unique_ptr<OffloadPath> make_execute_path(config::Section& o) { return std::make_unique<ExecutePath>(o); }

void snap_layers(const trace::Header& header, placement::Placement& p, bool (*runs_there)(placement::DeviceId)) {
  std::map<std::int32_t, std::map<placement::DeviceId, double>> bytes_by_layer;
  for (const auto& t : header.tensors)
    if (t.kind == trace::TensorKind::Weight && p.path[t.id] != placement::Path::Managed)
      bytes_by_layer[t.layer][p.device[t.id]] += static_cast<double>(t.bytes);
  std::map<std::int32_t, placement::DeviceId> target;
  for (const auto& [layer, by_device] : bytes_by_layer) {
    // The device with the most bytes; the compute GPU wins ties (it is first: kCpu = -1 is checked last).
    placement::DeviceId best = placement::kComputeGpu;
    double best_bytes = by_device.count(placement::kComputeGpu) ? by_device.at(placement::kComputeGpu) : 0.0;
    for (const auto& [dev, b] : by_device)
      if (dev > placement::kComputeGpu && b > best_bytes) best = dev, best_bytes = b;
    if (by_device.count(placement::kCpu) && by_device.at(placement::kCpu) > best_bytes) best = placement::kCpu;
    target[layer] = best;
  }
  for (const auto& t : header.tensors) {
    if (t.kind != trace::TensorKind::Weight || p.path[t.id] == placement::Path::Managed) continue;
    const placement::DeviceId to = target[t.layer];
    if (runs_there(to)) p.device[t.id] = to;
    else if (to == placement::kComputeGpu && runs_there(p.device[t.id])) p.device[t.id] = placement::kComputeGpu;
  }
}

}  // namespace tiersim::strategy
