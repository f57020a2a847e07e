#include "replay/event_replay.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "core/error.hpp"
#include "core/units.hpp"
#include "engine/in_order_stream.hpp"
#include "engine/job_graph.hpp"
#include "engine/shared_link.hpp"
#include "engine/simulator.hpp"
#include "managed/managed_memory.hpp"
#include "replay/step_plan.hpp"

namespace tiersim::replay {
namespace {

using engine::Direction;
using engine::JobId;

// Staging buffers of copied weights on the compute GPU, allocated when the copy is issued. An
// on-demand copy on the compute stream is released when its last reader is issued: PyTorch's caching
// allocator reuses a block freed on the same stream at once, in stream order. A prefetched copy is
// released when its last reader completes (another stream must not overwrite it earlier).
class StagingMemory final : public engine::JobListener {
 public:
  explicit StagingMemory(double static_bytes) : static_(static_bytes), peak_(static_bytes) {}
  // `changed` is called after every change (a timeline's memory counter); releases at a job's completion
  // happen inside the job graph, where the replay does not see them otherwise.
  void observe(std::function<void()> changed) { changed_ = std::move(changed); }
  void allocate(double bytes) {
    current_ += bytes;
    peak_ = std::max(peak_, static_ + current_);
    if (changed_) changed_();
  }
  void release_now(double bytes) {
    current_ -= bytes;
    if (changed_) changed_();
  }
  void release_when_done(engine::JobGraph& jobs, JobId job, double bytes) {
    if (release_.size() <= job) release_.resize(job + 1, 0.0);
    release_[job] = bytes;
    jobs.watch(job, this);
  }
  void job_done(JobId job) override {
    current_ -= release_[job];
    if (changed_) changed_();
  }
  double in_use() const { return static_ + current_; }
  double peak() const { return peak_; }

