#include "placement/placement.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <stdexcept>

#include "core/error.hpp"
#include "core/units.hpp"

namespace tiersim::placement {

std::string device_name(DeviceId d) { return d == kCpu ? "cpu" : "cuda:" + std::to_string(d); }

DeviceId parse_device(std::string_view text) {
  if (text == "cpu") return kCpu;
  if (text.substr(0, 5) == "cuda:") {
    int n = -1;
    auto rest = text.substr(5);
    auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), n);
    if (ec == std::errc() && ptr == rest.data() + rest.size() && n >= 0) return n;
  }
  throw std::invalid_argument("unknown device '" + std::string(text) + "' (expected cpu or cuda:N)");
}

const char* to_string(OffloadExec e) { return e == OffloadExec::Copy ? "copy" : "cpu"; }
const char* to_string(HostMemory m) { return m == HostMemory::Pinned ? "pinned" : "pageable"; }

DeviceUsage usage_on(const trace::Header& header, const Placement& p, DeviceId d) {
  DeviceUsage u;
  for (const auto& t : header.tensors) {
    if (p.device[t.id] != d || (p.managed.enabled && p.managed.managed[t.id])) continue;
    const double b = static_cast<double>(t.bytes);
    if (t.kind == trace::TensorKind::Weight) u.weights += b;
    else if (t.kind == trace::TensorKind::KvCache) u.kv += b;
    else u.activations += b;
  }
  return u;
}

DeviceUsage managed_usage(const trace::Header& header, const Placement& p) {
  DeviceUsage u;
  if (!p.managed.enabled) return u;
  for (const auto& t : header.tensors) {
    if (!p.managed.managed[t.id]) continue;
    const double b = static_cast<double>(t.bytes);
    if (t.kind == trace::TensorKind::Weight) u.weights += b;
    else if (t.kind == trace::TensorKind::KvCache) u.kv += b;
    else u.activations += b;
  }
  return u;
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
    if (t.kind == trace::TensorKind::Weight && (p.device[t.id] != kComputeGpu || (p.managed.enabled && p.managed.managed[t.id])))
      total += static_cast<double>(t.bytes);
  return total;
}

bool is_copied(const Placement& p, DeviceId d) {
  return d > kComputeGpu || (d == kCpu && p.exec.exec == OffloadExec::Copy);
}

namespace {
bool copied_tensor(const Placement& p, const trace::Tensor& t) {
  return t.kind == trace::TensorKind::Weight && !(p.managed.enabled && p.managed.managed[t.id]) &&
         is_copied(p, p.device[t.id]);
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

void add_static_peaks(const trace::Header& header, const hw::HardwareProfile& hw, const Placement& p,
                      std::map<std::string, double>& peaks) {
  for (DeviceId d = 1; d < hw.gpu.count; ++d) {
    const double used = usage_on(header, p, d).total();
    peaks[device_name(d)] = used + (used > 0 ? hw.gpu.reserved : 0);
  }
  peaks["cpu"] = usage_on(header, p, kCpu).total();
}

double managed_gpu_capacity(const trace::Header& header, const hw::HardwareProfile& hw, const Placement& p) {
  return hw.gpu.memory - hw.gpu.reserved - usage_on(header, p, kComputeGpu).total() -
         largest_copied_layer(header, p) * (p.exec.prefetch + 1);
}

namespace {

void snap_layers_for_cpu_exec(const trace::Header& header, Placement& p) {
  // llama.cpp offloads whole layers: a layer runs where most of its weight bytes are.
  std::map<std::int32_t, std::map<DeviceId, double>> bytes_by_layer;
  for (const auto& t : header.tensors)
    if (t.kind == trace::TensorKind::Weight) bytes_by_layer[t.layer][p.device[t.id]] += static_cast<double>(t.bytes);
  for (const auto& [layer, by_device] : bytes_by_layer) {
    double host = 0, total = 0;
    for (const auto& [dev, b] : by_device) {
      total += b;
      if (dev == kCpu) host += b;
    }
    const bool on_host = host * 2 > total;
    for (const auto& t : header.tensors) {
      if (t.kind != trace::TensorKind::Weight || t.layer != layer) continue;
      if (on_host) p.device[t.id] = kCpu;
      else if (p.device[t.id] == kCpu) p.device[t.id] = kComputeGpu;
    }
  }
}

std::string usage_text(const DeviceUsage& u, double reserved) {
  std::string s = "weights " + units::format_bytes(u.weights) + ", KV cache " + units::format_bytes(u.kv) +
                  ", activations " + units::format_bytes(u.activations);
  if (reserved > 0) s += ", reserved " + units::format_bytes(reserved);
  return s;
}

}  // namespace

void finalize(const trace::Header& header, const hw::HardwareProfile& hw, Placement& p, const std::string& policy) {
  if (p.device.size() != header.tensors.size()) throw std::logic_error("placement does not cover every tensor");
  if (p.exec.exec == OffloadExec::Cpu) snap_layers_for_cpu_exec(header, p);

  // Which layers execute on the CPU: only with --offload-exec cpu, where the layer's weights are on the host.
  std::map<std::int32_t, bool> layer_on_cpu;
  if (p.exec.exec == OffloadExec::Cpu)
    for (const auto& t : header.tensors)
      if (t.kind == trace::TensorKind::Weight && p.device[t.id] == kCpu) layer_on_cpu[t.layer] = true;
  for (const auto& t : header.tensors) {
    if (p.managed.enabled && p.managed.managed[t.id]) continue;  // the driver decides where it lives
    if (t.kind == trace::TensorKind::KvCache) p.device[t.id] = layer_on_cpu.count(t.layer) ? kCpu : kComputeGpu;
    else if (t.kind == trace::TensorKind::Activation) p.device[t.id] = kComputeGpu;
  }

  const std::string model = header.meta.count("model") ? header.meta.at("model") : std::string("the model");
  for (DeviceId d : p.device) {
    if (d >= hw.gpu.count)
      throw CapacityError("policy '" + policy + "' places weights on " + device_name(d) + ", but the profile '" +
                          hw.name + "' has " + std::to_string(hw.gpu.count) + " GPU(s)");
  }
  // The compute GPU also holds the staging buffers of copied layers: prefetch + 1 layers at most.
  const DeviceUsage gpu = usage_on(header, p, kComputeGpu);
  const double staging = largest_copied_layer(header, p) * (p.exec.prefetch + 1);
  const double need = gpu.total() + hw.gpu.reserved + staging;
  if (need > hw.gpu.memory) {
    std::string what = usage_text(gpu, hw.gpu.reserved);
    if (staging > 0) what += ", staging for " + std::to_string(p.exec.prefetch + 1) + " copied layer(s) " + units::format_bytes(staging);
    throw CapacityError(model + " under '" + policy + "' needs " + units::format_bytes(need) + " on cuda:0 (" + what +
                        "), but cuda:0 has " + units::format_bytes(hw.gpu.memory) + " on '" + hw.name + "'");
  }
  for (DeviceId d = 1; d < hw.gpu.count; ++d) {
    const DeviceUsage u = usage_on(header, p, d);
    if (u.total() + hw.gpu.reserved > hw.gpu.memory)
      throw CapacityError(model + " under '" + policy + "' needs " + units::format_bytes(u.total() + hw.gpu.reserved) +
                          " on " + device_name(d) + " (" + usage_text(u, hw.gpu.reserved) + "), but it has " +
                          units::format_bytes(hw.gpu.memory));
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
                        units::format_bytes(hw.host.memory));
}

}  // namespace tiersim::placement
