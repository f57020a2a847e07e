#include "placement/placement.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <stdexcept>

#include "core/error.hpp"
#include "core/units.hpp"

namespace tiersim::placement {

std::string device_name(DeviceId d) {
  return d == kCpu ? "cpu" : d == kDisk ? "disk" : "cuda:" + std::to_string(d);
}

DeviceId parse_device(std::string_view text, bool disk) {
  if (text == "cpu") return kCpu;
  if (disk && text == "disk") return kDisk;
  if (text.substr(0, 5) == "cuda:") {
    int n = -1;
    auto rest = text.substr(5);
    auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), n);
    if (ec == std::errc() && ptr == rest.data() + rest.size() && n >= 0) return n;
  }
  throw std::invalid_argument("unknown device '" + std::string(text) + "' (expected cpu or cuda:N)");
}

const char* to_string(Path p) {
  switch (p) {
    case Path::Local: return "local";
    case Path::Copy: return "copy";
    case Path::Execute: return "execute";
    case Path::Managed: return "managed";
  }
  return "?";
}
const char* to_string(HostMemory m) { return m == HostMemory::Pinned ? "pinned" : "pageable"; }

DeviceUsage usage_on(const trace::Header& header, const Placement& p, DeviceId d) {
  DeviceUsage u;
  for (const auto& t : header.tensors) {
    // A sysmem-fallback tensor's VRAM-resident prefix is on the compute GPU.
    const double prefix = d == kComputeGpu ? vram_prefix_of(p, t.id) : 0.0;
    if ((p.device[t.id] != d || p.path[t.id] == Path::Managed) && prefix <= 0) continue;
    if (t.kind == trace::TensorKind::Transient) continue;  // allocated and released by the run's ops, not static
    const double b = prefix > 0 ? prefix : static_cast<double>(t.bytes);
    if (t.kind == trace::TensorKind::Weight) u.weights += b;
    else if (t.kind == trace::TensorKind::KvCache) u.kv += b * p.kv_allocation_scale;
    else u.activations += b;
  }
  return u;
}

namespace {

enum class Which { All, Sysmem, Paged };

DeviceUsage managed_bytes(const trace::Header& header, const Placement& p, Which which) {
  DeviceUsage u;
  if (!p.managed.enabled) return u;
  for (const auto& t : header.tensors) {
    if (!p.managed.managed[t.id]) continue;
    const bool sysmem = (p.managed.advice[t.id] & kSysmemFallback) != 0;
    if ((which == Which::Sysmem && !sysmem) || (which == Which::Paged && sysmem)) continue;
    const double b = static_cast<double>(t.bytes) - (which == Which::Sysmem ? vram_prefix_of(p, t.id) : 0.0);
    if (t.kind == trace::TensorKind::Weight) u.weights += b;
    else if (t.kind == trace::TensorKind::KvCache) u.kv += b * p.kv_allocation_scale;
    else u.activations += b;
  }
  return u;
}

}  // namespace

DeviceUsage managed_usage(const trace::Header& header, const Placement& p) { return managed_bytes(header, p, Which::All); }
DeviceUsage sysmem_usage(const trace::Header& header, const Placement& p) { return managed_bytes(header, p, Which::Sysmem); }
DeviceUsage paged_managed_usage(const trace::Header& header, const Placement& p) {
  return managed_bytes(header, p, Which::Paged);
}

double weight_bytes(const trace::Header& header) {
  double total = 0;
  for (const auto& t : header.tensors)
    if (t.kind == trace::TensorKind::Weight) total += static_cast<double>(t.bytes);
  return total;
}

double offloaded_weight_bytes(const trace::Header& header, const Placement& p) {
  // Managed weights count as offloaded: their home is host memory and the driver moves them.
  double total = 0;
  for (const auto& t : header.tensors)
    if (t.kind == trace::TensorKind::Weight && (p.device[t.id] != kComputeGpu || p.path[t.id] == Path::Managed))
      total += static_cast<double>(t.bytes);
  return total;
}

