#include "analytic/analytic_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>

#include "managed/managed_memory.hpp"
#include "replay/step_plan.hpp"

namespace tiersim::analytic {
namespace {

using replay::Action;
using replay::ActionKind;

struct Segment {
  double host = 0;          // H
  double first_issue = -1;  // h0
  double compute = 0;       // G
  double last_item = 0;     // d_last
  double first_wait = 0;    // w
  bool first_dep_seen = false;
  std::array<double, 2> copy_first_issue{-1, -1};  // x0 per copy stream (0: host, 1: peer)
  std::array<double, 2> copy_total{0, 0};          // X
  std::array<double, 2> after_last_copy{0, 0};     // g_after

  double time() const {
    double t = std::max(host + last_item, std::max(first_issue, 0.0) + compute + first_wait);
    for (int s = 0; s < 2; ++s)
      if (copy_first_issue[s] >= 0) t = std::max(t, copy_first_issue[s] + copy_total[s] + after_last_copy[s]);
    return std::max(t, host);
  }
};

// Managed memory in closed form. The first step is cold: every managed block faults once. After it,
// if the managed footprint fits the GPU nothing faults again; if it does not, the driver's FIFO
// eviction under a cyclic read order misses every weight block every step (uvm.md), writing each
// back unless it is a read-only duplicate, while KV cache and activations stay resident. Remote
// (PreferredLocation=CPU, AccessedBy) weights are read over the link every time.
class SteadyStateManaged {
 public:
  SteadyStateManaged(const hw::HardwareProfile& hw, const placement::Placement& placement, const trace::Header& header)
      : spec_(*hw.managed_memory), placement_(placement), header_(header) {
    managed::ManagedMemory layout(spec_, header, placement, placement::managed_gpu_capacity(header, hw, placement));
    // Without demand paging the strategy has refused a footprint past GPU memory (in bytes; the block
    // count also has each tensor's padding), so it fits.
    fits_ = !placement.managed.demand_paging || layout.footprint_bytes() <= layout.capacity_bytes();
    capacity_bytes_ = layout.capacity_bytes();
  }
  double capacity_bytes() const { return capacity_bytes_; }
  void set_step(std::size_t index) { cold_ = index == 0; }

  void kernel(const replay::StepPlan& plan, const Action& a, managed::AccessCost& cost) const {
    for (std::uint32_t i = 0; i < a.managed_count; ++i) {
      const replay::ManagedAccess& m = plan.managed[a.managed_begin + i];
      const std::uint8_t advice = placement_.managed.advice[m.tensor];
      const double bytes = static_cast<double>(m.bytes), offset = static_cast<double>(m.offset);
      // The blocks the byte range covers (the tensor taken to start on a block: the per-tensor allocator's layout).
      const auto blocks = static_cast<std::uint32_t>(std::ceil((offset + bytes) / spec_.va_block) -
                                                     std::floor(offset / spec_.va_block));
      // The GPU memory those blocks take: the GPU pages (4 KiB) the range covers, a small tensor's not 2 MiB.
      const double held = std::min(blocks * spec_.va_block, std::ceil(bytes / managed::kGpuPage) * managed::kGpuPage);
      if (m.fresh) cost.fresh_touch_seconds += spec_.fresh_first_write_seconds(bytes);  // every step: a new allocation
      if ((advice & (placement::kPreferCpu | placement::kAccessedByGpu)) &&
          !managed::read_duplicates(advice, m.write, placement_.managed.demand_paging)) {
        // A sysmem-fallback prefix of the tensor is in VRAM: the range's part before its end is local.
        const double local = std::clamp(placement::vram_prefix_of(placement_, m.tensor) - offset, 0.0, bytes);
        const double remote = bytes - local;
        if (remote <= 0) continue;
        cost.remote_bytes += remote;
        managed::add_remote_gemv_input(spec_, static_cast<double>(m.reread), bytes, remote, cost);
        if (m.reads > 1) cost.remote_reread_bytes += (m.reads - 1) * remote;
        if (cold_ && !(advice & placement::kAccessedByGpu)) cost.mapping_faults += blocks;
        continue;
      }
      const bool weight = header_.tensors[m.tensor].kind == trace::TensorKind::Weight;
      if (!(cold_ || (weight && !fits_))) continue;
      if (weight && placement_.managed.prefetch > 0) continue;  // migrated by the prefetch instead
      if (!placement_.managed.demand_paging) {  // migrated at launch (Windows/WSL2; never oversubscribed)
        cost.launch_migrated_bytes += held;
        continue;
      }
      cost.faulted_blocks += blocks;
      cost.migrated_bytes += held;
      if (!fits_) cost.evicted_blocks += blocks;  // each evicts one (managed_memory.evict_block_overhead)
      if (!fits_ && !(advice & placement::kReadMostly)) cost.written_back_bytes += held;
    }
  }

