#pragma once
// What the host thread does, in order, to run one step under a placement: the kernels it issues, the
// weight copies it issues (on demand on the compute stream, or N layers ahead on a copy stream),
// the ops it runs itself on the CPU, the activation copies at GPU/CPU boundaries, and the sync at the
// end. Both engines consume this plan, so they agree on what happens and differ only in how time is
// composed.
#include <cstdint>
#include <vector>

#include "hardware/op_cost.hpp"
#include "hardware/profile.hpp"
#include "replay/run_setup.hpp"
#include "placement/placement.hpp"
#include "result/run_result.hpp"
#include "trace/trace.hpp"
#include "trace/transient_lifetimes.hpp"

namespace tiersim::replay {

enum class ActionKind : std::uint8_t {
  Kernel,              // host issues an op's kernels; the op runs on the compute stream
  CopyOnStream,        // on-demand weight copy, in order on the compute stream
  Prefetch,            // weight copy on a copy stream, issued ahead of its layer
  AwaitSlot,           // the host waits until a prefetch staging slot is free (StepPlan::frees of its layer)
  CpuOp,               // the host runs the op itself (after its inputs reached host memory)
  ActivationToHost,    // activations GPU -> host before CPU ops (the host waits)
  ActivationToDevice,  // activations host -> GPU after CPU ops (the host waits: pageable copy)
  ActivationToPeer,    // activations GPU -> GPU where a pipeline moves to the next GPU (on the receiving
                       // GPU's compute stream, after the sending GPU's last kernel; the host does not wait)
  ManagedPrefetch,     // cudaMemPrefetchAsync of a managed weight to the GPU, on the copy stream
  AllocatorSync,       // non-caching managed allocator: cudaFree of the op's temporaries, which syncs
  OpSync,              // a blocking copy of a few bytes inside an op (trace::Op::syncs): the host waits for the GPU
  Sync,                // end of step: the host waits for all device work
  StepOverhead,        // host time per step outside the ops
};

// A kernel's access to a managed tensor: its cost depends on where the driver has the blocks when the
// kernel starts, so the engines price it then.
struct ManagedAccess {
  std::uint32_t tensor = 0;
  std::uint64_t bytes = 0;
  bool write = false;
  // A GEMV's input vector: the bytes a host-resident copy of it costs, read again for every output row
  // (the weight's bytes; 0 for other accesses).
  std::uint64_t reread = 0;
  std::uint64_t offset = 0;  // where the bytes start in the tensor (a byte-range access)
  // Times the kernel reads these bytes: a matrix product's weight once per tile of its rows (the profile's
  // managed_memory.remote_gemm_reads at the product's rows), which costs only where the weight is host-resident.
  double reads = 1;
  // The bytes are a fresh allocation the kernel writes first: a per-tensor managed allocator's output tensor.
  bool fresh = false;
};

struct Action {
  ActionKind kind = ActionKind::Kernel;
  double host_seconds = 0;    // host busy before the action takes effect
  double after_wait_seconds = 0;  // host busy after the wait ends (cudaFree's work follows its sync)
  double work_seconds = 0;    // kernel duration (Kernel) or CPU time (CpuOp)
  double bytes = 0;           // copies and activation transfers
  placement::DeviceId source = placement::kCpu;  // copy source (activations: the sending device)
  placement::DeviceId device = placement::kComputeGpu;  // the GPU whose streams run it (Kernel, activations)
  bool host_waits = false;    // the host blocks until the action's device work is done
  std::uint32_t tensor = 0;   // the copied tensor
  std::int32_t op = -1;       // index of the trace op it belongs to (Kernel, CpuOp)
  std::uint32_t deps_begin = 0, deps_count = 0;    // Kernel: copied tensors it must wait for (StepPlan::deps)
  // Kernel: staged tensors whose last reader it is. AwaitSlot: tensors whose release the host waits for.
  std::uint32_t frees_begin = 0, frees_count = 0;
  std::uint32_t managed_begin = 0, managed_count = 0;  // Kernel: its managed accesses (StepPlan::managed)
  hw::GpuOpCost cost;                                   // Kernel: the parts of work_seconds
  // Kernel: bytes of transient values the op starts, allocated on its GPU before it is issued. Kernel and CpuOp:
  // the values whose last use it is, released after it is issued (StepPlan::transient_releases).
  double transient_bytes = 0;
  std::uint32_t releases_begin = 0, releases_count = 0;
};

// A transient value released after an op: on the GPU whose op allocated it.
struct TransientRelease {
  placement::DeviceId device = placement::kComputeGpu;
  double bytes = 0;
};

struct StepPlan {
  trace::StepKind kind = trace::StepKind::Decode;
  std::uint32_t tokens = 0;
  std::vector<Action> actions;
  std::vector<std::uint32_t> deps;   // flat storage for Action::deps_*
  std::vector<std::uint32_t> frees;  // flat storage for Action::frees_*
  std::vector<std::uint32_t> slot_waits;  // flat storage for AwaitSlot's tensors (frees_* indexes it)
  std::vector<ManagedAccess> managed;     // flat storage for Action::managed_*
  std::vector<TransientRelease> transient_releases;  // flat storage for Action::releases_*
  // By GPU (index = device id): the most transient bytes alive at once on it in the step.
  std::vector<double> transient_peak;
};

// Reports the run's transient peaks by GPU (RunResult::transient_peak_bytes) and adds them to the peaks of the GPUs
// other than cuda:0 (whose contents are otherwise static), with the reserve once a GPU holds anything; to cuda:0's too
// when `add_to_compute_gpu` (the analytic engine's sum; the event engine's cuda:0 peak has them already, interleaved).
// Keeps in `by_gpu` the most transient bytes alive at once on each GPU in any step planned so far (`plan`'s too).
void fold_transient_peaks(const StepPlan& plan, std::vector<double>& by_gpu);
void add_transient_peaks(const std::vector<double>& by_gpu, const hw::HardwareProfile& hw, bool add_to_compute_gpu,
                         result::RunResult& result);

class StepPlanner {
 public:
  StepPlanner(const RunSetup& setup, const trace::Header& header, const placement::Placement& placement);
  void plan(const trace::Step& step, StepPlan& out);

