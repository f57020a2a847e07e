#include "runtime/runtime_loader.hpp"

#include <set>

#include "config/embedded_files.hpp"
#include "config/profile_source.hpp"
#include "config/strict_reader.hpp"
#include "core/error.hpp"

namespace tiersim::runtime {

namespace {
// A section of a source and one sub-section per ggml weight type (gpu_gemv_rows, gpu_gemm_rows): `read` reads each
// type's section, whose unread keys are then errors. Returns the source.
template <typename Read>
std::string read_per_weight_type(config::Section& top, const char* key, Read read) {
  config::Section t = top.child(key);
  const std::string source = t.text("source");
  for (const std::string& type : t.keys()) {
    if (type == "source") continue;
    if (!config::is_ggml_type_name(type))
      t.fail(type, "not a ggml weight type (lower case: q4_k, q6_k, q8_0, f16, bf16, iq4_xs, mxfp4, ...)");
    config::Section k = t.child(type);
    read(type, k);
    k.finish();
  }
  t.finish();
  return source;
}
}  // namespace

RuntimeProfile parse_runtime(const std::string& text, const std::string& file) {
  return parse_runtime_node(config::parse_document(text, file), file);
}

RuntimeProfile parse_runtime_node(const YAML::Node& root, const std::string& file) {
  if (!root || !root.IsMap()) throw InputError(file, 0, "", "expected a YAML mapping (a runtime profile)");
  config::Section top(root, "", file);
  if (top.integer("tiersim_runtime", 1, 1000) != 1)
    throw InputError(file, 0, "tiersim_runtime", "unsupported runtime schema version (this build reads 1)");
  RuntimeProfile r;
  r.origin = file;
  r.name = top.text("name");
  r.description = top.text("description");
  r.source = top.text("source");
  r.per_launch = top.duration("per_launch");
  r.per_copy = top.duration("per_copy");
  r.per_prefetch = top.duration("per_prefetch");
  r.per_step = top.duration("per_step");
  r.new_length_attention = top.duration("new_length_attention");
  r.peer_copy_sync = top.duration("peer_copy_sync");
  r.peer_copy_overlaps_compute = top.flag("peer_copy_overlaps_compute");
  if (top.has("per_op")) r.per_op = top.op_durations("per_op");
  if (top.has("per_cpu_op")) r.per_cpu_op = top.duration("per_cpu_op");
  if (top.has("kernel_floor")) r.kernel_floor = top.duration("kernel_floor");
  if (top.has("gpu_launch_gap")) r.gpu_launch_gap = top.duration("gpu_launch_gap");
  if (top.has("gpu_gemv")) r.gpu_gemv = top.weight_type_rates("gpu_gemv", true);
  if (top.has("gpu_gemm")) r.gpu_gemm = top.weight_type_rates("gpu_gemm", false);
  if (top.has("gpu_gemv_id")) r.gpu_gemv_id = top.weight_type_rates("gpu_gemv_id", true);
  if (top.has("gpu_gemm_id")) r.gpu_gemm_id = top.weight_type_rates("gpu_gemm_id", false);
  if (top.has("gpu_gemv_rows"))
    r.gpu_gemv_rows_source = read_per_weight_type(top, "gpu_gemv_rows", [&](const std::string& type, config::Section& k) {
      GemvRowKernel g;
      g.fixed = k.duration("fixed");
      g.row_rates = k.size_rate_points("rows");
      if (g.row_rates.empty()) k.fail("rows", "needs at least one [\"bytes per row\", \"rate\"] point");
      r.gpu_gemv_rows[type] = std::move(g);
    });
  if (top.has("gpu_gemm_rows"))
    r.gpu_gemm_rows_source = read_per_weight_type(top, "gpu_gemm_rows", [&](const std::string& type, config::Section& k) {
      GemmRowsKernel g;
      g.fixed = k.duration("fixed");
      g.rate = k.flop_rate("rate");
      g.extra_rows = k.number("extra_rows", 0, 1e6);
      r.gpu_gemm_rows[type] = g;
    });
  if (top.has("gpu_gemm_id_share")) {
    r.gpu_gemm_id_share = top.number("gpu_gemm_id_share", 0, 1);
    if (!(r.gpu_gemm_id_share > 0))
      top.fail("gpu_gemm_id_share", "must be a share above 0 and at most 1");
  }
  if (top.has("gpu_cast")) {
    config::Section t = top.child("gpu_cast");
    r.gpu_cast_source = t.text("source");
    for (const std::string& type : t.keys())
      if (type != "source") {
        static const std::set<std::string> kCast{"fp8",  "bf16", "fp16", "q8_0",      "q4_0",
                                                 "q4_k", "q5_k", "q6_k", "gguf_bf16", "gguf_f16"};
        if (!kCast.count(type))
          t.fail(type, "not a storage type the generators cast (fp8; bf16 and fp16 to fp32, ComfyUI's text encoders; "
                       "ComfyUI-GGUF's q8_0, q4_0, q4_k, q5_k, q6_k, gguf_bf16, gguf_f16)");
        r.gpu_cast[type] = t.number(type, 0.01, 1);
      }
    t.finish();
  }
  if (top.has("gpu_block_reduction")) {
    config::Section t = top.child("gpu_block_reduction");
    r.gpu_block_rate_source = t.text("source");
    r.gpu_block_rate = t.bandwidth("block_rate");
    t.finish();
  }
  if (top.has("training")) {
    config::Section t = top.child("training");
    TrainingHostCosts c;
    c.source = t.text("source");
    c.forward_scale = t.number("forward_scale", 0.1, 100);
    c.autocast_forward_scale = t.number("autocast_forward_scale", 0.1, 100);
    c.backward_per_op = t.duration("backward_per_op");
    c.forward_per_step = t.duration("forward_per_step");
    c.backward_per_step = t.duration("backward_per_step");
    c.checkpoint_forward_per_layer = t.duration("checkpoint_forward_per_layer");
    c.checkpoint_backward_per_layer = t.duration("checkpoint_backward_per_layer");
    c.optimizer_per_step = t.duration("optimizer_per_step");
    c.optimizer_per_call = t.duration("optimizer_per_call");
    c.optimizer_per_tensor = t.duration("optimizer_per_tensor");
    c.optimizer_per_tensor_call = t.duration("optimizer_per_tensor_call");
    if (t.has("lora_forward_per_module") || t.has("lora_backward_per_module")) {
      c.lora_forward_per_module = t.duration("lora_forward_per_module");
      c.lora_backward_per_module = t.duration("lora_backward_per_module");
    }
    t.finish();
    r.training = c;
  }
  if (top.has("cpu_offload")) {
    config::Section t = top.child("cpu_offload");
    CpuOffloadCosts c;
    c.source = t.text("source");
    c.per_tensor = t.duration("per_tensor");
    c.per_element_fp32 = t.duration("per_element_fp32");
    c.per_element_bf16 = t.duration("per_element_bf16");
    t.finish();
    r.cpu_offload = c;
  }
  top.finish();
  return r;
}

RuntimeProfile resolve_runtime(const std::string& spec) {
  const config::ProfileSource src = config::find_profile(spec, config::embedded_runtimes(), "--runtime", "runtime profile", "runtime");
  return parse_runtime(src.text, src.origin);
}

std::vector<RuntimeInfo> list_runtimes() {
  std::vector<RuntimeInfo> out;
  for (const auto& f : config::embedded_runtimes()) out.push_back({f.name, parse_runtime(f.text, "preset:" + f.name).description});
  return out;
}

}  // namespace tiersim::runtime