  double prefetch_seconds(const Action& a, managed::AccessCost& cost) const {
    if (!(cold_ || !fits_)) return 0;
    const double moved = std::ceil(a.bytes / spec_.va_block) * spec_.va_block;
    cost.migrated_bytes += moved;
    if (!fits_) cost.written_back_bytes += moved;
    return cost.migrated_bytes / spec_.prefetch_to_gpu + managed::writeback_seconds(spec_, cost.written_back_bytes);
  }
  const hw::ManagedMemorySpec& spec() const { return spec_; }

 private:
  const hw::ManagedMemorySpec& spec_;
  const placement::Placement& placement_;
  const trace::Header& header_;
  bool fits_ = true;
  bool cold_ = true;
  double capacity_bytes_ = 0;
};

class StepModel {
 public:
  StepModel(const replay::RunSetup& setup, const placement::Placement& placement, const trace::Header& header)
      : planner_(setup, header, placement),
        managed_(placement.managed.enabled ? std::make_unique<SteadyStateManaged>(setup.hw, placement, header) : nullptr),
        copy_done_(header.tensors.size(), 0.0),
        copy_stream_(header.tensors.size(), 0) {}

  const SteadyStateManaged* managed() const { return managed_.get(); }
  const managed::GemvShapeCoverage& gemv_coverage() const { return gemv_coverage_; }
  // By GPU: the most transient activation bytes alive at once in any step so far.
  const std::vector<double>& transient_peak() const { return transient_peak_; }