  // Link parameters for a copy of `tensor` from `source` to the compute GPU.
  const hw::TransferCurve& copy_curve(placement::DeviceId source, std::uint32_t tensor) const;
  // A weight copy's fixed GPU-side time and its rate: the source's link curve, plus the framework's
  // barrier for a copy from another GPU (the runtime's peer_copy_sync). Both engines use it.
  std::pair<double, double> copy_latency_and_rate(placement::DeviceId source, std::uint32_t tensor, double bytes) const;
  double copy_seconds(placement::DeviceId source, std::uint32_t tensor, double bytes) const;
  // A transfer between two GPUs (pipeline hand-over of activations): the peer link's curve plus the
  // runtime's cross-device barrier, whichever direction.
  std::pair<double, double> peer_latency_and_rate(double bytes) const;
  const hw::TransferCurve& activation_curve(bool to_device) const;
  bool copy_blocks_host(placement::DeviceId source, std::uint32_t tensor) const;

 private:
  // Where an op runs: the device of an Execute-path tensor it touches (kCpu or a GPU), else the compute GPU
  // (per-tensor placements: a weightless op runs where `previous` ran).
  placement::DeviceId op_device(const trace::Op& op, placement::DeviceId previous) const;
  // The step's start: the plan and the per-tensor scratch cleared, its transient values found (`cursor`), and the
  // per-tensor allocator's calls per op with what their advice adds (placement::ManagedSpec).
  struct StepCalls {
    double per_op = 1.0;          // cudaMallocManaged / cudaFree pairs per trace op
    double advised_per_op = -1.0;  // seconds the advice on them adds per op; < 0: from each op's fresh activations
  };
  struct TransientCursor {
    bool on = false;                         // the step has transient values
    std::size_t next_start = 0, next_end = 0;  // lifetimes_ starts and ends consumed
  };
  // Managed memory from one cudaMallocManaged per tensor (the seeds' allocator), not PyTorch's caching allocator.
  bool per_tensor_allocator() const { return placement_.managed.enabled && !placement_.managed.caching_allocator; }
  StepCalls begin_step(const trace::Step& step, StepPlan& out, TransientCursor& cursor);
  void transient_effects(Action& a, std::size_t i, placement::DeviceId device, TransientCursor& c, StepPlan& out);
  void stage_ahead(const trace::Op& op, int prefetch, int managed_prefetch, std::size_t& prefetched_upto, StepPlan& out);
  void bind_accesses(Action& a, const trace::Op& op, std::size_t i, bool offloaded, const StepCalls& calls, StepPlan& out);
  // plan's passes over a step, in order: each copied (or managed-prefetched) weight's last reader; each layer's last
  // read of a copied weight (released after it); then op by op (stage_ahead, kernel_cost, bind_accesses,
  // transient_effects); then the step's end (the host's sync, per_step).
  void mark_last_readers(const trace::Step& step, int managed_prefetch);
  void mark_layer_uses(const trace::Step& step);
  void end_step(StepPlan& out) const;
  // A GPU kernel's cost: its roofline (hw::gpu_op_cost) with the runtime's measured kernels, casts and floors.
  hw::GpuOpCost kernel_cost(const trace::Op& op) const;
  std::size_t layer_position(std::int32_t layer) const;
  // llama.cpp's copies and CPU KV store around a GPU attention over a host KV cache (--no-kv-offload; op offload).
  void host_kv_round_trip(StepPlan& out, const trace::Op& op, std::int32_t index, placement::DeviceId device,
                          std::uint32_t step_tokens, bool offloaded);
  static constexpr double kKvPadCells = 256;  // llama_kv_cache::get_n_kv: n_kv padded to 256 cells at least
  // A copy of `bytes` of the tensor (< 0: all of it; op offload copies an expert's slice).
  void issue_copy(StepPlan& out, std::uint32_t tensor, bool prefetch, double bytes = -1);
  // copy:stream: the host waits until the cast two back is released (two offload streams) when its
  // copies do not hold it anyway.
  void await_offload_stream(StepPlan& out, std::uint32_t tensor);
  // Whether the host waits for this weight's copy (pageable or disk source, or copy:sync).
  bool copy_holds_host(std::uint32_t tensor) const;
  // An AwaitSlot for the releases of out.slot_waits[begin..end), if there are any.
  void await_releases(StepPlan& out, std::size_t begin);
  double activation_bytes(const trace::Op& op) const;
  double weight_read_bytes(const trace::Op& op) const;  // bytes of the op's reads that are weights
  // Times a matrix product reads its weight where the weight is host-resident managed memory: the profile's
  // remote_gemm_reads at the product's rows (its FLOPs over twice its weight's elements). 1 for other ops, for a
  // weight format of no known element size, or a profile without the curve.
  double managed_weight_reads(const trace::Op& op) const;
  // Whether the op reads part of a weight tensor (one expert's slice of a fused experts tensor, trace format 2).
  bool reads_weight_range(const trace::Op& op) const;
  // Whether ggml's op offload runs this op, homed on the CPU, on the compute GPU in this step: a
  // transformer layer's op in a step of at least execute.op_offload_batch tokens (the output layer's
  // ops see only the last token of each sequence, the embedding lookup is never offloaded).
  bool offloads_op(const trace::Op& op, const trace::Step& step) const;

