#pragma once
// A toy model and a toy machine with round numbers, so expected step times can be worked out by hand.
//   GPU memory bandwidth 1 GB/s (efficiency 1): a kernel touching 1e6 bytes takes 1 ms.
//   Host link 100 MB/s each way, no latency: copying 1e6 bytes takes 10 ms, 1e5 bytes 1 ms.
//   Host memory 100 MB/s (efficiency 1): a CPU op touching 1.1e6 bytes takes 11 ms.
//   No launch, copy or per-step host costs unless a test sets them.
#include <memory>
#include <sstream>
#include <string>

#include "hardware/profile.hpp"
#include "hardware/profile_loader.hpp"
#include "placement/placement.hpp"
#include "replay/run_setup.hpp"
#include "runtime/runtime_loader.hpp"
#include "trace/trace_reader.hpp"

namespace tiersim::testing {

// Managed memory on the toy machine: 1 MiB blocks, 10 us per fault batch, 5 us per block, faults move
// 100 MB/s, prefetch 100 MB/s, eviction write-back 50 MB/s, remote reads 100 MB/s.
inline const char* kToyManagedMemory = R"(managed_memory:
  source: "test"
  va_block: "1 MiB"
  big_page: "64 KiB"
  prefetch_threshold: 0.51
  fault_batch_count: 256
  fault_latency: "10 us"
  fault_block_overhead: "5 us"
  fault_migration_bandwidth: "100 MB/s"
  prefetch_to_gpu: "100 MB/s"
  evict_to_cpu: "50 MB/s"
  remote_read_bandwidth: "100 MB/s"
  mapping_fault_cost: "7 us"
  alloc_call: "20 us"
  free_call: "30 us"
)";

inline std::string toy_profile_yaml(const std::string& gpu_memory = "1 GiB", bool managed = false) {
  return R"(tiersim_profile: 1
name: toy
description: "round numbers for hand-checked tests"
gpu:
  source: "test"
  name: "toy GPU"
  count: 2
  memory: ")" + gpu_memory + R"("
  reserved: "0 B"
  memory_bandwidth: "1 GB/s"
  memory_efficiency: 1.0
  compute:
    bf16: "1000 TFLOP/s"
  compute_efficiency: 1.0
  kernel_min_time: "0 us"
host:
  source: "test"
  name: "toy host"
  memory: "16 GiB"
  memory_bandwidth: "100 MB/s"
  memory_efficiency: 1.0
  compute:
    bf16: "1000 TFLOP/s"
  compute_efficiency: 1.0
  op_overhead: "0 us"
host_link:
  source: "test"
  type: pcie
  generation: 4
  width: 16
  h2d_pinned: {bandwidth: "100 MB/s", latency: "0 us"}
  d2h_pinned: {bandwidth: "100 MB/s", latency: "0 us"}
  h2d_pageable: {bandwidth: "100 MB/s", latency: "0 us"}
  d2h_pageable: {bandwidth: "100 MB/s", latency: "0 us"}
  bidirectional: "200 MB/s"
peer_link:
  source: "test"
  type: nvlink
  transfer: {bandwidth: "500 MB/s", latency: "0 us"}
  bidirectional: "1 GB/s"
)" + std::string(managed ? kToyManagedMemory : "");
}

// The toy runtime: no host costs unless a test sets them; a new sequence length costs 1 ms.
inline runtime::RuntimeProfile toy_runtime(const std::string& per_launch = "0 us", const std::string& per_step = "0 us") {
  return runtime::parse_runtime(R"(tiersim_runtime: 1
name: toy
description: "round numbers for hand-checked tests"
source: "test"
per_launch: ")" + per_launch + R"("
per_copy: "0 us"
per_prefetch: "0 us"
per_step: ")" + per_step + R"("
new_length_attention: "1 ms"
peer_copy_sync: "0 us"
peer_copy_overlaps_compute: true
)", "toy-runtime.yaml");
}

// The toy hardware with its runtime and run options, usable wherever the engines take a RunSetup.
struct ToyMachine {
  hw::HardwareProfile hw;
  runtime::RuntimeProfile runtime;
  bool fresh_lengths = false;
  operator replay::RunSetup() const { return {hw, runtime, fresh_lengths}; }  // NOLINT: implicit on purpose
};

inline ToyMachine toy_profile(const std::string& per_launch = "0 us", const std::string& per_step = "0 us") {
  return {hw::parse_profile(toy_profile_yaml(), "toy.yaml"), toy_runtime(per_launch, per_step)};
}

// `layers` layers, each one op reading a 1e6-byte weight and writing 1e5 bytes of activations,
// repeated for `steps` decode steps.
inline std::string toy_trace_text(int layers, int steps) {
  std::ostringstream t;
  t << "tiersim-trace 1\nmeta model toy\nmeta batch 1\n";
  for (int l = 0; l < layers; ++l) t << "tensor " << l << " weight 1000000 " << l << " w" << l << "\n";
  t << "tensor " << layers << " act 100000 -1 activations\n";
  for (int s = 0; s < steps; ++s) {
    t << "step decode tokens=1\n";
    for (int l = 0; l < layers; ++l) t << "op gemv layer=" << l << " read=" << l << " write=" << layers << "\n";
  }
  t << "end\n";
  return t.str();
}

inline std::unique_ptr<trace::TraceReader> toy_trace(int layers, int steps) {
  return std::make_unique<trace::TraceReader>(std::make_unique<std::istringstream>(toy_trace_text(layers, steps)),
                                              "toy.trace");
}

// How the toy's offloaded weights are used: copied (with these copy options), or, with `cpu`, their
// layers executed where they live.
struct ExecutionOptions {
  bool cpu = false;
  int prefetch = 0;
  placement::HostMemory host_memory = placement::HostMemory::Pinned;
  bool stream = false;  // copy:stream (on demand on the offload streams)
};

// Weights of the listed layers on `where`, everything else on cuda:0.
inline placement::Placement toy_placement(const trace::Header& h, std::initializer_list<int> offloaded,
                                          placement::DeviceId where, ExecutionOptions exec = {}) {
  placement::Placement p;
  p.device.assign(h.tensors.size(), placement::kComputeGpu);
  p.path.assign(h.tensors.size(), placement::Path::Local);
  for (int l : offloaded) {
    p.device[static_cast<std::size_t>(l)] = where;
    p.path[static_cast<std::size_t>(l)] = exec.cpu ? placement::Path::Execute : placement::Path::Copy;
  }
  p.copy.prefetch = exec.prefetch;
  p.copy.host_memory = exec.host_memory;
  p.copy.stream = exec.stream;
  return p;
}

}  // namespace tiersim::testing