  result::StepResult evaluate(const trace::Step& step) {
    planner_.plan(step, plan_);
    replay::fold_transient_peaks(plan_, transient_peak_);
    if (managed_) managed_->set_step(steps_done_++);
    result::StepResult r;
    r.kind = plan_.kind;
    r.tokens = plan_.tokens;
    Segment seg;
    double total = 0;
    for (const Action& a : plan_.actions) {
      const double issue_at = seg.host + a.host_seconds;  // host clock when the action takes effect
      switch (a.kind) {
        case ActionKind::Kernel: {
          seg.host = issue_at;
          if (seg.first_issue < 0) seg.first_issue = issue_at;
          if (a.deps_count > 0 && !seg.first_dep_seen) {
            // The first kernel that needs prefetched weights waits for them if compute got there first.
            seg.first_dep_seen = true;
            double ready = 0;
            for (std::uint32_t i = 0; i < a.deps_count; ++i) ready = std::max(ready, copy_done_[plan_.deps[a.deps_begin + i]]);
            const double compute_there = std::max(seg.first_issue, 0.0) + seg.compute;
            seg.first_wait = std::max(0.0, ready - std::max(compute_there, issue_at));
          }
          double work = a.work_seconds;
          if (a.managed_count > 0) {
            managed::AccessCost cost;
            managed_->kernel(plan_, a, cost);
            work = managed::kernel_seconds(managed_->spec(), a.cost, cost);
            gemv_coverage_.add(managed_->spec(), cost);
            r.h2d_bytes += cost.migrated_bytes + cost.launch_migrated_bytes;
            r.d2h_bytes += cost.written_back_bytes;
            r.remote_read_bytes += cost.remote_bytes + cost.remote_input_bytes + cost.remote_reread_bytes;
            r.faulted_blocks += cost.faulted_blocks;
          }
          seg.compute += work;
          seg.last_item = work;
          for (int s = 0; s < 2; ++s) {
            bool depends_on_stream = false;
            for (std::uint32_t i = 0; i < a.deps_count; ++i)
              depends_on_stream |= copy_stream_[plan_.deps[a.deps_begin + i]] == s + 1;
            if (depends_on_stream) seg.after_last_copy[s] = 0;  // restart: work after the latest needed copy
            if (seg.copy_first_issue[s] >= 0) seg.after_last_copy[s] += work;
          }
          if (a.device == placement::kComputeGpu) r.gpu_busy_seconds += work;
          break;
        }
        case ActionKind::ActivationToPeer: {
          // A pipeline's GPUs run one after another (one sequence, no micro-batches): the hand-over of
          // the hidden states sits on the one compute lane between the two GPUs' kernels.
          const auto [latency, rate] = planner_.peer_latency_and_rate(std::max(a.bytes, 1.0));
          const double t = latency + a.bytes / rate;
          seg.host = issue_at;
          if (seg.first_issue < 0) seg.first_issue = issue_at;
          seg.compute += t;
          seg.last_item = t;
          r.peer_bytes += a.bytes;
          break;
        }
        case ActionKind::CopyOnStream: {
          const double t = planner_.copy_seconds(a.source, a.tensor, a.bytes);
          seg.host = issue_at;
          if (seg.first_issue < 0) seg.first_issue = issue_at;
          seg.compute += t;
          seg.last_item = t;
          r.gpu_busy_seconds += t;
          count_bytes(r, a);
          if (a.host_waits) close_segment(seg, total, true);
          break;
        }
        case ActionKind::Prefetch:
        case ActionKind::ManagedPrefetch: {
          const int s = a.kind == ActionKind::Prefetch && a.source > placement::kComputeGpu ? 1 : 0;
          double t = 0;
          if (a.kind == ActionKind::Prefetch) {
            t = planner_.copy_seconds(a.source, a.tensor, a.bytes);
            count_bytes(r, a);
          } else {
            managed::AccessCost cost;
            t = managed_->prefetch_seconds(a, cost);
            r.h2d_bytes += cost.migrated_bytes;
            r.d2h_bytes += cost.written_back_bytes;
          }
          seg.host = issue_at;
          if (seg.copy_first_issue[s] < 0) seg.copy_first_issue[s] = issue_at;
          seg.copy_total[s] += t;
          copy_done_[a.tensor] = std::max(seg.copy_first_issue[s] + seg.copy_total[s] - t, issue_at) + t;
          copy_stream_[a.tensor] = s + 1;
          set_this_segment_.push_back(a.tensor);
          // The host waits for this copy only; kernels already queued keep running past it.
          if (a.host_waits) close_segment(seg, total, false);
          break;
        }
        case ActionKind::ActivationToHost:
        case ActionKind::ActivationToDevice: {
          const bool to_device = a.kind == ActionKind::ActivationToDevice;
          const double t = planner_.activation_curve(to_device).seconds(std::max(a.bytes, 1.0));
          seg.host = issue_at;
          if (seg.first_issue < 0) seg.first_issue = issue_at;
          seg.compute += t;
          seg.last_item = t;
          (to_device ? r.h2d_bytes : r.d2h_bytes) += a.bytes;
          close_segment(seg, total, true);
          break;
        }
        case ActionKind::CpuOp:
          seg.host += a.work_seconds;
          break;
        case ActionKind::AwaitSlot:
          // Bounds staging memory; in the throughput bounds below a slot is always free in time.
          break;
        case ActionKind::AllocatorSync:
        case ActionKind::OpSync:
          seg.host = issue_at;
          close_segment(seg, total, true);
          total += a.after_wait_seconds;
          break;
        case ActionKind::Sync:
          close_segment(seg, total, true);
          break;
        case ActionKind::StepOverhead:
          total += a.host_seconds;
          break;
      }
    }
    r.seconds = total + seg.time();
    return r;
  }