// A GPU other than the compute GPU that runs layers needs an activation workspace of its own, as large
// as the compute GPU's (the same hidden states pass through it).
double workspace_on(const trace::Header& header, const Placement& p, DeviceId d) {
  bool executes = false;
  for (std::size_t i = 0; i < p.path.size() && !executes; ++i) executes = p.path[i] == Path::Execute && p.device[i] == d;
  if (!executes || d == kComputeGpu || d == kCpu) return 0;
  double bytes = 0;
  for (const auto& t : header.tensors)
    if (t.kind == trace::TensorKind::Activation) bytes += static_cast<double>(t.bytes);
  return bytes;
}

bool has_pipeline(const Placement& p) {
  for (std::size_t i = 0; i < p.path.size(); ++i)
    if (p.path[i] == Path::Execute && p.device[i] > kComputeGpu) return true;
  return false;
}

namespace {
bool copied_tensor(const Placement& p, const trace::Tensor& t) {
  return t.kind == trace::TensorKind::Weight && p.path[t.id] == Path::Copy;
}

}  // namespace

double largest_copied_layer(const trace::Header& header, const Placement& p) {
  std::map<std::int32_t, double> per_layer;
  for (const auto& t : header.tensors)
    if (copied_tensor(p, t)) per_layer[t.layer] += static_cast<double>(t.bytes);
  double best = 0;
  for (const auto& [layer, bytes] : per_layer) best = std::max(best, bytes);
  return best;
}

double staging_bound(const trace::Header& header, const Placement& p) {
  return largest_copied_layer(header, p) * (p.copy.prefetch + 1);
}

double transient_bound(const trace::Header& header, const Placement& p) {
  const auto it = header.meta.find("transient_peak");
  if (it == header.meta.end()) return 0;
  for (const auto& t : header.tensors)
    if (t.kind == trace::TensorKind::Transient && p.path[t.id] != Path::Managed) return std::stod(it->second);
  return 0;
}

double static_bytes_on_compute_gpu(const trace::Header& header, const hw::HardwareProfile& hw, const Placement& p) {
  return usage_on(header, p, kComputeGpu).total() + hw.gpu.reserved;
}

void add_static_peaks(const trace::Header& header, const hw::HardwareProfile& hw, const Placement& p,
                      std::map<std::string, double>& peaks) {
  for (DeviceId d = 1; d < hw.gpu.count; ++d) {
    const double used = usage_on(header, p, d).total() + workspace_on(header, p, d);
    peaks[device_name(d)] = used + (used > 0 ? hw.gpu.reserved : 0);
  }
  peaks["cpu"] = usage_on(header, p, kCpu).total();
  const double on_disk = usage_on(header, p, kDisk).weights;
  if (on_disk > 0) peaks["disk"] = on_disk;  // not memory: the file weights are read from
}

double managed_gpu_capacity(const trace::Header& header, const hw::HardwareProfile& hw, const Placement& p) {
  return hw.gpu.memory - static_bytes_on_compute_gpu(header, hw, p) - staging_bound(header, p) - transient_bound(header, p);
}

namespace {

std::string usage_text(const DeviceUsage& u, double reserved) {
  std::string s = "weights " + units::format_bytes(u.weights) + ", KV cache " + units::format_bytes(u.kv) +
                  ", activations " + units::format_bytes(u.activations);
  if (reserved > 0) s += ", reserved " + units::format_bytes(reserved);
  return s;
}

}  // namespace

