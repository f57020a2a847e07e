#include "replay/step_plan.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>

#include "hardware/op_cost.hpp"
#include "managed/managed_memory.hpp"

namespace tiersim::replay {

using placement::DeviceId;
using placement::kCpu;

namespace {
constexpr DeviceId kNoDevice = -2;
constexpr std::int32_t kNoLayer = INT32_MIN;
constexpr std::int32_t kNoRun = INT32_MAX;  // runs count down from 0

std::uint64_t written_bytes(const trace::Op& op) {
  std::uint64_t bytes = 0;
  for (const auto& w : op.writes) bytes += w.bytes;
  return bytes;
}
}  // namespace

void fold_transient_peaks(const StepPlan& plan, std::vector<double>& by_gpu) {
  if (by_gpu.size() < plan.transient_peak.size()) by_gpu.resize(plan.transient_peak.size(), 0.0);
  for (std::size_t d = 0; d < plan.transient_peak.size(); ++d) by_gpu[d] = std::max(by_gpu[d], plan.transient_peak[d]);
}

void add_transient_peaks(const std::vector<double>& by_gpu, const hw::HardwareProfile& hw, bool add_to_compute_gpu,
                         result::RunResult& result) {
  for (std::size_t d = 0; d < by_gpu.size(); ++d) {
    if (by_gpu[d] <= 0) continue;
    const std::string name = placement::device_name(static_cast<DeviceId>(d));
    result.transient_peak_bytes[name] = by_gpu[d];
    if (d == 0 && !add_to_compute_gpu) continue;
    double& peak = result.peak_bytes[name];
    peak += by_gpu[d] + (peak > 0 ? 0.0 : hw.gpu.reserved);
  }
}

StepPlanner::StepPlanner(const RunSetup& setup, const trace::Header& header, const placement::Placement& placement)
    : hw_(setup.hw), runtime_(setup.runtime), fresh_lengths_(setup.fresh_lengths), header_(header), placement_(placement), default_dtype_(header.default_dtype()),
      rates_(hw::OpRates::of(setup.hw, default_dtype_)) {
  const std::size_t n = header.tensors.size();
  copied_.assign(n, false);
  managed_.assign(n, false);
  executes_on_.assign(n, kNoDevice);
  kv_on_host_.assign(n, false);
  last_reader_.assign(n, -1);
  next_run_.assign(n, kNoRun);
  released_.assign(n, false);
  issued_.assign(n, false);
  value_device_.assign(n, kNoDevice);
  transient_live_.assign(static_cast<std::size_t>(std::max(1, setup.hw.gpu.count)), 0.0);
  for (const auto& t : header.tensors) has_transients_ |= t.kind == trace::TensorKind::Transient;
  for (const auto& t : header.tensors) {
    const DeviceId d = placement.device[t.id];
    const placement::Path path = placement.path[t.id];
    managed_[t.id] = path == placement::Path::Managed;
    if (t.kind == trace::TensorKind::Weight) {
      layer_order_.push_back(t.layer);
      copied_[t.id] = path == placement::Path::Copy;
    }
    // Weights and KV cache of a layer that runs where they live (the CPU, or another GPU); a host KV cache that
    // a GPU layer's attention reads through copies (llama.cpp --no-kv-offload) does not decide where it runs.
    if (placement.execute.kv_copied_in && t.kind == trace::TensorKind::KvCache && d == kCpu) {
      kv_on_host_[t.id] = true;
      continue;
    }
    if (path == placement::Path::Execute) executes_on_[t.id] = d;
  }
  // CPU threads: the execute path's, else the host's physical cores (llama.cpp's default -t) where the
  // profile measured its CPU kernels; the runtime's cost of one CPU op, else the hardware profile's.
  cpu_.threads = placement::cpu_threads(placement.execute, hw_);
  cpu_.per_op = runtime_.per_cpu_op >= 0 ? runtime_.per_cpu_op : hw_.host.op_overhead;
  for (const auto& t : header.tensors)
    if (t.kind == trace::TensorKind::Weight && executes_on_[t.id] == kCpu) cpu_layers_.push_back(t.layer);
  std::sort(cpu_layers_.begin(), cpu_layers_.end());
  cpu_layers_.erase(std::unique(cpu_layers_.begin(), cpu_layers_.end()), cpu_layers_.end());
  has_pipeline_ = placement::has_pipeline(placement);
  // Layers that run off the compute GPU, by their Execute-path weights.
  for (const auto& t : header.tensors)
    if (t.kind == trace::TensorKind::Weight && executes_on_[t.id] != kNoDevice) layer_devices_.emplace_back(t.layer, executes_on_[t.id]);
  std::sort(layer_devices_.begin(), layer_devices_.end());
  layer_devices_.erase(std::unique(layer_devices_.begin(), layer_devices_.end(),
                                   [](const auto& a, const auto& b) { return a.first == b.first; }),
                       layer_devices_.end());
  std::sort(layer_order_.begin(), layer_order_.end());
  layer_order_.erase(std::unique(layer_order_.begin(), layer_order_.end()), layer_order_.end());
  // The output group: weights after the last layer that has a KV cache (final norm, LM head).
  std::int32_t last_kv_layer = kNoLayer;
  for (const auto& t : header.tensors)
    if (t.kind == trace::TensorKind::KvCache) last_kv_layer = std::max(last_kv_layer, t.layer);
  if (!layer_order_.empty() && last_kv_layer != kNoLayer && layer_order_.back() > last_kv_layer) output_layer_ = layer_order_.back();
  any_copied_ = std::find(copied_.begin(), copied_.end(), 1) != copied_.end();
  copied_by_position_.resize(layer_order_.size());
  managed_by_position_.resize(layer_order_.size());
  for (const auto& t : header.tensors) {
    if (copied_[t.id]) copied_by_position_[layer_position(t.layer)].push_back(t.id);
    if (managed_[t.id] && t.kind == trace::TensorKind::Weight) managed_by_position_[layer_position(t.layer)].push_back(t.id);
  }
}

std::size_t StepPlanner::layer_position(std::int32_t layer) const {
  return static_cast<std::size_t>(std::lower_bound(layer_order_.begin(), layer_order_.end(), layer) -
                                  layer_order_.begin());
}

const hw::TransferCurve& StepPlanner::copy_curve(DeviceId source, std::uint32_t tensor) const {
  if (source > placement::kComputeGpu) return hw_.peer_link->transfer;
  if (source == placement::kDisk) return hw_.host_link.h2d_pageable;  // read into a pageable buffer first
  return placement::host_memory_of(placement_, tensor) == placement::HostMemory::Pinned ? hw_.host_link.h2d_pinned
                                                                                         : hw_.host_link.h2d_pageable;
}

std::pair<double, double> StepPlanner::copy_latency_and_rate(DeviceId source, std::uint32_t tensor, double bytes) const {
  auto [latency, rate] = copy_curve(source, tensor).latency_and_rate(bytes);
  if (source > placement::kComputeGpu) latency += runtime_.peer_copy_sync;
  return {latency, rate};
}

std::pair<double, double> StepPlanner::peer_latency_and_rate(double bytes) const {
  auto [latency, rate] = hw_.peer_link->transfer.latency_and_rate(bytes);
  return {latency + runtime_.peer_copy_sync, rate};
}

double StepPlanner::copy_seconds(DeviceId source, std::uint32_t tensor, double bytes) const {
  const auto [latency, rate] = copy_latency_and_rate(source, tensor, bytes);
  return latency + bytes / rate;
}

const hw::TransferCurve& StepPlanner::activation_curve(bool to_device) const {
  // Activations cross with .to(): ordinary pageable host tensors.
  return to_device ? hw_.host_link.h2d_pageable : hw_.host_link.d2h_pageable;
}

bool StepPlanner::copy_blocks_host(DeviceId source, std::uint32_t tensor) const {
  // A copy from pageable memory is staged by the driver and returns only when done.
  if (source == placement::kDisk) return true;  // read, then copied from a pageable buffer
  return source == kCpu && placement::host_memory_of(placement_, tensor) == placement::HostMemory::Pageable;
}

DeviceId StepPlanner::op_device(const trace::Op& op, DeviceId previous) const {
  if (placement_.per_tensor) {
    // Weights placed one by one (llama.cpp's -ot): an op runs where the weight (or KV cache) it reads
    // executes, on the compute GPU if it reads a weight there, and a weightless op where the op before
    // it ran (ggml_backend_sched's passes give an unassigned node its neighbour's backend).
    bool reads_weight = false;
    for (const auto& a : op.reads) {
      if (executes_on_[a.tensor] != kNoDevice) return executes_on_[a.tensor];
      reads_weight |= header_.tensors[a.tensor].kind == trace::TensorKind::Weight;
    }
    return reads_weight ? placement::kComputeGpu : previous;
  }
  // Every op of a layer that runs elsewhere runs there, weightless ones (rotary, elementwise) too: a
  // layer is executed whole, and only hidden states cross at its boundaries.
  const auto it = std::lower_bound(layer_devices_.begin(), layer_devices_.end(), std::make_pair(op.layer, kNoDevice));
  if (it != layer_devices_.end() && it->first == op.layer) return it->second;
  for (const auto& a : op.reads)
    if (executes_on_[a.tensor] != kNoDevice) return executes_on_[a.tensor];
  for (const auto& a : op.writes)
    if (executes_on_[a.tensor] != kNoDevice) return executes_on_[a.tensor];
  return placement::kComputeGpu;
}

double StepPlanner::weight_read_bytes(const trace::Op& op) const {
  double bytes = 0;
  for (const auto& r : op.reads)
    if (header_.tensors[r.tensor].kind == trace::TensorKind::Weight) bytes += static_cast<double>(r.bytes);
  return bytes;
}

double StepPlanner::managed_weight_reads(const trace::Op& op) const {
  if (op.kind != trace::OpKind::Gemm || !hw_.managed_memory || hw_.managed_memory->remote_gemm_reads.empty()) return 1.0;
  const std::string& dtype = op.dtype.empty() ? default_dtype_ : op.dtype;
  const double element = dtype == "fp32" ? 4 : dtype == "bf16" || dtype == "fp16" ? 2 : dtype == "fp8" || dtype == "int8" ? 1 : 0;
  const double weight = weight_read_bytes(op);
  if (element == 0 || weight <= 0) return 1.0;
  return hw_.managed_memory->gemm_weight_reads(static_cast<double>(op.flops) / (2.0 * weight / element));
}

bool StepPlanner::reads_weight_range(const trace::Op& op) const {
  for (const auto& r : op.reads)
    if (header_.tensors[r.tensor].kind == trace::TensorKind::Weight && r.bytes < header_.tensors[r.tensor].bytes) return true;
  return false;
}

double StepPlanner::activation_bytes(const trace::Op& op) const {
  double bytes = 0;
  for (const auto& a : op.writes)
    if (trace::is_activation(header_.tensors[a.tensor].kind)) bytes += static_cast<double>(a.bytes);
  return bytes;
}

bool StepPlanner::offloads_op(const trace::Op& op, const trace::Step& step) const {
  const int min_batch = placement_.execute.op_offload_batch;
  if (min_batch <= 0 || op.layer < 0) return false;
  // Offloaded are the ops of a layer with weights homed on the CPU: those reading them, and the rest that
  // run on the CPU beside them (ggml_backend_sched's expansion gives them the GPU's backend).
  if (!std::binary_search(cpu_layers_.begin(), cpu_layers_.end(), op.layer)) return false;
  const std::uint32_t batch = op.tokens > 0 ? op.tokens : op.layer == output_layer_ ? header_.batch() : step.tokens;
  return batch >= static_cast<std::uint32_t>(min_batch);
}

void StepPlanner::host_kv_round_trip(StepPlan& out, const trace::Op& op, std::int32_t index, DeviceId device,
                                     std::uint32_t step_tokens, bool offloaded) {
  // llama.cpp --no-kv-offload with flash attention on (its default): ggml_backend_sched splits each layer around
  // the KV store (ggml-backend.cpp ggml_backend_sched_compute_splits; the assignment checked against its own
  // GGML_SCHED_DEBUG output, results/validation/llamacpp/raw/nkvo_sched.log): the step's new keys and values
  // (f32 Kcur and Vcur, two inputs) are copied to the host, the CPU stores them into the f16 cache (two SET_ROWS),
  // and the cache's views (llama_kv_cache::get_k / get_v: n_kv cells, at least 256 and a multiple of 256, at most
  // the cells allocated) are copied back in for the attention. Every copy is a synchronous input copy (the CPU
  // backend has no async copy), each charged the runtime's per_copy. The same for a CPU layer's attention in a step
  // that op offload moves to the GPU (its weights copied in): its KV cache is in host memory too, and flash
  // attention follows its GPU neighbours there (ggml_backend_sched's expansion).
  for (const auto& r : op.reads) {
    const bool host_kv = kv_on_host_[r.tensor] ||
                         (offloaded && header_.tensors[r.tensor].kind == trace::TensorKind::KvCache && executes_on_[r.tensor] == kCpu);
    if (!host_kv) continue;
    double stored = 0;
    for (const auto& w : op.writes)
      if (w.tensor == r.tensor) stored += static_cast<double>(w.bytes);
    const std::uint32_t rows = op.tokens > 0 ? op.tokens : step_tokens;
    const double cell = rows > 0 ? stored / rows : 0;  // one token's keys and values in the cache
    double view = static_cast<double>(r.bytes);
    if (cell > 0) {
      const double cells = std::ceil(static_cast<double>(r.bytes) / cell);
      const double allocated = static_cast<double>(header_.tensors[r.tensor].bytes) * placement_.kv_allocation_scale / cell;
      view = cell * std::min(std::max(allocated, cells), std::max(kKvPadCells, std::ceil(cells / kKvPadCells) * kKvPadCells));
    }
    Action to_host;
    to_host.kind = ActionKind::ActivationToHost;
    to_host.bytes = 2 * stored;  // f32 sources of f16 cache rows
    to_host.source = device;
    to_host.device = device;
    to_host.host_seconds = 2 * runtime_.per_copy;
    to_host.host_waits = true;
    out.actions.push_back(to_host);
    Action store;
    store.kind = ActionKind::CpuOp;
    store.op = index;
    const double read_rate = hw_.host.kernels && cpu_.threads > 0
                                 ? hw::CpuKernelSpec::at(hw_.host.kernels->read_bandwidth, cpu_.threads)
                                 : hw_.host.memory_bandwidth * hw_.host.memory_efficiency;
    store.work_seconds = 2 * cpu_.per_op + (to_host.bytes + stored) / read_rate;
    out.actions.push_back(store);
    Action in;
    in.kind = ActionKind::ActivationToDevice;
    in.bytes = view;
    in.source = kCpu;
    in.device = device;
    in.host_seconds = 2 * runtime_.per_copy;
    in.host_waits = true;
    out.actions.push_back(in);
  }
}

void StepPlanner::issue_copy(StepPlan& out, std::uint32_t tensor, bool prefetch, double bytes) {
  issued_[tensor] = true;
  touched_.push_back(tensor);
  Action a;
  a.kind = prefetch ? ActionKind::Prefetch : ActionKind::CopyOnStream;
  // A framework whose copies from another GPU do not overlap compute: issued ahead, run in turn.
  if (prefetch && placement_.device[tensor] > placement::kComputeGpu && !runtime_.peer_copy_overlaps_compute)
    a.kind = ActionKind::CopyOnStream;
  a.tensor = tensor;
  a.source = placement_.device[tensor];
  a.bytes = bytes >= 0 ? bytes : static_cast<double>(header_.tensors[tensor].bytes);
  a.host_seconds = prefetch ? runtime_.per_prefetch : runtime_.per_copy;
  // A weight on disk is first read from its file into host memory by the host thread (accelerate's
  // OffloadedWeightsLoader: safe_open / np.memmap per access), with the page cache assumed cold.
  if (a.source == placement::kDisk) a.host_seconds += hw_.disk->read_latency + a.bytes / hw_.disk->read_bandwidth;
  a.host_waits = copy_holds_host(tensor);
  out.actions.push_back(a);
}

bool StepPlanner::copy_holds_host(std::uint32_t tensor) const {
  // A synchronous copy (.to() without non_blocking) returns only when done, pinned or not.
  return copy_blocks_host(placement_.device[tensor], tensor) || placement_.copy.sync;
}

void StepPlanner::await_releases(StepPlan& out, std::size_t begin) {
  if (out.slot_waits.size() == begin) return;
  Action wait;
  wait.kind = ActionKind::AwaitSlot;
  wait.host_waits = true;
  wait.frees_begin = static_cast<std::uint32_t>(begin);
  wait.frees_count = static_cast<std::uint32_t>(out.slot_waits.size() - begin);
  out.actions.push_back(wait);
}

void StepPlanner::await_offload_stream(StepPlan& out, std::uint32_t tensor) {
  // ComfyUI's casts round-robin over its offload streams (two by default: copy.streams), and a stream
  // waits for the compute stream after each cast's op: the cast that many back must be used (released)
  // before this one's copy can run, so at most that many casts are staged. The host waits for that release
  // here whatever the source: a non-blocking copy (pinned) would otherwise run ahead, and a pageable one
  // syncs its stream before it starts (CUDA's API sync behaviour for pageable host-to-device copies), so
  // the host waits there too. (An earlier version let pageable copies skip this wait: when the GPU was the
  // bottleneck the host ran ahead and staged casts without bound: 33 GiB on a 24 GiB card for Wan 14B.)
  const auto streams = static_cast<std::size_t>(std::max(1, placement_.copy.streams));
  if (stream_copies_.size() >= streams) {
    const std::uint32_t older = stream_copies_[stream_copies_.size() - streams];
    if (released_[older]) {  // its last reader is planned (not this very op)
      const std::size_t begin = out.slot_waits.size();
      out.slot_waits.push_back(older);
      await_releases(out, begin);
    }
  }
  stream_copies_.push_back(tensor);
}

hw::GpuOpCost StepPlanner::kernel_cost(const trace::Op& op) const {
  hw::GpuOpCost cost = hw::gpu_op_cost(hw_, op, rates_);
  if (runtime_.kernel_floor >= 0) cost.floor_seconds = runtime_.kernel_floor * op.launches;
  cost.gap_seconds = runtime_.gpu_launch_gap * op.launches;
  if (!op.dtype.empty() && cost.measured_seconds < 0 && op.kind == trace::OpKind::Elementwise) {
    // A weight cast from its storage type (fp8) at the runtime's measured share of the memory rate.
    const auto it = runtime_.gpu_cast.find(op.dtype);
    if (it != runtime_.gpu_cast.end()) {
      double share = it->second;
      if (default_dtype_ == "fp32") {
        // The shares were measured on casts to bf16 (2 bytes written per element), and a cast kernel is bound by
        // its elements: a cast to fp32 (ComfyUI's text encoders) takes the time of the same elements cast to
        // bf16, its written bytes counting at 2 per element.
        const double read = static_cast<double>(trace::op_bytes(op) - written_bytes(op));
        const double written = static_cast<double>(written_bytes(op));
        if (read + written > 0) share *= (read + written) / (read + written / 2);
      }
      cost.local_rate *= share;
    }
  }
  if (op.blocks > 0 && runtime_.gpu_block_rate > 0 && cost.measured_seconds < 0 && op.kind != trace::OpKind::Gemv)
    // A grid too small to fill the GPU (PyTorch's GroupNorm statistics): each block streams at the runtime's
    // measured rate of one.
    cost.local_rate = std::min(cost.local_rate, static_cast<double>(op.blocks) * runtime_.gpu_block_rate);
  if (!op.dtype.empty() && cost.measured_seconds < 0) {
    // The runtime's own kernels for this weight type (llama.cpp's MMVQ / MMQ), as measured; over one expert's
    // slice of a fused experts tensor, its kernel for a stack of experts (MUL_MAT_ID) where it has one.
    const bool expert = reads_weight_range(op);
    auto rate = [&](const std::map<std::string, double>& plain, const std::map<std::string, double>& id) {
      if (expert) {
        const auto it = id.find(op.dtype);
        if (it != id.end()) return it->second;
      }
      const auto it = plain.find(op.dtype);
      return it != plain.end() ? it->second : 0.0;
    };
    // A dense matrix's kernel priced by its shape where the op gives it (GEMV: its grid, one block per output
    // row; GEMM: its weight's rows) and the runtime measured the type.
    auto shaped = [&](const auto& by_type, std::uint32_t given) {
      return given > 0 && !expert ? by_type.find(op.dtype) : by_type.end();
    };
    if (op.kind == trace::OpKind::Gemv) {
      if (const auto k = shaped(runtime_.gpu_gemv_rows, op.blocks); k != runtime_.gpu_gemv_rows.end()) {
        const double rows = static_cast<double>(op.blocks);
        cost.compute_seconds = std::max(cost.compute_seconds, k->second.seconds(rows, weight_read_bytes(op) / rows));
      } else if (const double r = rate(runtime_.gpu_gemv, runtime_.gpu_gemv_id); r > 0) {
        cost.compute_seconds = std::max(cost.compute_seconds, weight_read_bytes(op) / r);
      }
    } else if (op.kind == trace::OpKind::Gemm) {
      if (const auto k = shaped(runtime_.gpu_gemm_rows, op.rows); k != runtime_.gpu_gemm_rows.end()) {
        cost.compute_seconds = k->second.seconds(static_cast<double>(op.flops), static_cast<double>(op.rows));
      } else {
        if (const double r = rate(runtime_.gpu_gemm, runtime_.gpu_gemm_id); r > 0)
          cost.compute_seconds = static_cast<double>(op.flops) / r;
        if (expert && runtime_.gpu_gemm_id_share > 0 && !runtime_.gpu_gemm_id.count(op.dtype))
          cost.compute_seconds /= runtime_.gpu_gemm_id_share;
      }
    }
  }
  return cost;
}

// Each copied (or managed-prefetched) weight's last reader in the step; a placement with neither (resident, managed
// memory without prefetch) skips the pass.
void StepPlanner::mark_last_readers(const trace::Step& step, int managed_prefetch) {
  if (!(any_copied_ || managed_prefetch > 0)) return;
  for (std::size_t i = 0; i < step.ops.size(); ++i)
    for (const auto& a : step.ops[i].reads)
      if (copied_[a.tensor] || (managed_prefetch > 0 && managed_[a.tensor])) {
        if (last_reader_[a.tensor] < 0) touched_.push_back(a.tensor);
        last_reader_[a.tensor] = static_cast<std::int32_t>(i);
      }
}

// A copied weight is copied for a layer's use and released after that layer's last read of it, as
// frameworks cast a module's weights per forward: a weight read again by a later layer (a tied
// embedding and LM head), or by the same layer in a later forward of the step (a diffusion model's
// negative prompt run as a second pass), is copied again there, on demand, instead of staying staged
// in between. A layer's use is a run of consecutive ops of that layer.
void StepPlanner::mark_layer_uses(const trace::Step& step) {
  read_begin_.assign(step.ops.size() + 1, 0);
  for (std::size_t i = 0; i < step.ops.size(); ++i)
    read_begin_[i + 1] = read_begin_[i] + static_cast<std::uint32_t>(step.ops[i].reads.size());
  group_last_.assign(read_begin_.back(), 0);
  std::int32_t run = 0;  // counts down from the last op's run
  for (std::size_t i = step.ops.size(); i-- > 0;) {
    const trace::Op& op = step.ops[i];
    if (i + 1 < step.ops.size() && step.ops[i + 1].layer != op.layer) --run;
    for (std::size_t k = 0; k < op.reads.size(); ++k) {
      const std::uint32_t t = op.reads[k].tensor;
      if (!copied_[t]) continue;
      if (next_run_[t] != run) group_last_[read_begin_[i] + k] = 1;
      next_run_[t] = run;
    }
  }
  for (const auto& op : step.ops)
    for (const auto& a : op.reads) next_run_[a.tensor] = kNoRun;
}

void StepPlanner::end_step(StepPlan& out) const {
  Action sync;
  sync.kind = ActionKind::Sync;
  sync.host_waits = true;
  out.actions.push_back(sync);
  Action overhead;
  overhead.kind = ActionKind::StepOverhead;
  overhead.host_seconds = runtime_.per_step;
  out.actions.push_back(overhead);
}

StepPlanner::StepCalls StepPlanner::begin_step(const trace::Step& step, StepPlan& out, TransientCursor& cursor) {
  out.kind = step.kind;
  out.tokens = step.tokens;
  out.actions.clear();
  out.deps.clear();
  out.frees.clear();
  out.slot_waits.clear();
  out.managed.clear();
  out.transient_releases.clear();
  stream_copies_.clear();
  // Transient values (trace/transient_lifetimes.hpp; the reader checked every use has one). A managed transient
  // (managed memory over everything) is a managed range the whole run instead, like the activation workspace.
  cursor = TransientCursor{};
  cursor.on = has_transients_ && !derive_transient_lifetimes(header_, step, lifetimes_).has_value();
  out.transient_peak.assign(cursor.on ? transient_live_.size() : 0, 0.0);
  std::fill(transient_live_.begin(), transient_live_.end(), 0.0);
  // The per-tensor allocator's calls per trace op: the framework's modelled count for this kind of step spread over
  // its ops, else one cudaMallocManaged and one cudaFree per op.
  const double modelled_calls = step.kind == trace::StepKind::Prefill  ? placement_.managed.allocations_per_prefill
                                : step.kind == trace::StepKind::Decode ? placement_.managed.allocations_per_decode
                                                                       : 0.0;
  StepCalls calls;
  calls.per_op =
      modelled_calls > 0 && !step.ops.empty() ? modelled_calls / static_cast<double>(step.ops.size()) : 1.0;
  // What the advice on those calls adds (managed::advised_cycle_extra): the modelled calls' sum spread over the ops,
  // else per op from the fresh activations it writes (advised_per_op < 0).
  const double modelled_advised = step.kind == trace::StepKind::Prefill  ? placement_.managed.advised_seconds_per_prefill
                                  : step.kind == trace::StepKind::Decode ? placement_.managed.advised_seconds_per_decode
                                                                         : 0.0;
  calls.advised_per_op =
      modelled_calls > 0 && !step.ops.empty() ? modelled_advised / static_cast<double>(step.ops.size()) : -1.0;
  for (std::uint32_t t : touched_) {
    issued_[t] = false;
    released_[t] = false;
    last_reader_[t] = -1;
  }
  touched_.clear();
  last_copy_tensor_ = UINT32_MAX;
  last_copy_end_ = 0;
  return calls;
}

// A transient value's allocation at its first op and release after its last (trace/transient_lifetimes.hpp), on
// the device the op runs on: the op's action carries the bytes it adds and the releases it makes.
void StepPlanner::transient_effects(Action& a, std::size_t i, DeviceId device, TransientCursor& c, StepPlan& out) {
  if (!c.on) return;
  for (; c.next_start < lifetimes_.starts.size() && lifetimes_.starts[c.next_start].op == i; ++c.next_start) {
    const std::uint32_t t = lifetimes_.starts[c.next_start].tensor;
    const bool counted = device >= placement::kComputeGpu && !managed_[t];
    value_device_[t] = counted ? device : kNoDevice;
    if (!counted) continue;
    const double bytes = static_cast<double>(header_.tensors[t].bytes);
    a.transient_bytes += bytes;
    double& live = transient_live_[static_cast<std::size_t>(device)];
    live += bytes;
    out.transient_peak[static_cast<std::size_t>(device)] = std::max(out.transient_peak[static_cast<std::size_t>(device)], live);
  }
  a.releases_begin = static_cast<std::uint32_t>(out.transient_releases.size());
  for (; c.next_end < lifetimes_.ends.size() && lifetimes_.ends[c.next_end].op == i; ++c.next_end) {
    const std::uint32_t t = lifetimes_.ends[c.next_end].tensor;
    const DeviceId d = value_device_[t];
    if (d < placement::kComputeGpu) continue;
    const double bytes = static_cast<double>(header_.tensors[t].bytes);
    out.transient_releases.push_back({d, bytes});
    transient_live_[static_cast<std::size_t>(d)] -= bytes;
  }
  a.releases_count = static_cast<std::uint32_t>(out.transient_releases.size()) - a.releases_begin;
}

// At an op that starts a layer: the copies of the layers `prefetch` ahead (streaming: each waiting for its staging
// slot), or the managed weights' cudaMemPrefetchAsync `managed_prefetch` layers ahead; `prefetched_upto` layer
// positions are issued so far.
void StepPlanner::stage_ahead(const trace::Op& op, int prefetch, int managed_prefetch, std::size_t& prefetched_upto,
                              StepPlan& out) {
  if (prefetch > 0) {
    const std::size_t target =
        std::min(layer_order_.size(), layer_position(op.layer) + static_cast<std::size_t>(prefetch) + 1);
    for (; prefetched_upto < target; ++prefetched_upto) {
      // Streaming keeps prefetch + 1 staging slots: layer q reuses the slot of layer q - prefetch - 1,
      // so the host first waits until that layer's last reader has run.
      if (prefetched_upto >= static_cast<std::size_t>(prefetch) + 1) {
        const std::size_t begin = out.slot_waits.size();
        for (std::uint32_t t : copied_by_position_[prefetched_upto - static_cast<std::size_t>(prefetch) - 1])
          if (last_reader_[t] >= 0) out.slot_waits.push_back(t);
        await_releases(out, begin);
      }
      for (std::uint32_t t : copied_by_position_[prefetched_upto])
        if (!issued_[t] && last_reader_[t] >= 0) issue_copy(out, t, true);
    }
  }
  if (managed_prefetch > 0) {
    // cudaMemPrefetchAsync of the managed weights `managed_prefetch` layers ahead, on the copy stream.
    const std::size_t target = std::min(layer_order_.size(),
                                        layer_position(op.layer) + static_cast<std::size_t>(managed_prefetch) + 1);
    for (; prefetched_upto < target; ++prefetched_upto)
      for (std::uint32_t t : managed_by_position_[prefetched_upto])
        if (!issued_[t] && last_reader_[t] >= 0) {
          issued_[t] = true;
          Action a;
          a.kind = ActionKind::ManagedPrefetch;
          a.tensor = t;
          a.bytes = static_cast<double>(header_.tensors[t].bytes);
          a.host_seconds = runtime_.per_copy;
          out.actions.push_back(a);
        }
  }
}

// A GPU kernel's reads and writes: what it waits for (its weights' copies or managed prefetches), the staged copies
// it releases, its managed accesses (a per-tensor allocator's outputs are fresh ranges), and that allocator's calls
// and the advice on them.
void StepPlanner::bind_accesses(Action& a, const trace::Op& op, std::size_t i, bool offloaded, const StepCalls& calls,
                                StepPlan& out) {
  a.deps_begin = static_cast<std::uint32_t>(out.deps.size());
  a.frees_begin = static_cast<std::uint32_t>(out.frees.size());
  a.managed_begin = static_cast<std::uint32_t>(out.managed.size());
  for (const auto& r : op.reads) {
    if (managed_[r.tensor]) {
      std::uint64_t reread = 0;
      if (op.kind == trace::OpKind::Gemv && trace::is_activation(header_.tensors[r.tensor].kind))
        for (const auto& w : op.reads)
          if (header_.tensors[w.tensor].kind == trace::TensorKind::Weight) reread += w.bytes;
      const bool weight = header_.tensors[r.tensor].kind == trace::TensorKind::Weight;
      out.managed.push_back({r.tensor, r.bytes, false, reread, r.offset, weight ? managed_weight_reads(op) : 1.0});
      if (issued_[r.tensor]) out.deps.push_back(r.tensor);  // waits for its managed prefetch
      continue;
    }
    if (offloaded && issued_[r.tensor] && executes_on_[r.tensor] == kCpu) {
      out.deps.push_back(r.tensor);
      out.frees.push_back(r.tensor);
      issued_[r.tensor] = false;
      continue;
    }
    if (!copied_[r.tensor]) continue;
    out.deps.push_back(r.tensor);
    if (group_last_[read_begin_[i] + static_cast<std::uint32_t>(&r - op.reads.data())]) {
      out.frees.push_back(r.tensor);
      issued_[r.tensor] = false;  // a later layer that reads it again copies it again
      released_[r.tensor] = true;
    }
  }
  // Under a per-tensor allocator every activation an op writes is a new cudaMallocManaged range, populated by
  // the driver at the kernel's first touch.
  for (const auto& w : op.writes)
    if (managed_[w.tensor])
      out.managed.push_back({w.tensor, w.bytes, true, 0, w.offset, 1.0,
                             per_tensor_allocator() && trace::is_activation(header_.tensors[w.tensor].kind)});
  a.deps_count = static_cast<std::uint32_t>(out.deps.size()) - a.deps_begin;
  a.frees_count = static_cast<std::uint32_t>(out.frees.size()) - a.frees_begin;
  a.managed_count = static_cast<std::uint32_t>(out.managed.size()) - a.managed_begin;
  if (per_tensor_allocator() && hw_.managed_memory) {
    a.host_seconds += calls.per_op * hw_.managed_memory->alloc_call;
    if (calls.advised_per_op >= 0) a.host_seconds += calls.advised_per_op;
    else
      for (const auto& w : op.writes)
        if (managed_[w.tensor] && trace::is_activation(header_.tensors[w.tensor].kind))
          a.host_seconds += managed::advised_cycle_extra(*hw_.managed_memory, placement_.managed.advice[w.tensor],
                                                         static_cast<double>(w.bytes), placement_.managed.demand_paging);
  }
}

void StepPlanner::plan(const trace::Step& step, StepPlan& out) {
  TransientCursor transients;
  const StepCalls calls = begin_step(step, out, transients);
  const int managed_prefetch = placement_.managed.enabled ? placement_.managed.prefetch : 0;
  mark_last_readers(step, managed_prefetch);
  if (any_copied_) mark_layer_uses(step);

  const int prefetch = placement_.copy.prefetch;
  std::size_t prefetched_upto = 0;  // positions [0, prefetched_upto) have been issued
  DeviceId prev_device = placement::kComputeGpu;
  double prev_activation_bytes = 0;
  std::int32_t current_layer = 0;
  bool first = true;
  bool new_length_charged = !fresh_lengths_;
  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    const trace::Op& op = step.ops[i];
    if (first || op.layer != current_layer) stage_ahead(op, prefetch, managed_prefetch, prefetched_upto, out);
    current_layer = op.layer;
    DeviceId device = op_device(op, prev_device);
    // ggml's op offload: a prompt-sized op of a CPU-homed layer runs on the GPU with its weights copied.
    const bool offloaded = device == kCpu && offloads_op(op, step);
    if (offloaded) device = placement::kComputeGpu;
    const bool on_cpu = device == kCpu;
    if (device != prev_device && !first) {
      // Activations cross to where the next op runs. Through host memory the host waits for the copy;
      // between GPUs the copy is ordered on the receiving GPU's stream and the host goes on.
      Action a;
      a.kind = on_cpu ? ActionKind::ActivationToHost
               : prev_device == kCpu ? ActionKind::ActivationToDevice
                                     : ActionKind::ActivationToPeer;
      a.bytes = prev_activation_bytes;
      a.source = prev_device;
      a.device = on_cpu ? prev_device : device;
      a.host_seconds = runtime_.per_copy;
      a.host_waits = a.kind != ActionKind::ActivationToPeer;
      out.actions.push_back(a);
    }
    if (on_cpu) {
      Action a;
      a.kind = ActionKind::CpuOp;
      a.op = static_cast<std::int32_t>(i);
      // Without threads or a runtime per-op cost this is the whole CPU's roofline plus the hardware's
      // op_overhead, as cpu_op_seconds without them computes it.
      hw::CpuThreads run = cpu_;
      run.weight_bytes = weight_read_bytes(op);
      run.expert_slice = reads_weight_range(op);
      a.work_seconds = hw::cpu_op_seconds(hw_, op, rates_, run);
      transient_effects(a, i, kCpu, transients, out);
      out.actions.push_back(a);
    } else {
      // A weight that lives on another GPU than the one running this op (a tied embedding read by an
      // LM head that runs on the next GPU of a pipeline) is read over the peer link, as a hand-over on
      // the receiving stream: nothing is free to read across GPUs.
      if (device > placement::kComputeGpu || has_pipeline_)
        for (const auto& r : op.reads) {
          const auto& t = header_.tensors[r.tensor];
          if (t.kind != trace::TensorKind::Weight || copied_[r.tensor] || managed_[r.tensor]) continue;
          const DeviceId home = placement_.device[r.tensor];
          if (home < 0 || home == device) continue;
          Action a;
          a.kind = ActionKind::ActivationToPeer;
          a.bytes = static_cast<double>(r.bytes);
          a.source = home;
          a.device = device;
          a.host_seconds = runtime_.per_copy;
          out.actions.push_back(a);
        }
      // Weights not yet on the GPU: copied now on the compute stream (on demand). A weight copied again
      // for a later layer (a tied one) while streaming ahead first waits, like a prefetch, until the
      // staging released so far is free, so that the staged copies stay within prefetch + 1 layers.
      // Op offload: the op's host-resident weights are copied on the compute stream (ggml_backend_sched
      // copies a split's inputs before running it) and released after it. The KV cache the layer's attention
      // reads stays in host memory and goes through host_kv_round_trip, as under --no-kv-offload.
      // An expert's slice of a fused tensor is copied alone, as ggml copies only the experts a MUL_MAT_ID uses
      // (ggml-backend.cpp ggml_backend_sched_compute_splits, copy_experts), and the next expert's slice, if used
      // too, joins the previous copy (a run of consecutive used experts is one copy): no host cost of its own.
      if (offloaded)
        for (const auto& r : op.reads)
          if (header_.tensors[r.tensor].kind == trace::TensorKind::Weight && executes_on_[r.tensor] == kCpu &&
              !issued_[r.tensor]) {
            issue_copy(out, r.tensor, false, static_cast<double>(r.bytes));
            if (r.offset > 0 && r.tensor == last_copy_tensor_ && r.offset == last_copy_end_) out.actions.back().host_seconds = 0;
            last_copy_tensor_ = r.tensor;
            last_copy_end_ = r.offset + r.bytes;
          }
      for (const auto& r : op.reads) {
        if (!copied_[r.tensor] || issued_[r.tensor]) continue;
        if (prefetch > 0 && released_[r.tensor]) {  // copied and released earlier in this step
          const std::size_t begin = out.slot_waits.size();
          out.slot_waits.insert(out.slot_waits.end(), out.frees.begin(), out.frees.end());
          await_releases(out, begin);
        }
        // On demand: on the compute stream, or (copy:stream) on a copy stream the kernel waits for.
        if (placement_.copy.stream) await_offload_stream(out, r.tensor);
        issue_copy(out, r.tensor, placement_.copy.stream);
      }
      if (op.kind == trace::OpKind::Attention) host_kv_round_trip(out, op, static_cast<std::int32_t>(i), device, step.tokens, offloaded);
      Action a;
      a.kind = ActionKind::Kernel;
      a.device = device;
      a.op = static_cast<std::int32_t>(i);
      a.host_seconds = hw::host_issue_seconds(runtime_, op);
      if (!new_length_charged && op.kind == trace::OpKind::Attention && op.host_seconds < 0) {
        // The step's first attention at a length this process has not run: the framework builds a plan.
        a.host_seconds += runtime_.new_length_attention;
        new_length_charged = true;
      }
      a.cost = kernel_cost(op);
      a.work_seconds = a.cost.seconds();
      bind_accesses(a, op, i, offloaded, calls, out);
      transient_effects(a, i, device, transients, out);
      out.actions.push_back(a);
      for (std::uint32_t s = 0; s < op.syncs; ++s) {
        // A blocking host-to-device copy of a few bytes the op makes after its kernels are issued (its host call
        // is a copy's, per_copy), which returns when the GPU has run all that was queued before it.
        Action sync;
        sync.kind = ActionKind::OpSync;
        sync.host_seconds = runtime_.per_copy;
        sync.host_waits = true;
        out.actions.push_back(sync);
      }
      if (per_tensor_allocator() && hw_.managed_memory) {
        // The op's temporaries are released with cudaFree, which waits for the device to be idle (one wait: the
        // op's further frees find it idle).
        Action release;
        release.kind = ActionKind::AllocatorSync;
        release.after_wait_seconds = calls.per_op * hw_.managed_memory->free_call;
        release.host_waits = true;
        out.actions.push_back(release);
      }
    }
    prev_device = device;
    prev_activation_bytes = activation_bytes(op);
    first = false;
  }
  end_step(out);
}

}  // namespace tiersim::replay
