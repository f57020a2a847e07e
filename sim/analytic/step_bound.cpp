#include "analytic/step_bound.hpp"

#include <algorithm>
#include <array>

namespace tiersim::analytic {
namespace {

using replay::Action;
using replay::ActionKind;

// The least a kernel on managed memory can take: the event engine prices it at its start as the driver's
// stall plus GpuOpCost::seconds(remote bytes, remote rate) for whatever share of its bytes is read over the
// link; over every share r of its bytes m that is at least max(compute, floor, (m - r)/local, r/remote),
// whose smallest value is m/(local + remote).
double managed_kernel_floor(const hw::GpuOpCost& c, double remote_rate) {
  if (c.measured_seconds >= 0) return c.measured_seconds;
  const double memory = c.local_rate + remote_rate > 0 ? c.memory_bytes / (c.local_rate + remote_rate) : 0;
  return std::max({c.compute_seconds, c.floor_seconds, memory}) + c.gap_seconds;
}

// Whether the host waits for the action's device work (replay::Replay::take_effect returns a job).
bool host_waits(const Action& a) {
  switch (a.kind) {
    case ActionKind::AwaitSlot:
    case ActionKind::AllocatorSync:
    case ActionKind::OpSync:
    case ActionKind::ActivationToHost:
    case ActionKind::ActivationToDevice:
    case ActionKind::Sync: return true;
    case ActionKind::CopyOnStream:
    case ActionKind::Prefetch: return a.host_waits;
    default: return false;
  }
}

}  // namespace

double StepBound::seconds() const { return std::max({host, stream, link}); }

StepBounder::StepBounder(const replay::RunSetup& setup, const trace::Header& header, const placement::Placement& placement)
    : setup_(setup), planner_(setup, header, placement) {}

StepBound StepBounder::bound(const trace::Step& step) {
  planner_.plan(step, plan_);
  const hw::HardwareProfile& hw = setup_.hw;
  const double remote_rate = hw.managed_memory ? hw.managed_memory->remote_read_bandwidth : 0;
  compute_.assign(static_cast<std::size_t>(std::max(1, hw.gpu.count)), 0.0);
  // The GPUs' stream items in a chain: a pipeline's hand-over to the next GPU starts after the sender's last
  // item and precedes the receiver's next ones (in order on its stream), so a run of items that moves from GPU
  // to GPU only through hand-overs is serial as a whole; a change of GPU without one starts a new chain.
  double chain = 0, longest_chain = 0;
  int chain_gpu = 0;
  auto on_stream = [&](int gpu, double t) {
    if (gpu != chain_gpu) {
      longest_chain = std::max(longest_chain, chain);
      chain = 0;
      chain_gpu = gpu;
    }
    chain += t;
  };
  double host = 0;
  std::array<double, 2> copy_stream{0, 0};  // copies from host memory, copies from a peer GPU
  // Bytes by link direction: the compute GPU's host link to it and from it, and any peer link into a GPU.
  // Copies from another GPU cross that GPU's own link to cuda:0: bytes by source GPU.
  double host_to_device = 0, device_to_host = 0;
  std::vector<double> peer_bytes(compute_.size(), 0.0);
  auto transfer = [](double latency, double bytes, double rate) { return latency + (rate > 0 ? bytes / rate : 0); };
  for (const Action& a : plan_.actions) {
    host += a.kind == ActionKind::CpuOp ? a.work_seconds : a.host_seconds;
    if (host_waits(a)) host += a.after_wait_seconds;
    const std::size_t gpu = static_cast<std::size_t>(std::max(0, a.device));
    switch (a.kind) {
      case ActionKind::Kernel:
      {
        const double t = a.managed_count > 0 ? managed_kernel_floor(a.cost, remote_rate) : a.work_seconds;
        compute_[gpu] += t;
        on_stream(static_cast<int>(gpu), t);
        break;
      }
      case ActionKind::CopyOnStream:
      case ActionKind::Prefetch: {
        const auto [latency, rate] = planner_.copy_latency_and_rate(a.source, a.tensor, a.bytes);
        const double t = transfer(latency, a.bytes, rate);
        if (a.kind == ActionKind::CopyOnStream) compute_[0] += t, on_stream(0, t);
        else copy_stream[a.source > placement::kComputeGpu ? 1 : 0] += t;
        if (a.host_waits) host += t;
        if (a.source > placement::kComputeGpu) peer_bytes[std::min(static_cast<std::size_t>(a.source), peer_bytes.size() - 1)] += a.bytes;
        else host_to_device += a.bytes;
        break;
      }
      case ActionKind::ActivationToHost:
      case ActionKind::ActivationToDevice: {
        const bool to_device = a.kind == ActionKind::ActivationToDevice;
        const auto [latency, rate] = planner_.activation_curve(to_device).latency_and_rate(std::max(a.bytes, 1.0));
        const double t = transfer(latency, a.bytes, rate);
        compute_[gpu] += t;
        on_stream(static_cast<int>(gpu), t);
        host += t;
        if (gpu == 0) (to_device ? host_to_device : device_to_host) += a.bytes;
        break;
      }
      case ActionKind::ActivationToPeer: {
        const auto [latency, rate] = planner_.peer_latency_and_rate(std::max(a.bytes, 1.0));
        const double t = transfer(latency, a.bytes, rate);
        compute_[gpu] += t;
        // After the sender's last item: the chain goes on on the receiver's stream.
        if (a.source == chain_gpu) {
          chain += t;
          chain_gpu = static_cast<int>(gpu);
        } else {
          on_stream(static_cast<int>(gpu), t);
        }
        break;
      }
      default: break;  // waits and managed prefetches add time, never take it away
    }
  }
  StepBound b;
  b.host = host;
  b.stream = std::max({*std::max_element(compute_.begin(), compute_.end()), copy_stream[0], copy_stream[1],
                       std::max(longest_chain, chain)});
  const auto& link = hw.host_link;
  const double to_device = std::max(link.h2d_pinned.bandwidth, link.h2d_pageable.bandwidth);
  const double from_device = std::max(link.d2h_pinned.bandwidth, link.d2h_pageable.bandwidth);
  b.link = std::max({host_to_device / to_device, device_to_host / from_device,
                     (host_to_device + device_to_host) / std::max(link.bidirectional, std::max(to_device, from_device))});
  if (hw.peer_link)
    for (double bytes : peer_bytes) b.link = std::max(b.link, bytes / hw.peer_link->transfer.bandwidth);
  return b;
}

RunBound bound_run(const replay::RunSetup& setup, const trace::Header& header, const placement::Placement& placement,
                   const std::vector<trace::Step>& steps) {
  StepBounder bounder(setup, header, placement);
  RunBound r;
  const trace::Step* first_decode = nullptr;
  const trace::Step* last_decode = nullptr;
  bool iteration_done = false;
  for (const trace::Step& s : steps) {
    if (s.kind == trace::StepKind::Prefill) r.prefill_seconds += bounder.bound(s).seconds();
    if (s.kind == trace::StepKind::Decode) (first_decode ? last_decode : first_decode) = &s;
    if (s.kind == trace::StepKind::Iteration && !iteration_done) {
      r.iteration_seconds = bounder.bound(s).seconds();
      iteration_done = true;
    }
  }
  for (const trace::Step* s : {first_decode, last_decode}) {
    if (!s) continue;
    const double seconds = bounder.bound(*s).seconds();
    if (seconds > 0) r.decode_tps = std::max(r.decode_tps, static_cast<double>(s->tokens) / seconds);
  }
  return r;
}

}  // namespace tiersim::analytic