 private:
  double static_;
  double current_ = 0;
  double peak_;
  std::vector<double> release_;
  std::function<void()> changed_;
};

// Bytes as a JSON integer: the engine keeps byte counts in doubles, which JSON would show as "1024.0".
std::uint64_t whole_bytes(double bytes) { return bytes > 0 ? static_cast<std::uint64_t>(std::llround(bytes)) : 0; }

// Timeline tracks besides the streams': a span per step, the host thread, and the managed-memory
// driver's work (managed memory is single-GPU: cuda:0).
const std::string kStepsTrack = "steps";
const std::string kHostTrack = "host";
const std::string kManagedTrack = "cuda:0 managed memory";

class Replay final : public engine::EventHandler,
                     public engine::JobListener,
                     public engine::DurationSource,
                     public engine::StreamObserver {
 public:
  Replay(const RunSetup& setup, const placement::Placement& placement, trace::StepSource& source,
         report::Timeline* timeline)
      : timeline_(timeline),
        hw_(setup.hw),
        placement_(placement),
        source_(source),
        planner_(setup, source.header(), placement),
        copy_from_host_(sim_, jobs_, "cuda:0 copy from host"),
        copy_from_peer_(sim_, jobs_, "cuda:0 copy from peer"),
        staging_(placement::static_bytes_on_compute_gpu(source.header(), setup.hw, placement)),
        tensor_job_(source.header().tensors.size(), 0),
        release_job_(source.header().tensors.size(), 0),
        release_step_(source.header().tensors.size(), 0),
        prefetched_(source.header().tensors.size(), false),
        staged_bytes_(source.header().tensors.size(), 0.0) {
    const hw::HardwareProfile& hw = setup.hw;
    // One compute stream and one host link per GPU; one link per pair of GPUs, keyed by its endpoints.
    const int gpus = std::max(1, hw.gpu.count);
    for (int d = 0; d < gpus; ++d) {
      compute_.push_back(std::make_unique<engine::InOrderStream>(sim_, jobs_, "cuda:" + std::to_string(d) + " compute"));
      host_links_.push_back(std::make_unique<engine::SharedLink>(
          sim_, d == 0 ? std::string("pcie") : "pcie cuda:" + std::to_string(d),
          std::max(hw.host_link.h2d_pinned.bandwidth, hw.host_link.h2d_pageable.bandwidth),
          std::max(hw.host_link.d2h_pinned.bandwidth, hw.host_link.d2h_pageable.bandwidth), hw.host_link.bidirectional));
    }
    last_job_.assign(compute_.size(), 0);
    has_last_job_.assign(compute_.size(), false);
    if (hw.peer_link)
      for (int a = 0; a < gpus; ++a)
        for (int b = a + 1; b < gpus; ++b)
          peer_links_[{a, b}] = std::make_unique<engine::SharedLink>(
              sim_, a == 0 && b == 1 ? std::string("peer") : "peer cuda:" + std::to_string(a) + "-cuda:" + std::to_string(b),
              hw.peer_link->transfer.bandwidth, hw.peer_link->transfer.bandwidth, hw.peer_link->bidirectional);
    if (placement.managed.enabled) {
      if (!hw.managed_memory) throw std::logic_error("managed placement without a managed_memory profile section");
      um_.emplace(*hw.managed_memory, source.header(), placement,
                  placement::managed_gpu_capacity(source.header(), hw, placement));
    }
    if (timeline_) {
      // The steps and the host first: the viewer lists tracks in this order.
      timeline_->track(kStepsTrack);
      timeline_->track(kHostTrack);
      for (auto& c : compute_) c->observe(this);
      copy_from_host_.observe(this);
      copy_from_peer_.observe(this);
      staging_.observe([this] { show_memory(); });
    }
  }

  result::RunResult run() {
    result::RunResult result;
    result.engine = "event";
    if (start_next_step()) {
      show_static_memory();
      show_memory();
      sim_.schedule(0, engine::kPriorityIssue, this, 0);
      sim_.run();
    }
    result.steps = std::move(steps_);
    result.peak_bytes["cuda:0"] = staging_.peak() + (um_ ? um_->peak_resident_bytes() : 0.0);
    if (um_) {
      const auto& st = um_->stats();
      result.managed = {true, st.faulted_blocks, st.fault_batches, st.mapping_faults, st.evicted_blocks,
                        st.migrated_bytes, st.written_back_bytes, st.remote_bytes, st.prefetched_bytes,
                        um_->peak_resident_bytes(), um_->step_working_bytes(), um_->capacity_bytes()};
      result.managed.gemv_shapes_measured = um_->gemv_coverage().measured();
      result.managed.gemv_shapes_from_nearest = um_->gemv_coverage().from_nearest();
    }
    placement::add_static_peaks(source_.header(), hw_, placement_, result.peak_bytes);
    add_transient_peaks(transient_peak_, hw_, false, result);
    result.events = sim_.events_processed();
    // The placement was checked before the run with its staging bound; the run's own peak (copies staged
    // ahead of use) must fit too, or the real run would fail where this one reports a speed. Managed
    // memory is exempt: its residency is bounded by the driver model, which evicts.
    if (!um_) {
      const double peak = result.peak_bytes["cuda:0"];
      if (peak > hw_.gpu.memory) {
        const auto& h = source_.header();
        const std::string model = h.meta.count("model") ? h.meta.at("model") : std::string("the model");
        std::string where;
        if (first_over_)
          where = "; it first runs out in step " + std::to_string(first_over_->step) + " at '" + first_over_->action +
                  "', allocating " + units::format_bytes(first_over_->bytes) + " with " +
                  units::format_bytes(first_over_->in_use) + " in use";
        const auto [reaches, has] = units::format_bytes_apart(peak, hw_.gpu.memory);
        throw CapacityError(model + ": the run's peak on cuda:0 reaches " + reaches +
                                " (weights, activations, the driver's reserve and the copies staged ahead of use), "
                                "but cuda:0 has " + has + " on '" + hw_.name + "'" + where,
                            "cuda:0", peak, hw_.gpu.memory);
      }
    }
    return result;
  }

  void on_event(std::uint64_t) override { advance(); }
  void job_done(JobId) override { sim_.schedule(sim_.now(), engine::kPriorityIssue, this, 0); }
  void job_ready(JobId job) override { jobs_.complete(job, sim_.now()); }

  void item_finished(const std::string& stream, SimTime start, SimTime end, JobId job) override {
    if (!recording() || job >= job_view_.size()) return;
    JobView& v = job_view_[job];
    timeline_->span(stream, v.label, start, end, v.args);
    // Flow ends sit mid-span, so that each binds to this span and not to a neighbour touching it.
    v.stream = &stream;
    v.middle = start + (end - start) / 2;
    v.finished = true;
    for (std::uint32_t i = 0; i < v.waits_count; ++i) {
      const JobId copy = waits_on_[v.waits_begin + i];
      if (copy < job_view_.size() && job_view_[copy].copy && job_view_[copy].finished)
        timeline_->flow(*job_view_[copy].stream, job_view_[copy].middle, stream, v.middle);
    }
  }

  // Prices a kernel on managed memory, or a managed prefetch, when it starts.
  SimTime duration_at_start(std::uint64_t token) override {
    const Action& a = plan_.actions[token];
    managed::AccessCost cost;
    double seconds = 0;
    const std::uint64_t batches_before = um_->stats().fault_batches;
    if (a.kind == ActionKind::ManagedPrefetch) {
      seconds = um_->prefetch_to_gpu(a.tensor, cost);
      um_->record(cost, true);
    } else {
      for (std::uint32_t i = 0; i < a.managed_count; ++i) {
        const ManagedAccess& m = plan_.managed[a.managed_begin + i];
        um_->access(m.tensor, m.bytes, m.write, cost, m.reread, m.offset, m.reads, m.fresh);
      }
      seconds = managed::kernel_seconds(um_->spec(), a.cost, cost);
      um_->record(cost, false);
    }
    if (recording()) {
      show_driver_work(a, cost, um_->stats().fault_batches - batches_before);
      show_memory();
    }
    step_um_.h2d += cost.migrated_bytes + cost.launch_migrated_bytes;
    step_um_.d2h += cost.written_back_bytes;
    step_um_.remote += cost.remote_bytes + cost.remote_input_bytes + cost.remote_reread_bytes;
    step_um_.faults += cost.faulted_blocks;
    step_um_.evictions += cost.evicted_blocks;
    return to_sim_time(seconds);
  }

 private:
  bool recording() const { return timeline_ && timeline_->recording(steps_.size()); }

  // What a timeline calls an action (only built while recording).
  std::string label(const Action& a) const {
    const auto& tensors = source_.header().tensors;
    auto op_name = [&](const char* prefix) {
      const trace::Op& op = current_->ops[static_cast<std::size_t>(a.op)];
      return std::string(prefix) + trace::to_string(op.kind) + " L" + std::to_string(op.layer);
    };
    switch (a.kind) {
      case ActionKind::Kernel: return op_name("");
      case ActionKind::CpuOp: return op_name("cpu ");
      case ActionKind::CopyOnStream: return "copy " + tensors[a.tensor].name;
      case ActionKind::Prefetch: return "prefetch " + tensors[a.tensor].name;
      case ActionKind::ManagedPrefetch: return "cudaMemPrefetchAsync " + tensors[a.tensor].name;
      case ActionKind::AwaitSlot: return "wait for a staging slot";
      case ActionKind::ActivationToHost: return "activations to host";
      case ActionKind::ActivationToDevice: return "activations to GPU";
      case ActionKind::ActivationToPeer: return "activations to cuda:" + std::to_string(a.device);
      case ActionKind::AllocatorSync: return "cudaFree (syncs)";
      case ActionKind::OpSync: return "blocking copy in the op (syncs)";
      case ActionKind::Sync: return "end-of-step sync";
      case ActionKind::StepOverhead: return "per-step host work";
    }
    return "?";
  }
  // What a timeline shows of an op: which op, its kind, layer, FLOPs, the bytes it moves and the
  // weights it reads.
  report::Timeline::Args op_args(const Action& a) const {
    const trace::Op& op = current_->ops[static_cast<std::size_t>(a.op)];
    report::Timeline::Args args{{"op", a.op}, {"kind", trace::to_string(op.kind)}, {"layer", op.layer}, {"flops", op.flops}};
    if (a.kind == ActionKind::Kernel) args["bytes"] = whole_bytes(a.cost.memory_bytes);
    auto weights = report::Timeline::Args::array();
    for (const trace::TensorAccess& r : op.reads)
      if (source_.header().tensors[r.tensor].kind == trace::TensorKind::Weight)
        weights.push_back(source_.header().tensors[r.tensor].name);
    if (!weights.empty()) args["weights"] = std::move(weights);
    return args;
  }
  // The args of an action's span on its stream (null where there is nothing to add to its name).
  report::Timeline::Args stream_args(const Action& a) const {
    const auto& tensors = source_.header().tensors;
    switch (a.kind) {
      case ActionKind::Kernel:
      case ActionKind::CpuOp: return op_args(a);
      case ActionKind::CopyOnStream:
      case ActionKind::Prefetch:
        return {{"tensor", tensors[a.tensor].name}, {"bytes", whole_bytes(a.bytes)},
                {"from", placement::device_name(a.source)}, {"link", copy_link(a).first->name()}};
      case ActionKind::ManagedPrefetch:
        return {{"tensor", tensors[a.tensor].name}, {"bytes", tensors[a.tensor].bytes}};
      case ActionKind::ActivationToHost:
      case ActionKind::ActivationToDevice:
        return {{"bytes", whole_bytes(a.bytes)}, {"link", host_links_[static_cast<std::size_t>(a.device)]->name()}};
      case ActionKind::ActivationToPeer:
        return {{"bytes", whole_bytes(a.bytes)}, {"link", peer_link(a.source, a.device).first->name()}};
      default: return nullptr;
    }
  }
  // Remembers what the timeline shows of a stream job when it finishes (only while recording).
  void label_job(JobId job, const Action& a) {
    if (!recording()) return;
    if (job_view_.size() <= job) job_view_.resize(job + 1);
    JobView& v = job_view_[job];
    v = JobView{};
    v.label = label(a);
    v.args = stream_args(a);
    v.copy = a.kind == ActionKind::CopyOnStream || a.kind == ActionKind::Prefetch || a.kind == ActionKind::ManagedPrefetch;
    if (a.kind == ActionKind::Kernel) {
      v.waits_begin = static_cast<std::uint32_t>(waits_on_.size());
      v.waits_count = a.deps_count;
      for (std::uint32_t i = 0; i < a.deps_count; ++i) waits_on_.push_back(tensor_job_[plan_.deps[a.deps_begin + i]]);
    }
  }

  // The step as a span on its own track, with what it moved.
  void show_step(const result::StepResult& r) {
    const std::size_t index = steps_.size();
    const std::string kind = trace::to_string(r.kind);
    report::Timeline::Args args{{"step", index}, {"kind", kind}, {"tokens", r.tokens},
                                {"h2d_bytes", whole_bytes(r.h2d_bytes)}, {"d2h_bytes", whole_bytes(r.d2h_bytes)},
                                {"peer_bytes", whole_bytes(r.peer_bytes)}};
    if (um_) {
      args["faulted_blocks"] = r.faulted_blocks;
      args["evicted_blocks"] = r.evicted_blocks;
    }
    timeline_->span(kStepsTrack, kind + " " + std::to_string(index), step_start_, sim_.now(), args);
  }

  // Transient values an op starts, allocated as the host issues it, and those whose last use it is, released after
  // (PyTorch's caching allocator counts in the host's order): on cuda:0 beside the staged copies. Other GPUs' come
  // from the plans' peaks (nothing is staged there).
  void allocate_transients(const Action& a) {
    if (a.transient_bytes <= 0 || a.device != placement::kComputeGpu) return;
    staging_.allocate(a.transient_bytes);
    note_allocation(a, a.transient_bytes);
  }
  // The first allocation that takes cuda:0 past its memory (outside managed memory, whose driver evicts): where the
  // run would fail, named in the run's capacity error.
  void note_allocation(const Action& a, double bytes) {
    if (um_ || first_over_ || staging_.in_use() <= hw_.gpu.memory) return;
    first_over_ = Overflow{steps_.size() + 1, label(a), bytes, staging_.in_use() - bytes};
  }
  void release_transients(const Action& a) {
    for (std::uint32_t i = 0; i < a.releases_count; ++i) {
      const TransientRelease& r = plan_.transient_releases[a.releases_begin + i];
      if (r.device == placement::kComputeGpu) staging_.release_now(r.bytes);
    }
  }

  // Memory in use on the compute GPU: what is always there, the staged copies and the managed blocks
  // the driver has resident.
  void show_memory() {
    if (!recording()) return;
    timeline_->counter("cuda:0 memory", sim_.now(), staging_.in_use() + (um_ ? um_->resident_bytes() : 0.0));
  }
  // The other devices' memory does not change during a run: one value each, at the start.
  void show_static_memory() {
    if (!recording()) return;
    std::map<std::string, double> in_use;
    placement::add_static_peaks(source_.header(), hw_, placement_, in_use);
    in_use.erase("disk");  // not memory: the file weights are read from
    for (const auto& [device, bytes] : in_use)
      if (bytes > 0) timeline_->counter(device + " memory", sim_.now(), bytes);
  }

  // The managed-memory driver's work for one kernel's accesses (or one prefetch), on its own track: the
  // evictions that made room, then the faults that brought blocks in. The kernel stalls for both at its
  // start (ManagedMemory::stall_seconds sums them), so they are drawn from now, in that order.
  void show_driver_work(const Action& a, const managed::AccessCost& cost, std::uint64_t batches) {
    managed::AccessCost evicting;
    evicting.written_back_bytes = cost.written_back_bytes;
    evicting.evicted_blocks = cost.evicted_blocks;  // its overhead is the eviction's too
    const SimTime evict_end = add_sim_time(sim_.now(), to_sim_time(um_->stall_seconds(evicting)));
    if (cost.evicted_blocks > 0)
      timeline_->span(kManagedTrack, "evict", sim_.now(), evict_end,
                      {{"blocks", cost.evicted_blocks}, {"written_back_bytes", whole_bytes(cost.written_back_bytes)},
                       {"for", label(a)}});
    if (a.kind == ActionKind::ManagedPrefetch) return;  // migrated without faults: its span is on the copy stream
    managed::AccessCost faulting;  // the stall's parts that are the driver's, without the evictions
    faulting.faulted_blocks = cost.faulted_blocks;
    faulting.mapping_faults = cost.mapping_faults;
    faulting.migrated_bytes = cost.migrated_bytes;
    faulting.launch_migrated_bytes = cost.launch_migrated_bytes;
    const char* name = cost.faulted_blocks > 0          ? "fault batches"
                       : cost.launch_migrated_bytes > 0 ? "migrate at launch"
                       : cost.mapping_faults > 0        ? "mapping faults"
                                                        : nullptr;
    if (!name) return;
    timeline_->span(kManagedTrack, name, evict_end, add_sim_time(evict_end, to_sim_time(um_->stall_seconds(faulting))),
                    {{"batches", batches}, {"blocks", cost.faulted_blocks},
                     {"migrated_bytes", whole_bytes(cost.migrated_bytes + cost.launch_migrated_bytes)},
                     {"mapping_faults", cost.mapping_faults}, {"for", label(a)}});
  }

  bool start_next_step() {
    current_ = source_.next_view(step_);
    if (!current_) return false;
    planner_.plan(*current_, plan_);
    fold_transient_peaks(plan_, transient_peak_);
    jobs_.clear();
    job_view_.clear();
    waits_on_.clear();
    copy_jobs_.clear();
    pc_ = 0;
    phase_ = Phase::Start;
    step_start_ = sim_.now();
    has_last_job_.assign(compute_.size(), false);
    h2d_start_ = host_bytes(Direction::ToDevice);
    d2h_start_ = host_bytes(Direction::FromDevice);
    peer_start_ = peer_bytes();
    busy_start_ = compute_[0]->busy_time();
    step_um_ = {};
    if (um_) um_->begin_step();
    return true;
  }

  void finish_step() {
    result::StepResult r;
    r.kind = plan_.kind;
    r.tokens = plan_.tokens;
    r.seconds = to_seconds(sim_.now() - step_start_);
    r.h2d_bytes = host_bytes(Direction::ToDevice) - h2d_start_;
    r.d2h_bytes = host_bytes(Direction::FromDevice) - d2h_start_;
    r.peer_bytes = peer_bytes() - peer_start_;
    r.gpu_busy_seconds = to_seconds(compute_[0]->busy_time() - busy_start_);
    r.h2d_bytes += step_um_.h2d;
    r.d2h_bytes += step_um_.d2h;
    r.remote_read_bytes = step_um_.remote;
    r.faulted_blocks = step_um_.faults;
    r.evicted_blocks = step_um_.evictions;
    if (recording()) show_step(r);
    steps_.push_back(r);
  }

  double host_bytes(Direction d) const {
    double total = 0;
    for (const auto& l : host_links_) total += l->bytes_moved(d);
    return total;
  }
  double peer_bytes() const {
    double total = 0;
    for (const auto& [ends, l] : peer_links_) total += l->bytes_moved(Direction::ToDevice) + l->bytes_moved(Direction::FromDevice);
    return total;
  }
  // The link between two GPUs and the direction from `from` to `to` on it (towards the lower index is ToDevice).
  std::pair<engine::SharedLink*, Direction> peer_link(placement::DeviceId from, placement::DeviceId to) const {
    const auto it = peer_links_.find({std::min(from, to), std::max(from, to)});
    if (it == peer_links_.end()) throw std::logic_error("no link between the GPUs of a transfer");
    return {it->second.get(), from > to ? Direction::ToDevice : Direction::FromDevice};
  }
  // A job on `device`'s compute stream, remembered as that stream's latest work.
  JobId compute_job(placement::DeviceId device) {
    const auto d = static_cast<std::size_t>(device);
    const JobId job = jobs_.create(compute_[d].get());
    last_job_[d] = job;
    has_last_job_[d] = true;
    return job;
  }

  // The link a weight copy to the compute GPU crosses, and its direction: the peer link from another
  // GPU, else the compute GPU's host link.
  std::pair<engine::SharedLink*, Direction> copy_link(const Action& a) const {
    if (a.source > placement::kComputeGpu) return peer_link(a.source, placement::kComputeGpu);
    return {host_links_[0].get(), Direction::ToDevice};
  }

  // Starts a transfer of `a` on `stream` and returns its job.
  JobId enqueue_copy(engine::InOrderStream& stream, const Action& a, JobId job) {
    const auto [latency, rate] = planner_.copy_latency_and_rate(a.source, a.tensor, a.bytes);
    const auto [link, dir] = copy_link(a);
    stream.enqueue_transfer(job, *link, dir, a.bytes, latency, rate);
    return job;
  }

  JobId enqueue_activation(const Action& a, bool to_device) {
    const JobId job = compute_job(a.device);
    const auto [latency, rate] = planner_.activation_curve(to_device).latency_and_rate(std::max(a.bytes, 1.0));
    compute_[static_cast<std::size_t>(a.device)]->enqueue_transfer(
        job, *host_links_[static_cast<std::size_t>(a.device)], to_device ? Direction::ToDevice : Direction::FromDevice,
        a.bytes, latency, rate);
    return job;
  }

  // Hidden states from one GPU to the next: after the sender's last kernel, on the receiver's stream.
  JobId enqueue_activation_to_peer(const Action& a) {
    const auto from = static_cast<std::size_t>(a.source);
    const bool after_sender = has_last_job_[from];
    const JobId sender_last = last_job_[from];
    const JobId job = compute_job(a.device);
    if (after_sender) jobs_.add_dependency(job, sender_last);
    const auto [link, dir] = peer_link(a.source, a.device);
    const auto [latency, rate] = planner_.peer_latency_and_rate(std::max(a.bytes, 1.0));
    compute_[static_cast<std::size_t>(a.device)]->enqueue_transfer(job, *link, dir, a.bytes, latency, rate);
    return job;
  }

  // Performs the current action's effect; returns a job the host must wait for, if any.
  std::optional<JobId> take_effect(const Action& a) {
    switch (a.kind) {
      case ActionKind::Kernel: {
        const JobId job = compute_job(a.device);
        engine::InOrderStream& stream = *compute_[static_cast<std::size_t>(a.device)];
        label_job(job, a);
        allocate_transients(a);
        for (std::uint32_t i = 0; i < a.deps_count; ++i) jobs_.add_dependency(job, tensor_job_[plan_.deps[a.deps_begin + i]]);
        if (a.managed_count > 0) stream.enqueue_dynamic(job, *this, pc_);
        else stream.enqueue_compute(job, to_sim_time(a.work_seconds));
        double freed_at_completion = 0;
        for (std::uint32_t i = 0; i < a.frees_count; ++i) {
          const std::uint32_t t = plan_.frees[a.frees_begin + i];
          const double bytes = staged_bytes_[t];  // what its copy allocated (an expert's slice: part of the tensor)
          staged_bytes_[t] = 0;
          release_job_[t] = job;
          release_step_[t] = steps_.size() + 1;
          if (prefetched_[t]) freed_at_completion += bytes;
          else staging_.release_now(bytes);
        }
        if (freed_at_completion > 0) staging_.release_when_done(jobs_, job, freed_at_completion);
        release_transients(a);
        return std::nullopt;
      }
      case ActionKind::AwaitSlot: {
        // A gate: owned by the replay, completed the moment its prerequisites are (job_ready below).
        const JobId job = jobs_.create(this);
        // Only releases issued this step: job ids are reused from step to step, so an older one names
        // some other job (a copy whose release is still ahead holds its buffer; the peak shows it).
        for (std::uint32_t i = 0; i < a.frees_count; ++i) {
          const std::uint32_t t = plan_.slot_waits[a.frees_begin + i];
          if (release_step_[t] == steps_.size() + 1) jobs_.add_dependency(job, release_job_[t]);
        }
        if (jobs_.ready(job)) jobs_.complete(job, sim_.now());
        return job;
      }
      case ActionKind::CopyOnStream:
      case ActionKind::Prefetch: {
        const bool on_compute = a.kind == ActionKind::CopyOnStream;
        engine::InOrderStream& stream = on_compute                        ? *compute_[0]
                                        : a.source > placement::kComputeGpu ? copy_from_peer_
                                                                            : copy_from_host_;
        staging_.allocate(a.bytes);
        note_allocation(a, a.bytes);
        staged_bytes_[a.tensor] = a.bytes;
        prefetched_[a.tensor] = a.kind == ActionKind::Prefetch;
        const JobId job = enqueue_copy(stream, a, on_compute ? compute_job(placement::kComputeGpu) : jobs_.create(&stream));
        label_job(job, a);
        tensor_job_[a.tensor] = job;
        copy_jobs_.push_back(job);
        if (a.host_waits) return job;
        return std::nullopt;
      }
      case ActionKind::ManagedPrefetch: {
        const JobId job = jobs_.create(&copy_from_host_);
        label_job(job, a);
        copy_from_host_.enqueue_dynamic(job, *this, pc_);
        tensor_job_[a.tensor] = job;
        copy_jobs_.push_back(job);
        return std::nullopt;
      }
      case ActionKind::AllocatorSync:
      case ActionKind::OpSync: {
        const JobId job = compute_job(placement::kComputeGpu);
        label_job(job, a);
        compute_[0]->enqueue_compute(job, 0);
        return job;
      }
      case ActionKind::ActivationToHost:
      case ActionKind::ActivationToDevice: {
        const JobId job = enqueue_activation(a, a.kind == ActionKind::ActivationToDevice);
        label_job(job, a);
        return job;
      }
      case ActionKind::ActivationToPeer: {
        const JobId job = enqueue_activation_to_peer(a);
        label_job(job, a);
        return std::nullopt;
      }
      case ActionKind::Sync: {
        // The end of the step waits for every GPU's stream and every copy.
        std::vector<JobId> others;
        for (std::size_t d = 1; d < compute_.size(); ++d)
          if (has_last_job_[d]) others.push_back(last_job_[d]);
        const JobId job = compute_job(placement::kComputeGpu);
        label_job(job, a);
        for (JobId c : copy_jobs_) jobs_.add_dependency(job, c);
        for (JobId o : others) jobs_.add_dependency(job, o);
        compute_[0]->enqueue_compute(job, 0);
        return job;
      }
      case ActionKind::CpuOp:
        release_transients(a);
        return std::nullopt;
      case ActionKind::StepOverhead: return std::nullopt;
    }
    return std::nullopt;
  }

  // The host thread: runs actions until one makes it wait (busy time, or a job to complete).
  void advance() {
    while (true) {
      if (pc_ == plan_.actions.size()) {
        finish_step();
        if (!start_next_step()) return;
        continue;
      }
      const Action& a = plan_.actions[pc_];
      if (phase_ == Phase::Start) {
        const double busy = a.kind == ActionKind::CpuOp ? a.work_seconds : a.host_seconds;
        phase_ = Phase::Effect;
        if (busy > 0) {
          if (recording())
            timeline_->span(kHostTrack, label(a), sim_.now(), add_sim_time(sim_.now(), to_sim_time(busy)),
                            a.kind == ActionKind::CpuOp ? op_args(a) : report::Timeline::Args());
          sim_.schedule_in(to_sim_time(busy), engine::kPriorityIssue, this, 0);
          return;
        }
      }
      if (phase_ == Phase::Effect) {
        if (auto wait = take_effect(a)) {
          // job_done() schedules the next advance(), at once if the job is done already.
          phase_ = Phase::Waiting;
          wait_started_ = sim_.now();
          jobs_.watch(*wait, this);
          return;
        }
      }
      // Effect taken without waiting, or the awaited job is done; then any host work after the wait.
      if (phase_ == Phase::Waiting && recording() && sim_.now() > wait_started_)
        timeline_->span(kHostTrack, "waits: " + label(a), wait_started_, sim_.now());
      if (phase_ == Phase::Waiting && a.after_wait_seconds > 0) {
        if (recording())
          timeline_->span(kHostTrack, label(a), sim_.now(), add_sim_time(sim_.now(), to_sim_time(a.after_wait_seconds)));
        phase_ = Phase::AfterWait;
        sim_.schedule_in(to_sim_time(a.after_wait_seconds), engine::kPriorityIssue, this, 0);
        return;
      }
      ++pc_;
      phase_ = Phase::Start;
    }
  }

  enum class Phase { Start, Effect, Waiting, AfterWait };

  // What the timeline shows of a stream job, kept from its issue to its end (job ids are per step).
  struct JobView {
    std::string label;
    report::Timeline::Args args;
    bool copy = false;                   // a weight copy: kernels waiting for it get an arrow from it
    std::uint32_t waits_begin = 0, waits_count = 0;  // a kernel's copies it waits for (in waits_on_)
    bool finished = false;               // its span is written: on `stream`, with its middle at `middle`
    const std::string* stream = nullptr;
    SimTime middle = 0;
  };

  report::Timeline* timeline_;
  std::vector<JobView> job_view_;  // by job, while recording
  std::vector<JobId> waits_on_;    // flat storage for JobView::waits_*
  SimTime wait_started_ = 0;
  const hw::HardwareProfile& hw_;
  const placement::Placement& placement_;
  trace::StepSource& source_;
  StepPlanner planner_;
  engine::Simulator sim_;
  engine::JobGraph jobs_;
  std::vector<std::unique_ptr<engine::InOrderStream>> compute_;  // by GPU
  std::vector<JobId> last_job_;      // by GPU: the latest job on its compute stream this step
  std::vector<bool> has_last_job_;
  engine::InOrderStream copy_from_host_;
  engine::InOrderStream copy_from_peer_;
  std::vector<std::unique_ptr<engine::SharedLink>> host_links_;  // by GPU
  std::map<std::pair<int, int>, std::unique_ptr<engine::SharedLink>> peer_links_;  // by (lower, higher) GPU
  StagingMemory staging_;
  std::optional<managed::ManagedMemory> um_;
  struct {
    double h2d = 0, d2h = 0, remote = 0;
    std::uint64_t faults = 0, evictions = 0;
  } step_um_;

  trace::Step step_;                      // a step copied out of a source that keeps none
  const trace::Step* current_ = nullptr;  // the step being replayed: step_, or the source's own
  StepPlan plan_;
  std::vector<JobId> tensor_job_;
  std::vector<double> transient_peak_;  // by GPU: the most transient bytes alive at once in any step so far
  struct Overflow {
    std::size_t step;
    std::string action;
    double bytes, in_use;  // the allocation, and what was in use before it
  };
  std::optional<Overflow> first_over_;
  std::vector<JobId> release_job_;   // by tensor: the kernel whose completion frees its staging
  std::vector<std::size_t> release_step_;  // by tensor: 1 + the step release_job_ was set in (0: never)
  std::vector<bool> prefetched_;     // by tensor: staged by a prefetch (vs on demand) this step
  std::vector<double> staged_bytes_;  // by tensor: the bytes its live staged copy holds (0: none)
  std::vector<JobId> copy_jobs_;
  std::size_t pc_ = 0;
  Phase phase_ = Phase::Start;
  SimTime step_start_ = 0;
  double h2d_start_ = 0, d2h_start_ = 0, peer_start_ = 0;
  SimTime busy_start_ = 0;
  std::vector<result::StepResult> steps_;
};

}  // namespace

result::RunResult run_event_engine(const RunSetup& setup, const placement::Placement& placement,
                                   trace::StepSource& source, report::Timeline* timeline) {
  Replay replay(setup, placement, source, timeline);
  return replay.run();
}

}  // namespace tiersim::replay
