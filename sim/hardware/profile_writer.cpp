#include "hardware/profile_writer.hpp"

#include <yaml-cpp/yaml.h>

namespace tiersim::config {
namespace {

using nlohmann::ordered_json;

// The shortest decimal that reads back as the same double (nlohmann's), with the base unit.
std::string quantity(double v, const char* unit) { return nlohmann::json(v).dump() + " " + unit; }

ordered_json curve(const hw::TransferCurve& c) {
  ordered_json j = {{"bandwidth", quantity(c.bandwidth, "B/s")}, {"latency", quantity(c.latency, "s")}};
  if (!c.points.empty()) {
    ordered_json pts = ordered_json::array();
    for (const auto& [size, rate] : c.points) pts.push_back({quantity(size, "B"), quantity(rate, "B/s")});
    j["points"] = pts;
  }
  return j;
}

ordered_json rates(const std::map<std::string, double>& r) {
  ordered_json j = ordered_json::object();
  for (const auto& [dtype, rate] : r) j[dtype] = quantity(rate, "FLOP/s");
  return j;
}

std::string source(const hw::HardwareProfile& p, const char* section) {
  const auto it = p.sources.find(section);
  return it == p.sources.end() ? "" : it->second;
}

void emit(YAML::Emitter& out, const ordered_json& j) {
  if (j.is_object()) {
    out << YAML::BeginMap;
    for (auto it = j.begin(); it != j.end(); ++it) {
      out << YAML::Key << it.key() << YAML::Value;
      emit(out, it.value());
    }
    out << YAML::EndMap;
  } else if (j.is_array()) {
    out << YAML::Flow << YAML::BeginSeq;
    for (const auto& e : j) emit(out, e);
    out << YAML::EndSeq;
  } else if (j.is_string()) {
    out << YAML::DoubleQuoted << j.get<std::string>();
  } else {
    out << j.dump();
  }
}

}  // namespace

ordered_json profile_to_json(const hw::HardwareProfile& p) {
  ordered_json j;
  j["tiersim_profile"] = 1;
  j["name"] = p.name;
  j["description"] = p.description;
  if (!p.extra.empty()) {
    ordered_json facts = ordered_json::object();
    for (const auto& [k, v] : p.extra) facts[k] = v;
    j["facts"] = facts;
  }
  j["gpu"] = {{"source", source(p, "gpu")},
              {"name", p.gpu.name},
              {"count", p.gpu.count},
              {"memory", quantity(p.gpu.memory, "B")},
              {"reserved", quantity(p.gpu.reserved, "B")},
              {"memory_bandwidth", quantity(p.gpu.memory_bandwidth, "B/s")},
              {"memory_efficiency", p.gpu.memory_efficiency},
              {"compute", rates(p.gpu.compute)},
              {"compute_efficiency", p.gpu.compute_efficiency},
              {"kernel_min_time", quantity(p.gpu.kernel_min_time, "s")},
              {"provenance", p.gpu.provenance}};
  if (!p.gpu.attention_efficiency.empty()) {
    ordered_json pts = ordered_json::array();
    for (const auto& [flops, eff] : p.gpu.attention_efficiency) pts.push_back({flops, eff});
    j["gpu"]["attention_efficiency"] = pts;
  }
  if (!p.gpu.fp32_gemm_efficiency.empty()) {
    ordered_json pts = ordered_json::array();
    for (const auto& [outputs, eff] : p.gpu.fp32_gemm_efficiency) pts.push_back({outputs, eff});
    j["gpu"]["fp32_gemm_efficiency"] = pts;
    j["gpu"]["fp32_gemm_row_tile"] = static_cast<int>(p.gpu.fp32_gemm_row_tile);  // an integer (1 to 4096)
  }
  if (!p.gpu.convolution_efficiency.empty()) {
    ordered_json conv = ordered_json::object();
    for (const auto& c : p.gpu.convolution_efficiency) {
      ordered_json pts = ordered_json::array();
      for (const auto& [positions, eff] : c.points) pts.push_back({positions, eff});
      conv[c.shape.kernel_name() + ":" + std::to_string(c.shape.in) + ":" + std::to_string(c.shape.out)] = pts;
    }
    j["gpu"]["convolution_efficiency"] = conv;
  }
  j["host"] = {{"source", source(p, "host")},
               {"name", p.host.name},
               {"memory", quantity(p.host.memory, "B")},
               {"memory_bandwidth", quantity(p.host.memory_bandwidth, "B/s")},
               {"memory_efficiency", p.host.memory_efficiency},
               {"compute", rates(p.host.compute)},
               {"compute_efficiency", p.host.compute_efficiency},
               {"op_overhead", quantity(p.host.op_overhead, "s")}};
  if (p.host.kernels) {
    auto threads_curve = [](const std::vector<std::pair<double, double>>& c) {
      ordered_json pts = ordered_json::array();
      for (const auto& [threads, rate] : c) pts.push_back({static_cast<int>(threads), quantity(rate, "B/s")});
      return pts;
    };
    ordered_json gemv = ordered_json::object();
    for (const auto& [type, c] : p.host.kernels->gemv) gemv[type] = threads_curve(c);
    j["host"]["cpu_kernels"] = {{"source", source(p, "host.cpu_kernels")},
                                {"cores", p.host.kernels->cores},
                                {"read_bandwidth", threads_curve(p.host.kernels->read_bandwidth)},
                                {"gemv", gemv}};
    if (!p.host.kernels->gemv_id.empty()) {
      ordered_json gemv_id = ordered_json::object();
      for (const auto& [type, c] : p.host.kernels->gemv_id) gemv_id[type] = threads_curve(c);
      j["host"]["cpu_kernels"]["gemv_id"] = gemv_id;
    }
  }
  j["host_link"] = {{"source", source(p, "host_link")},
                    {"type", p.host_link.type},
                    {"generation", p.host_link.generation},
                    {"width", p.host_link.width},
                    {"h2d_pinned", curve(p.host_link.h2d_pinned)},
                    {"d2h_pinned", curve(p.host_link.d2h_pinned)},
                    {"h2d_pageable", curve(p.host_link.h2d_pageable)},
                    {"d2h_pageable", curve(p.host_link.d2h_pageable)},
                    {"bidirectional", quantity(p.host_link.bidirectional, "B/s")}};
  if (p.host_link.d2h_fresh_pageable) j["host_link"]["d2h_fresh_pageable"] = curve(*p.host_link.d2h_fresh_pageable);
  if (p.peer_link)
    j["peer_link"] = {{"source", source(p, "peer_link")},
                      {"type", p.peer_link->type},
                      {"transfer", curve(p.peer_link->transfer)},
                      {"bidirectional", quantity(p.peer_link->bidirectional, "B/s")}};
  if (p.managed_memory) {
    const auto& m = *p.managed_memory;
    j["managed_memory"] = {{"source", source(p, "managed_memory")},
                           {"va_block", quantity(m.va_block, "B")},
                           {"big_page", quantity(m.big_page, "B")},
                           {"prefetch_threshold", m.prefetch_threshold},
                           {"fault_batch_count", m.fault_batch_count},
                           {"fault_latency", quantity(m.fault_latency, "s")},
                           {"fault_block_overhead", quantity(m.fault_block_overhead, "s")},
                           {"fault_migration_bandwidth", quantity(m.fault_migration_bandwidth, "B/s")},
                           {"prefetch_to_gpu", quantity(m.prefetch_to_gpu, "B/s")},
                           {"evict_to_cpu", quantity(m.evict_to_cpu, "B/s")},
                           {"remote_read_bandwidth", quantity(m.remote_read_bandwidth, "B/s")},
                           {"mapping_fault_cost", quantity(m.mapping_fault_cost, "s")},
                           {"alloc_call", quantity(m.alloc_call, "s")},
                           {"free_call", quantity(m.free_call, "s")}};
    if (m.evict_block_overhead > 0) j["managed_memory"]["evict_block_overhead"] = quantity(m.evict_block_overhead, "s");
    if (m.evicting_fault_bandwidth > 0)
      j["managed_memory"]["evicting_fault_bandwidth"] = quantity(m.evicting_fault_bandwidth, "B/s");
    if (m.evict_writeback_bandwidth > 0)
      j["managed_memory"]["evict_writeback_bandwidth"] = quantity(m.evict_writeback_bandwidth, "B/s");
    if (m.gemv_remote_input_bandwidth > 0)
      j["managed_memory"]["gemv_remote_input_bandwidth"] = quantity(m.gemv_remote_input_bandwidth, "B/s");
    if (!m.remote_gemm_reads.empty()) {
      ordered_json pts = ordered_json::array();
      for (const auto& [rows, times] : m.remote_gemm_reads) pts.push_back({static_cast<long>(rows), times});
      j["managed_memory"]["remote_gemm_reads"] = pts;
    }
    if (!m.remote_gemv.empty()) {
      nlohmann::json rows = nlohmann::json::array();
      for (const auto& r : m.remote_gemv)
        rows.push_back({quantity(r.input_bytes, "B"), quantity(r.weight_bytes, "B"), quantity(r.input_seconds, "s"),
                        quantity(r.both_seconds, "s")});
      j["managed_memory"]["remote_gemv"] = rows;
    }
    if (!m.fresh_touch.empty()) {
      ordered_json pts = ordered_json::array();
      for (const auto& [size, rate] : m.fresh_touch) pts.push_back({quantity(size, "B"), quantity(rate, "B/s")});
      j["managed_memory"]["fresh_touch"] = pts;
    }
    if (!m.advised_cycle.empty()) {
      ordered_json tables = ordered_json::object();
      auto table = [&](const char* name, const std::vector<std::pair<double, double>>& t) {
        if (t.empty()) return;
        ordered_json pts = ordered_json::array();
        for (const auto& [size, seconds] : t) pts.push_back({quantity(size, "B"), quantity(seconds, "s")});
        tables[name] = pts;
      };
      table("prefer_cpu", m.advised_cycle.prefer_cpu);
      table("prefer_cpu_accessed_by", m.advised_cycle.prefer_cpu_accessed_by);
      table("prefer_cpu_read_mostly", m.advised_cycle.prefer_cpu_read_mostly);
      j["managed_memory"]["advised_cycle"] = tables;
    }
  }
  if (p.disk)
    j["disk"] = {{"source", source(p, "disk")},
                 {"read_bandwidth", quantity(p.disk->read_bandwidth, "B/s")},
                 {"read_latency", quantity(p.disk->read_latency, "s")}};
  return j;
}

ordered_json runtime_to_json(const runtime::RuntimeProfile& r) {
  ordered_json j;
  j["tiersim_runtime"] = 1;
  j["name"] = r.name;
  j["description"] = r.description;
  j["source"] = r.source;
  j["per_launch"] = quantity(r.per_launch, "s");
  j["per_copy"] = quantity(r.per_copy, "s");
  j["per_prefetch"] = quantity(r.per_prefetch, "s");
  j["per_step"] = quantity(r.per_step, "s");
  j["new_length_attention"] = quantity(r.new_length_attention, "s");
  j["peer_copy_sync"] = quantity(r.peer_copy_sync, "s");
  j["peer_copy_overlaps_compute"] = r.peer_copy_overlaps_compute;
  if (!r.per_op.empty()) {
    ordered_json per_op = ordered_json::object();
    for (const auto& [kind, seconds] : r.per_op) per_op[trace::to_string(kind)] = quantity(seconds, "s");
    j["per_op"] = per_op;
  }
  if (r.per_cpu_op >= 0) j["per_cpu_op"] = quantity(r.per_cpu_op, "s");
  if (r.kernel_floor >= 0) j["kernel_floor"] = quantity(r.kernel_floor, "s");
  if (r.gpu_launch_gap > 0) j["gpu_launch_gap"] = quantity(r.gpu_launch_gap, "s");
  // The framework's matrix kernels by weight type: a rate per type, written only where the runtime has some.
  auto rates = [&](const char* key, const std::map<std::string, double>& by_type, const char* unit) {
    if (by_type.empty()) return;
    ordered_json g = ordered_json::object();
    for (const auto& [type, rate] : by_type) g[type] = quantity(rate, unit);
    j[key] = g;
  };
  rates("gpu_gemv", r.gpu_gemv, "B/s");
  rates("gpu_gemm", r.gpu_gemm, "FLOP/s");
  rates("gpu_gemv_id", r.gpu_gemv_id, "B/s");
  rates("gpu_gemm_id", r.gpu_gemm_id, "FLOP/s");
  if (!r.gpu_gemv_rows.empty()) {
    ordered_json g = ordered_json::object();
    g["source"] = r.gpu_gemv_rows_source;
    for (const auto& [type, k] : r.gpu_gemv_rows) {
      ordered_json pts = ordered_json::array();
      for (const auto& [bytes, rate] : k.row_rates) pts.push_back({quantity(bytes, "B"), quantity(rate, "B/s")});
      g[type] = {{"fixed", quantity(k.fixed, "s")}, {"rows", pts}};
    }
    j["gpu_gemv_rows"] = g;
  }
  if (!r.gpu_gemm_rows.empty()) {
    ordered_json g = ordered_json::object();
    g["source"] = r.gpu_gemm_rows_source;
    for (const auto& [type, k] : r.gpu_gemm_rows)
      g[type] = {{"fixed", quantity(k.fixed, "s")}, {"rate", quantity(k.rate, "FLOP/s")}, {"extra_rows", k.extra_rows}};
    j["gpu_gemm_rows"] = g;
  }
  if (r.gpu_gemm_id_share > 0) j["gpu_gemm_id_share"] = r.gpu_gemm_id_share;
  if (!r.gpu_cast.empty()) {
    ordered_json g = ordered_json::object();
    g["source"] = r.gpu_cast_source;
    for (const auto& [type, share] : r.gpu_cast) g[type] = share;
    j["gpu_cast"] = g;
  }
  if (r.gpu_block_rate > 0)
    j["gpu_block_reduction"] = {{"source", r.gpu_block_rate_source}, {"block_rate", quantity(r.gpu_block_rate, "B/s")}};
  if (r.training) {
    const runtime::TrainingHostCosts& t = *r.training;
    j["training"] = {{"source", t.source},
                     {"forward_scale", t.forward_scale},
                     {"autocast_forward_scale", t.autocast_forward_scale},
                     {"backward_per_op", quantity(t.backward_per_op, "s")},
                     {"forward_per_step", quantity(t.forward_per_step, "s")},
                     {"backward_per_step", quantity(t.backward_per_step, "s")},
                     {"checkpoint_forward_per_layer", quantity(t.checkpoint_forward_per_layer, "s")},
                     {"checkpoint_backward_per_layer", quantity(t.checkpoint_backward_per_layer, "s")},
                     {"optimizer_per_step", quantity(t.optimizer_per_step, "s")},
                     {"optimizer_per_call", quantity(t.optimizer_per_call, "s")},
                     {"optimizer_per_tensor", quantity(t.optimizer_per_tensor, "s")},
                     {"optimizer_per_tensor_call", quantity(t.optimizer_per_tensor_call, "s")}};
    if (t.lora_forward_per_module >= 0) {
      j["training"]["lora_forward_per_module"] = quantity(t.lora_forward_per_module, "s");
      j["training"]["lora_backward_per_module"] = quantity(t.lora_backward_per_module, "s");
    }
  }
  if (r.cpu_offload) {
    const runtime::CpuOffloadCosts& c = *r.cpu_offload;
    j["cpu_offload"] = {{"source", c.source},
                        {"per_tensor", quantity(c.per_tensor, "s")},
                        {"per_element_fp32", quantity(c.per_element_fp32, "s")},
                        {"per_element_bf16", quantity(c.per_element_bf16, "s")}};
  }
  return j;
}

std::string json_to_yaml(const ordered_json& j) {
  YAML::Emitter out;
  emit(out, j);
  return std::string(out.c_str()) + "\n";
}

}  // namespace tiersim::config
