#include "policies/strategy/presets.hpp"

#include <algorithm>
#include <cstdio>

#include "core/error.hpp"

namespace tiersim::strategy {
namespace {

struct Preset {
  PresetInfo info;
  const char* placement;
  const char* memory;  // NAME:OPTIONS as on the command line
  const char* offload = "copy";
};

const std::vector<Preset>& table() {
  static const std::vector<Preset> list{
      {{"resident", "everything in the compute GPU's memory (fails clearly if it does not fit)"}, "all-gpu", "device"},
      {{"bytes", "DisTorch bytes split, e.g. --split \"cuda:0,2.5gb;cpu,*\" (default: 4 GiB of virtual VRAM)"},
       "distorch.bytes", "device", "copy:host=pageable,stream"},
      {{"ratio", "DisTorch ratio split, e.g. --split \"cuda:0,80%;cpu,20%\""}, "distorch.ratio", "device",
       "copy:host=pageable,stream"},
      {{"fraction", "DisTorch fraction-of-device-memory split, e.g. --split \"cuda:0,0.8;cpu,0.5\""},
       "distorch.fraction", "device", "copy:host=pageable,stream"},
      {{"layers", "first N transformer layers on the GPU, the rest offloaded (--layers N)"}, "layers", "device"},
      {{"um", "CUDA managed memory, demand paging (oversubscription allowed)"}, "all-gpu", "managed"},
      {{"um-cpu", "managed memory, weights PreferredLocation=CPU: read over the link every time"}, "all-gpu",
       "managed:prefer-cpu"},
      {{"um-accessedby", "managed memory, weights PreferredLocation=CPU + AccessedBy=GPU (no mapping faults)"},
       "all-gpu", "managed:prefer-cpu,accessed-by"},
      {{"um-readmostly", "managed memory, weights ReadMostly: read-only duplicates on the GPU"}, "all-gpu",
       "managed:read-mostly"},
      {{"um-prefetch", "managed memory + cudaMemPrefetchAsync of the next N layers' weights (--prefetch N, default 1)"},
       "all-gpu", "managed:prefetch=1"},
      {{"accelerate", "HF from_pretrained(device_map=\"auto\"): accelerate's map; offloaded leaves copied per forward "
                      "(synchronous, pageable), layers on other GPUs run there"},
       "accelerate.auto", "device", "copy:host=pageable,sync,peer=execute"},
      {{"comfyui", "ComfyUI native partial loading (v0.19.3, --disable-dynamic-vram): its budget, largest weights "
                   "stay, offloaded weights pinned within its RAM cap and cast per use on two offload streams"},
       "comfy.lowvram", "device", "copy:host=pinned,stream"},
      {{"llamacpp", "llama.cpp -ngl N (--placement llamacpp.ngl:ngl=N): the last layers and the output on the GPU, "
                    "the rest and the token embedding on the CPU, where they run with --threads N; prompt steps of "
                    "32+ tokens run them on the GPU, their weights copied from the mapped file (ggml's op offload; "
                    "llama.cpp's default load mode mmap keeps them pageable: --host-memory pinned is -lm none)",
        "llamacpp", 512},
       "llamacpp.ngl", "device", "execute:op-offload=32,host=pageable"},
  };
  return list;
}

// A preset's part: given by the preset, not the user.
PartSpec preset_part(const std::string& text, const std::string& flag) {
  PartSpec p = PartSpec::parse(text, flag);
  p.given = false;
  p.given_by.clear();
  p.origin.clear();
  return p;
}

}  // namespace

const std::vector<PresetInfo>& presets() {
  static const std::vector<PresetInfo> list = [] {
    std::vector<PresetInfo> out;
    for (const auto& p : table()) out.push_back(p.info);
    return out;
  }();
  return list;
}

StrategySpec preset_spec(const std::string& name) {
  std::string known;
  for (const auto& p : table()) {
    if (p.info.name == name) {
      StrategySpec spec;
      spec.preset = name;
      spec.placement = preset_part(p.placement, "--placement");
      spec.memory = preset_part(p.memory, "--memory");
      spec.offload = preset_part(p.offload, "--offload");
      return spec;
    }
    known += (known.empty() ? "" : ", ") + p.info.name;
  }
  throw InputError("", 0, "--policy", "unknown policy '" + name + "' (known: " + known + ")");
}

void apply_flags(StrategySpec& spec, const LegacyFlags& f) {
  if (f.split) spec.placement.set("split", *f.split, "--split");
  if (f.layers) spec.placement.set("layers", std::to_string(*f.layers), "--layers");
  if (f.ngl) spec.placement.set("ngl", std::to_string(*f.ngl), "--ngl");
  if (f.offload_bytes) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g B", *f.offload_bytes);
    spec.placement.set("offload", buf, "--offload-gb");
  }
  if (f.donor) spec.placement.set("donor", *f.donor, "--donor");
  if (f.offload_exec && *f.offload_exec == "cpu") {
    if (spec.offload.name != "copy" || !spec.offload.given_by.empty())
      throw InputError("", 0, "--offload-exec", "give the offload path once: --offload-exec cpu is --offload execute");
    spec.offload.name = "execute";
    spec.offload.options.clear();  // the preset's copy options (host memory, streams) mean nothing there
    spec.offload.given = true;
    spec.offload.origin = "--offload-exec";
  }
  if (f.prefetch) {
    // Under managed memory with prefetch (um-prefetch), --prefetch is cudaMemPrefetchAsync's depth (at
    // least 1, as that preset always prefetches); otherwise the weight copies' look-ahead.
    if (spec.memory.name == "managed" && spec.memory.options.count("prefetch"))
      spec.memory.set("prefetch", std::to_string(std::max(1, *f.prefetch)), "--prefetch");
    else {
      // Copies N layers ahead replace the preset's on-demand copies on a stream.
      if (!spec.offload.given_by.count("stream")) spec.offload.options.erase("stream");
      spec.offload.set("prefetch", std::to_string(*f.prefetch), "--prefetch");
    }
  }
  if (f.host_memory) spec.offload.set("host", *f.host_memory, "--host-memory");
  if (f.allocator) spec.memory.set("allocator", *f.allocator, "--allocator");
  if (f.um_scope) spec.memory.set("scope", *f.um_scope, "--um-scope");
  if (f.um_filled) spec.memory.set("filled", *f.um_filled, "--um-filled");
  if (f.threads) spec.offload.set("threads", std::to_string(*f.threads), "--threads");
  if (!f.override_tensor.empty()) {
    std::string joined;
    for (const auto& o : f.override_tensor) joined += (joined.empty() ? "" : ",") + o;
    spec.placement.set("ot", joined, "--override-tensor");
  }
  if (f.no_kv_offload) spec.placement.set("kv-offload", "off", "--no-kv-offload");
  if (f.fit) spec.placement.set("fit", *f.fit, "--fit");
  if (f.ctx_size) spec.placement.set("ctx", std::to_string(*f.ctx_size), "--ctx-size");
  if (f.fit_target) spec.placement.set("fit-target", *f.fit_target, "--fit-target");
  if (f.fit_ctx) spec.placement.set("fit-ctx", std::to_string(*f.fit_ctx), "--fit-ctx");
}

}  // namespace tiersim::strategy