  const hw::HardwareProfile& hw_;
  const runtime::RuntimeProfile& runtime_;
  const bool fresh_lengths_;
  const trace::Header& header_;
  const placement::Placement& placement_;
  std::string default_dtype_;
  hw::OpRates rates_;  // the default dtype's rates, resolved once
  hw::CpuThreads cpu_;  // how ops run on the CPU: threads and the cost of one op (weight_bytes per op)
  std::vector<std::uint8_t> copied_;        // by tensor: a weight copied to cuda:0 when used (bytes, not bits: hot)
  std::vector<std::uint8_t> managed_;       // by tensor: in managed memory
  bool any_copied_ = false;                 // some weight is copied to cuda:0 when used
  std::vector<std::vector<std::uint32_t>> managed_by_position_;  // managed weights of each layer position
  std::vector<placement::DeviceId> executes_on_;  // by tensor: where its layer runs if its path is Execute, else -2
  std::vector<bool> kv_on_host_;  // by tensor: a KV cache in host memory copied in for a GPU's attention (kv_copied_in)
  std::vector<std::pair<std::int32_t, placement::DeviceId>> layer_devices_;  // layers run off cuda:0, sorted
  std::vector<std::int32_t> layer_order_;   // distinct weight layers, ascending
  std::int32_t output_layer_ = INT32_MIN;   // the group after the last KV-cache layer (INT32_MIN: none)
  std::vector<std::int32_t> cpu_layers_;    // layers with weights executing on the CPU, ascending
  std::vector<std::vector<std::uint32_t>> copied_by_position_;  // copied tensors of each layer position
  // Per-step scratch.
  std::vector<std::int32_t> last_reader_;   // by tensor: index of the last op reading it (-1 none)
  std::vector<std::uint8_t> issued_;        // by tensor: a staged copy is live (issued, not yet released)
  std::vector<std::int32_t> next_run_;      // by tensor: scratch of the group pass (kNoRun between steps)
  std::vector<std::uint8_t> released_;      // by tensor: its staged copy was released this step
  bool has_pipeline_ = false;               // some layer runs on a GPU other than cuda:0
  std::vector<std::uint32_t> read_begin_;   // by op: index of its first read in group_last_
  std::vector<std::uint8_t> group_last_;    // by read: the layer's last read of a copied weight (it is released)
  std::vector<std::uint32_t> touched_;
  bool has_transients_ = false;             // some tensor is `tmp`
  trace::TransientLifetimes lifetimes_;     // the step's transient values (scratch)
  std::vector<placement::DeviceId> value_device_;  // by tensor: where its current transient value was allocated
  std::vector<double> transient_live_;            // by GPU: transient bytes alive while planning a step
  std::vector<std::uint32_t> stream_copies_;  // copy:stream copies issued this step, in order
  // Per step: the byte range of the last op-offload copy (ggml copies a run of consecutive used experts of one
  // fused tensor as one copy).
  std::uint32_t last_copy_tensor_ = UINT32_MAX;
  std::uint64_t last_copy_end_ = 0;
};

}  // namespace tiersim::replay