void place_kv_and_activations(const trace::Header& header, Placement& p) {
  if (p.device.size() != header.tensors.size() || p.path.size() != header.tensors.size())
    throw std::logic_error("placement does not cover every tensor");
  // Where each layer runs: where its Execute-path weights are (the CPU, or the GPU holding them).
  std::map<std::int32_t, DeviceId> layer_device;
  for (const auto& t : header.tensors)
    if (t.kind == trace::TensorKind::Weight && p.path[t.id] == Path::Execute) layer_device[t.layer] = p.device[t.id];
  for (const auto& t : header.tensors) {
    if (p.path[t.id] == Path::Managed) continue;  // the driver decides where it lives
    if (t.kind == trace::TensorKind::KvCache) {
      const auto home = p.kv_home.find(t.layer);
      const auto it = layer_device.find(t.layer);
      p.device[t.id] = home != p.kv_home.end() ? home->second : it == layer_device.end() ? kComputeGpu : it->second;
      p.path[t.id] = p.device[t.id] == kComputeGpu ? Path::Local : Path::Execute;
    } else if (trace::is_activation(t.kind)) {
      p.device[t.id] = kComputeGpu;
      p.path[t.id] = Path::Local;
    }
  }
}

void finalize(const trace::Header& header, const hw::HardwareProfile& hw, Placement& p, const std::string& policy) {
  place_kv_and_activations(header, p);

  const std::string model = header.meta.count("model") ? header.meta.at("model") : std::string("the model");
  for (DeviceId d : p.device) {
    if (d >= hw.gpu.count)
      throw CapacityError("policy '" + policy + "' places weights on " + device_name(d) + ", but the profile '" +
                          hw.name + "' has " + std::to_string(hw.gpu.count) + " GPU(s)");
  }
  if (!hw.disk && usage_on(header, p, kDisk).weights > 0)
    throw InputError(hw.origin, 0, "disk",
                     "'" + policy + "' reads weights from disk, but the profile '" + hw.name +
                         "' has no disk section (read_bandwidth, read_latency: calib/profiles/SCHEMA.md)");
  // The compute GPU also holds the staging buffers of copied layers: prefetch + 1 layers at most.
  DeviceUsage gpu = usage_on(header, p, kComputeGpu);
  gpu.activations += transient_bound(header, p);
  const double staging = staging_bound(header, p);
  const double need = gpu.total() + hw.gpu.reserved + staging;
  if (need > hw.gpu.memory) {
    std::string what = usage_text(gpu, hw.gpu.reserved);
    if (staging > 0) what += ", staging for " + std::to_string(p.copy.prefetch + 1) + " copied layer(s) " + units::format_bytes(staging);
    const auto [needs, has] = units::format_bytes_apart(need, hw.gpu.memory);
    throw CapacityError(model + " under '" + policy + "' needs " + needs + " on cuda:0 (" + what + "), but cuda:0 has " +
                            has + " on '" + hw.name + "'",
                        "cuda:0", need, hw.gpu.memory);
  }
  for (DeviceId d = 1; d < hw.gpu.count; ++d) {
    DeviceUsage u = usage_on(header, p, d);
    u.activations += workspace_on(header, p, d);
    if (u.total() + hw.gpu.reserved > hw.gpu.memory)
      throw CapacityError(model + " under '" + policy + "' needs " + units::format_bytes(u.total() + hw.gpu.reserved) +
                              " on " + device_name(d) + " (" + usage_text(u, hw.gpu.reserved) + "), but it has " +
                              units::format_bytes(hw.gpu.memory),
                          device_name(d), u.total() + hw.gpu.reserved, hw.gpu.memory);
  }
  DeviceUsage host = usage_on(header, p, kCpu);
  // Managed memory is backed by host pages: the whole managed footprint must fit in host memory.
  const DeviceUsage managed = managed_usage(header, p);
  host.weights += managed.weights;
  host.kv += managed.kv;
  host.activations += managed.activations;
  if (host.total() > hw.host.memory)
    throw CapacityError(model + " under '" + policy + "' needs " + units::format_bytes(host.total()) +
                            " of host memory (" + usage_text(host, 0) + "), but the host has " +
                            units::format_bytes(hw.host.memory),
                        "cpu", host.total(), hw.host.memory);
}

}  // namespace tiersim::placement