 private:
  void count_bytes(result::StepResult& r, const Action& a) {
    (a.source > placement::kComputeGpu ? r.peer_bytes : r.h2d_bytes) += a.bytes;
  }
  // Ends a segment where the host waits. If the wait does not drain the compute stream, the compute
  // still queued carries into the next segment as a backlog that starts at once.
  void close_segment(Segment& seg, double& total, bool drains_compute) {
    const double t = seg.time();
    total += t;
    const double backlog =
        drains_compute ? 0.0 : std::max(0.0, std::max(seg.first_issue, 0.0) + seg.compute + seg.first_wait - t);
    seg = Segment{};
    if (backlog > 0) {
      seg.first_issue = 0;
      seg.compute = backlog;
      seg.last_item = backlog;
    }
    for (std::uint32_t tensor : set_this_segment_) {
      copy_done_[tensor] = 0;
      copy_stream_[tensor] = 0;
    }
    set_this_segment_.clear();
  }

  replay::StepPlanner planner_;
  std::unique_ptr<SteadyStateManaged> managed_;
  managed::GemvShapeCoverage gemv_coverage_;
  std::size_t steps_done_ = 0;
  std::vector<double> transient_peak_;
  replay::StepPlan plan_;
  std::vector<double> copy_done_;  // by tensor: completion time of its prefetch within the segment
  std::vector<int> copy_stream_;   // by tensor: 1 host copy stream, 2 peer copy stream, 0 none
  std::vector<std::uint32_t> set_this_segment_;
};

}  // namespace

result::RunResult run_analytic(const replay::RunSetup& setup, const placement::Placement& placement,
                               trace::StepSource& source) {
  result::RunResult result;
  result.engine = "analytic";
  const hw::HardwareProfile& hw = setup.hw;
  StepModel model(setup, placement, source.header());
  trace::Step step;
  while (source.next(step)) result.steps.push_back(model.evaluate(step));
  // Peak memory: the static placement plus the staging of prefetch + 1 copied layers and the most transient
  // activations alive at once (their sum: the closed form does not interleave them).
  const auto& header = source.header();
  double managed_peak = 0;
  if (const SteadyStateManaged* um = model.managed()) {
    // Everything that ever reaches the GPU stays until capacity is reached.
    double gpu_bound = 0;  // blocks that can migrate at all (not kept in host memory by advice)
    for (const auto& t : header.tensors)
      if (placement.managed.managed[t.id] &&
          (!(placement.managed.advice[t.id] & (placement::kPreferCpu | placement::kAccessedByGpu)) ||
           managed::read_duplicates(placement.managed.advice[t.id], false, placement.managed.demand_paging)))
        gpu_bound += std::ceil(static_cast<double>(t.bytes) / hw.managed_memory->va_block) * hw.managed_memory->va_block;
    managed_peak = std::min(gpu_bound, um->capacity_bytes());
    result.managed.enabled = true;
    result.managed.peak_resident_bytes = managed_peak;
    result.managed.gemv_shapes_measured = model.gemv_coverage().measured();
    result.managed.gemv_shapes_from_nearest = model.gemv_coverage().from_nearest();
    for (const auto& st : result.steps) {
      result.managed.faulted_blocks += st.faulted_blocks;
      result.managed.remote_bytes += st.remote_read_bytes;
    }
  }
  result.peak_bytes["cuda:0"] = placement::static_bytes_on_compute_gpu(header, hw, placement) + managed_peak +
                                placement::staging_bound(header, placement);
  placement::add_static_peaks(header, hw, placement, result.peak_bytes);
  replay::add_transient_peaks(model.transient_peak(), hw, true, result);
  return result;
}

}  // namespace tiersim::analytic
