#include "hardware/profile_loader.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/units.hpp"
#include "config/embedded_files.hpp"
#include "config/profile_source.hpp"
#include "config/strict_reader.hpp"
#include "hardware/catalogue.hpp"
#include "trace/trace.hpp"

namespace tiersim::hw {
namespace {

using config::Section;

TransferCurve read_curve(Section& parent, const std::string& key) {
  Section s = parent.child(key);
  TransferCurve c;
  c.bandwidth = s.bandwidth("bandwidth");
  c.latency = s.duration("latency");
  if (s.has("points")) c.points = s.size_rate_points("points");
  s.finish();
  return c;
}

}  // namespace

HardwareProfile parse_profile(const std::string& text, const std::string& file) {
  return parse_profile_node(config::parse_document(text, file), file);
}

HardwareProfile parse_profile_node(const YAML::Node& root, const std::string& file) {
  if (!root || !root.IsMap()) throw InputError(file, 0, "", "expected a YAML mapping (a hardware profile)");
  Section top(root, "", file);
  HardwareProfile p;
  p.origin = file;
  if (top.integer("tiersim_profile", 1, 1000) != 1)
    throw InputError(file, 0, "tiersim_profile", "unsupported profile schema version (this build reads 1)");
  p.name = top.text("name");
  p.description = top.text("description");
  if (top.has("facts")) {
    Section facts = top.child("facts");
    for (const std::string& k : facts.keys()) p.extra[k] = facts.text(k);
    facts.finish();
  }

  {
    Section g = top.child("gpu");
    p.sources["gpu"] = g.text("source");
    p.gpu.name = g.text("name");
    p.gpu.count = g.integer("count", 1, 64);
    p.gpu.memory = g.bytes("memory");
    p.gpu.reserved = g.bytes("reserved", true);
    if (p.gpu.reserved >= p.gpu.memory) throw InputError(file, 0, "gpu.reserved", "must be less than gpu.memory");
    p.gpu.memory_bandwidth = g.bandwidth("memory_bandwidth");
    p.gpu.memory_efficiency = g.number("memory_efficiency", 0.01, 1.0);
    p.gpu.compute = g.rates("compute");
    p.gpu.compute_efficiency = g.number("compute_efficiency", 0.01, 1.0);
    p.gpu.kernel_min_time = g.duration("kernel_min_time");
    if (g.has("provenance")) {
      p.gpu.provenance = g.text("provenance");
      if (p.gpu.provenance != "measured" && p.gpu.provenance != "published" &&
          p.gpu.provenance != "architecture-prior" && p.gpu.provenance != "datasheet")
        g.fail("provenance", "measured, published, architecture-prior or datasheet, not '" + p.gpu.provenance + "'");
    }
    if (g.has("attention_efficiency")) p.gpu.attention_efficiency = g.flop_efficiency_points("attention_efficiency");
    if (g.has("fp32_gemm_efficiency")) {
      p.gpu.fp32_gemm_efficiency = g.efficiency_points("fp32_gemm_efficiency", "a matrix product's output elements");
      p.gpu.fp32_gemm_row_tile = static_cast<double>(g.integer("fp32_gemm_row_tile", 1, 4096));
    } else if (g.has("fp32_gemm_row_tile")) {
      g.fail("fp32_gemm_row_tile", "goes with fp32_gemm_efficiency");
    }
    if (g.has("convolution_efficiency")) {
      // "KERNEL:IN:OUT": [[positions, efficiency], ...] (3x3x3:96:96, 3x3:384:192)
      Section c = g.child("convolution_efficiency");
      for (const std::string& key : c.keys()) {
        trace::ConvShape shape;
        const std::size_t a = key.find(':'), b = a == std::string::npos ? a : key.find(':', a + 1);
        bool ok = b != std::string::npos && trace::parse_conv_kernel(std::string_view(key).substr(0, a), shape);
        try {
          std::size_t used_in = 0, used_out = 0;
          const std::string in = ok ? key.substr(a + 1, b - a - 1) : "", out = ok ? key.substr(b + 1) : "";
          const unsigned long ci = ok ? std::stoul(in, &used_in) : 0, co = ok ? std::stoul(out, &used_out) : 0;
          ok = ok && used_in == in.size() && used_out == out.size() && ci >= 1 && co >= 1 && ci <= (1u << 20) &&
               co <= (1u << 20);
          shape.in = static_cast<std::uint32_t>(ci);
          shape.out = static_cast<std::uint32_t>(co);
        } catch (const std::exception&) {
          ok = false;
        }
        // Written as the writer writes it (no signs, spaces or leading zeros), so one shape has one spelling.
        ok = ok && key == shape.kernel_name() + ":" + std::to_string(shape.in) + ":" + std::to_string(shape.out);
        if (!ok)
          c.fail(key, "a convolution's key is KERNEL:IN:OUT (3x3x3:96:96, 3x3:384:192; sides 1 to 15, channels 1 to "
                      "1048576, plain digits)");
        for (const auto& earlier : p.gpu.convolution_efficiency)
          if (earlier.shape.in == shape.in && earlier.shape.out == shape.out &&
              earlier.shape.kernel_name() == shape.kernel_name())
            c.fail(key, "this kernel and channel pair is given twice");
        p.gpu.convolution_efficiency.push_back({shape, c.efficiency_points(key, "a convolution's output positions")});
      }
      c.finish();
    }
    g.finish();
  }
  {
    Section h = top.child("host");
    p.sources["host"] = h.text("source");
    p.host.name = h.text("name");
    p.host.memory = h.bytes("memory");
    p.host.memory_bandwidth = h.bandwidth("memory_bandwidth");
    p.host.memory_efficiency = h.number("memory_efficiency", 0.01, 1.0);
    p.host.compute = h.rates("compute");
    p.host.compute_efficiency = h.number("compute_efficiency", 0.01, 1.0);
    p.host.op_overhead = h.duration("op_overhead");
    if (h.has("cpu_kernels")) {
      Section k = h.child("cpu_kernels");
      CpuKernelSpec spec;
      p.sources["host.cpu_kernels"] = k.text("source");
      spec.cores = k.integer("cores", 1, 4096);
      spec.read_bandwidth = k.thread_rate_points("read_bandwidth");
      // A rate curve by threads per ggml weight type (gemv; gemv_id, optional).
      auto curves_by_type = [&](const char* key, std::map<std::string, std::vector<std::pair<double, double>>>& out) {
        Section g = k.child(key);
        for (const std::string& type : g.keys()) {
          if (!config::is_ggml_type_name(type))
            g.fail(type, "not a ggml weight type (lower case: q4_k, q6_k, q8_0, f16, bf16, ...)");
          out[type] = g.thread_rate_points(type);
        }
        g.finish();
      };
      curves_by_type("gemv", spec.gemv);
      if (k.has("gemv_id")) curves_by_type("gemv_id", spec.gemv_id);
      k.finish();
      p.host.kernels = spec;
    }
    h.finish();
  }
  {
    Section l = top.child("host_link");
    p.sources["host_link"] = l.text("source");
    p.host_link.type = l.text("type");
    if (p.host_link.type != "pcie") throw InputError(file, 0, "host_link.type", "only 'pcie' host links are modelled");
    p.host_link.generation = l.integer("generation", 1, 7);
    p.host_link.width = l.integer("width", 1, 32);
    p.host_link.h2d_pinned = read_curve(l, "h2d_pinned");
    p.host_link.d2h_pinned = read_curve(l, "d2h_pinned");
    p.host_link.h2d_pageable = read_curve(l, "h2d_pageable");
    p.host_link.d2h_pageable = read_curve(l, "d2h_pageable");
    if (l.has("d2h_fresh_pageable")) p.host_link.d2h_fresh_pageable = read_curve(l, "d2h_fresh_pageable");
    p.host_link.bidirectional = l.bandwidth("bidirectional");
    l.finish();
  }
  if (top.has("peer_link")) {
    Section l = top.child("peer_link");
    PeerLinkSpec peer;
    p.sources["peer_link"] = l.text("source");
    peer.type = l.text("type");
    if (peer.type != "nvlink" && peer.type != "pcie")
      throw InputError(file, 0, "peer_link.type", "must be 'nvlink' or 'pcie'");
    peer.transfer = read_curve(l, "transfer");
    peer.bidirectional = l.bandwidth("bidirectional");
    l.finish();
    p.peer_link = peer;
  } else if (p.gpu.count > 1) {
    throw InputError(file, 0, "peer_link", "missing: a profile with gpu.count > 1 must describe the link between GPUs");
  }
  if (top.has("managed_memory")) {
    Section m = top.child("managed_memory");
    ManagedMemorySpec um;
    p.sources["managed_memory"] = m.text("source");
    um.va_block = m.bytes("va_block");
    // nvidia-uvm's VA block is 2 MiB; anything between a 4 KiB page and 1 GiB is a what-if, beyond is an error.
    if (um.va_block < 4096 || um.va_block > 1073741824.0)
      m.fail("va_block", "must be between 4 KiB and 1 GiB (nvidia-uvm: 2 MiB)");
    um.big_page = m.bytes("big_page");
    if (um.big_page > um.va_block) throw InputError(file, 0, "managed_memory.big_page", "must not exceed va_block");
    um.prefetch_threshold = m.number("prefetch_threshold", 0.01, 1.0);
    um.fault_batch_count = m.integer("fault_batch_count", 1, 1 << 20);
    um.fault_latency = m.duration("fault_latency");
    um.fault_block_overhead = m.duration("fault_block_overhead");
    um.fault_migration_bandwidth = m.bandwidth("fault_migration_bandwidth");
    um.prefetch_to_gpu = m.bandwidth("prefetch_to_gpu");
    um.evict_to_cpu = m.bandwidth("evict_to_cpu");
    um.remote_read_bandwidth = m.bandwidth("remote_read_bandwidth");
    if (m.has("evict_block_overhead")) um.evict_block_overhead = m.duration("evict_block_overhead");
    if (m.has("evict_writeback_bandwidth")) um.evict_writeback_bandwidth = m.bandwidth("evict_writeback_bandwidth");
    if (m.has("evicting_fault_bandwidth")) {
      if (m.has("evict_block_overhead"))
        m.fail("evicting_fault_bandwidth", "prices a fault that evicts in place of evict_block_overhead: give one of the two");
      um.evicting_fault_bandwidth = m.bandwidth("evicting_fault_bandwidth");
    }
    if (m.has("gemv_remote_input_bandwidth")) um.gemv_remote_input_bandwidth = m.bandwidth("gemv_remote_input_bandwidth");
    if (m.has("remote_gemm_reads")) um.remote_gemm_reads = m.row_count_points("remote_gemm_reads");
    if (m.has("remote_gemv"))
      for (const auto& r : m.size_size_duration_rows("remote_gemv")) um.remote_gemv.push_back({r[0], r[1], r[2], r[3]});
    if (m.has("fresh_touch")) {
      um.fresh_touch = m.size_rate_points("fresh_touch");
      if (um.fresh_touch.empty()) m.fail("fresh_touch", "expected at least one [size, rate] point");
    }
    if (m.has("advised_cycle")) {
      Section c = m.child("advised_cycle");
      if (c.has("prefer_cpu")) um.advised_cycle.prefer_cpu = c.size_duration_points("prefer_cpu");
      if (c.has("prefer_cpu_accessed_by"))
        um.advised_cycle.prefer_cpu_accessed_by = c.size_duration_points("prefer_cpu_accessed_by");
      if (c.has("prefer_cpu_read_mostly"))
        um.advised_cycle.prefer_cpu_read_mostly = c.size_duration_points("prefer_cpu_read_mostly");
      c.finish();
      if (um.advised_cycle.empty())
        m.fail("advised_cycle", "expected prefer_cpu, prefer_cpu_accessed_by or prefer_cpu_read_mostly");
    }
    um.mapping_fault_cost = m.duration("mapping_fault_cost");
    um.alloc_call = m.duration("alloc_call");
    um.free_call = m.duration("free_call");
    m.finish();
    p.managed_memory = um;
  }
  if (top.has("disk")) {
    Section d = top.child("disk");
    DiskSpec disk;
    p.sources["disk"] = d.text("source");
    disk.read_bandwidth = d.bandwidth("read_bandwidth");
    disk.read_latency = d.duration("read_latency");
    d.finish();
    p.disk = disk;
  }
  if (top.has("framework"))
    top.fail("framework", "framework costs are a runtime profile now (calib/runtimes/, sim --runtime): move this section "
                          "into a runtime file");
  top.finish();
  return p;
}

HardwareProfile load_profile_file(const std::string& path) {
  return parse_profile(io::read_file(path, "", "hardware profile"), path);
}

std::pair<YAML::Node, std::string> profile_tree(const std::string& spec) {
  std::error_code ec;
  const bool preset = std::any_of(config::embedded_profiles().begin(), config::embedded_profiles().end(),
                                  [&](const config::EmbeddedFile& f) { return f.name == spec; });
  // A path (a '/', or a .yaml name) that names no file is a missing file, not a composition.
  const bool looks_like_path = spec.find('/') != std::string::npos ||
                               (spec.size() > 5 && spec.compare(spec.size() - 5, 5, ".yaml") == 0);
  if (!preset && !looks_like_path && !std::filesystem::exists(spec, ec) &&
      (is_composition(spec) || spec.find('+') != std::string::npos)) {
    Composed c = compose(spec);  // an unknown GPU before a '+' is named here, with the catalogue's GPUs
    return {c.tree, "catalogue:" + c.canonical};
  }
  config::ProfileSource src;
  try {
    src = config::find_profile(spec, config::embedded_profiles(), "--hw", "hardware profile", "preset");
  } catch (const InputError& e) {
    throw InputError(e.file(), e.line(), e.key(),
                     e.message() + "; nor a catalogue machine such as 2xrtx3090+nvlink ('sim catalogue' lists the parts)");
  }
  YAML::Node root = config::parse_document(src.text, src.origin);
  if (!root.IsMap()) throw InputError(src.origin, 0, "", "expected a YAML mapping (a hardware profile)");
  return {root, src.origin};
}

HardwareProfile resolve_profile(const std::string& spec) {
  auto [tree, origin] = profile_tree(spec);
  HardwareProfile p = parse_profile_node(tree, origin);
  return p;
}

std::vector<PresetInfo> list_presets() {
  std::vector<PresetInfo> out;
  for (const auto& preset : config::embedded_profiles()) {
    HardwareProfile p = parse_profile(preset.text, "preset:" + preset.name);
    out.push_back({preset.name, p.description});
  }
  return out;
}

}  // namespace tiersim::hw
