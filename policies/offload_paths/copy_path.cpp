// `copy`: a weight homed off the compute GPU is copied to it when its layer runs (ComfyUI and DisTorch
// cast modules on use; accelerate's hooks copy each tensor before the forward). Options:
//   host=pinned|pageable (or the bare words)  host memory the weights are copied from (default pinned)
//   prefetch=N                                issue copies N layers ahead on a copy stream into N+1
//                                             staging buffers (default 0: on demand, on the compute stream)
//   sync                                      the host waits for each copy (a synchronous .to())
//   stream                                    on demand but on a copy stream: the next module's copy runs
//                                             while this one computes (ComfyUI's offload streams)
//   peer=copy|execute                         weights on another GPU: copied too (a donor, default), or their
//                                             layers run on that GPU (a pipeline, as accelerate's device_map)
#include <algorithm>
#include <map>
#include <set>

#include "policies/offload_paths/paths.hpp"

namespace tiersim::strategy {
namespace {

class CopyPath final : public OffloadPath {
 public:
  explicit CopyPath(config::Section& o) {
    const bool pinned = o.has("pinned") && o.flag("pinned");
    const bool pageable = o.has("pageable") && o.flag("pageable");
    if (pinned && pageable) o.fail("pageable", "give pinned or pageable, not both");
    if (o.has("host")) {
      if (pinned || pageable) o.fail("host", "give host=... or the bare word, not both");
      const std::string h = o.text("host");
      if (h != "pinned" && h != "pageable") o.fail("host", "must be 'pinned' or 'pageable', not '" + h + "'");
      copy_.host_memory = h == "pageable" ? placement::HostMemory::Pageable : placement::HostMemory::Pinned;
    } else if (pageable) {
      copy_.host_memory = placement::HostMemory::Pageable;
    }
    if (o.has("prefetch")) copy_.prefetch = o.integer("prefetch", 0, 1000);
    if (o.has("sync")) copy_.sync = o.flag("sync");
    if (o.has("stream")) copy_.stream = o.flag("stream");
    if (copy_.stream && copy_.prefetch > 0) o.fail("stream", "is on-demand copies on a copy stream; prefetch=N already uses one");
    if (o.has("peer")) {
      const std::string peer = o.text("peer");
      if (peer != "copy" && peer != "execute") o.fail("peer", "must be 'copy' or 'execute', not '" + peer + "'");
      peer_executes_ = peer == "execute";
    }
  }

  void apply(const trace::Header& header, placement::Placement& p, Resolved& resolved) const override {
    p.copy = copy_;
    // A layer runs on another GPU only when all its weights are there (after moving layers whole);
    // otherwise its weights there are copied like the rest.
    std::map<std::int32_t, std::set<placement::DeviceId>> devices_of_layer;
    if (peer_executes_) {
      snap_layers(header, p, [](placement::DeviceId d) { return d > placement::kComputeGpu; });
      for (const auto& t : header.tensors)
        if (t.kind == trace::TensorKind::Weight && p.path[t.id] != placement::Path::Managed)
          devices_of_layer[t.layer].insert(p.device[t.id]);
    }
    for (const auto& t : header.tensors) {
      if (t.kind != trace::TensorKind::Weight || p.path[t.id] == placement::Path::Managed) continue;
      const placement::DeviceId d = p.device[t.id];
      if (d == placement::kComputeGpu) continue;
      const bool executes = d > placement::kComputeGpu && peer_executes_ && devices_of_layer[t.layer].size() == 1;
      p.path[t.id] = executes ? placement::Path::Execute : placement::Path::Copy;
    }
    // A model whose layers copy their own weights (ComfyUI-GGUF: GGMLLayer.cast_bias_weight calls
    // s.weight.to(device) without non_blocking) copies synchronously on the compute stream, whatever the
    // framework around it would do with an ordinary module.
    const auto own = header.meta.find("weight_copy");
    if (own != header.meta.end()) {  // the trace reader accepts only `sync`
      const bool copies = std::any_of(header.tensors.begin(), header.tensors.end(),
                                      [&](const trace::Tensor& t) { return p.path[t.id] == placement::Path::Copy; });
      if (copies) {
        p.copy.sync = true;
        p.copy.stream = false;
        p.copy.prefetch = 0;
        resolved.emplace_back("weight copies", "blocking .to(device) in the model's own layers, on the compute stream "
                                               "(ComfyUI-GGUF's GGMLLayer.cast_bias_weight)");
      }
    }
    if (placement::has_pipeline(p)) resolved.emplace_back("other GPUs", "run the layers they hold (pipeline)");
  }
  int staged_layers(placement::DeviceId donor) const override {
    return donor > placement::kComputeGpu && peer_executes_ ? 0 : copy_.prefetch + 1;
  }

 private:
  placement::CopyOptions copy_;
  bool peer_executes_ = false;
};

}  // namespace

std::unique_ptr<OffloadPath> make_copy_path(config::Section& o) { return std::make_unique<CopyPath>(o); }

}  // namespace tiersim::strategy
