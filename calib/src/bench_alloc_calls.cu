// The host cost of a per-tensor managed allocator's calls (the seeds', experiments/validate/managed_allocator.cu)
// as a framework's step makes them: cudaMallocManaged for every tensor, a kernel writing it, cudaFree when the
// tensor dies, always beside live allocations (the weights, the KV cache, the step's other activations).
// bench_managed's um_alloc_call / um_free_call time one call with nothing else allocated (each free releases the
// last range of its VA block); these time the same calls in a steady state:
// - a live set: 256 MiB of "weights" and 512 small ranges (512 B - 64 KiB), allocated and written first;
// - then, per call: cudaMallocManaged of the next size of a fixed cycle (16 B - 256 KiB, log-spaced), a kernel
//   writing the new range, and cudaFree of the range allocated `depth` calls before (a FIFO of in-flight tensors,
//   as an op's outputs outlive it by a few ops). cudaFree waits for the device; tiersim charges that wait apart
//   (the step's kernels, their faults), so the free is timed after the stream has drained: its own host cost.
// Rows: um_alloc_call_live,malloc_managed_<size> and um_free_call_live,free_gpu_written_<size> (host seconds per
// call, by size), and um_alloc_call_live,malloc_managed_all / um_free_call_live,free_gpu_written_all (every call).
#include <deque>
#include <unistd.h>
#include <cstring>
#include <cstddef>
#include <chrono>

#include "measure.hpp"

namespace calib {

namespace {

// The live allocations a step's calls run beside: 256 MiB of "weights" and 512 small ranges (512 B - 64 KiB; 64 with
// --quick), allocated and written by the GPU, freed when it goes.
struct LiveSet {
  void* weights = nullptr;
  std::vector<void*> ranges;
  LiveSet(const Options& o, cudaStream_t s) : ranges(o.quick ? 64 : 512, nullptr) {
    const size_t weights_bytes = size_t(256) << 20;
    CUDA_CHECK(cudaMallocManaged(&weights, weights_bytes));
    fill_bytes(weights, weights_bytes, 1, s);
    for (size_t i = 0; i < ranges.size(); ++i) {
      const size_t bytes = size_t(512) << (i % 8);  // 512 B .. 64 KiB
      CUDA_CHECK(cudaMallocManaged(&ranges[i], bytes));
      fill_bytes(ranges[i], bytes, 3, s);
    }
    CUDA_CHECK(cudaStreamSynchronize(s));
  }
  ~LiveSet() {
    for (void* p : ranges) CUDA_CHECK(cudaFree(p));
    CUDA_CHECK(cudaFree(weights));
  }
  LiveSet(const LiveSet&) = delete;
  LiveSet& operator=(const LiveSet&) = delete;
};

}  // namespace

void bench_alloc_calls(Csv& csv, const Options& o) {
  BenchStream bs(o.device);
  cudaStream_t s = bs.stream;
  const LiveSet live(o, s);

  const std::vector<size_t> cycle = {16, 256, 4096, 16384, 65536, 262144};
  const int depth = 4;
  const int calls = o.quick ? 120 : 3000;
  const int warmup = 60;
  std::vector<std::vector<double>> alloc_s(cycle.size()), free_s(cycle.size());
  std::vector<double> all_alloc, all_free;
  std::deque<std::pair<void*, size_t>> in_flight;  // {range, index into cycle}
  for (int i = 0; i < warmup + calls; ++i) {
    const size_t k = size_t(i) % cycle.size();
    void* p = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    CUDA_CHECK(cudaMallocManaged(&p, cycle[k]));
    const double a = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fill_bytes(p, cycle[k], 5, s);
    in_flight.emplace_back(p, k);
    if (i >= warmup) {
      alloc_s[k].push_back(a);
      all_alloc.push_back(a);
    }
    if (in_flight.size() > size_t(depth)) {
      const auto [old, ok] = in_flight.front();
      in_flight.pop_front();
      CUDA_CHECK(cudaStreamSynchronize(s));
      const auto t1 = std::chrono::steady_clock::now();
      CUDA_CHECK(cudaFree(old));
      const double f = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
      if (i >= warmup) {
        free_s[ok].push_back(f);
        all_free.push_back(f);
      }
    }
  }
  CUDA_CHECK(cudaStreamSynchronize(s));
  for (const auto& [p, k] : in_flight) CUDA_CHECK(cudaFree(p));
  for (size_t k = 0; k < cycle.size(); ++k) {
    const std::string sz = cycle[k] < 1024 ? std::to_string(cycle[k]) + "B" : size_name(double(cycle[k]));
    if (!alloc_s[k].empty()) csv.add({"um_alloc_call_live", "malloc_managed_" + sz, 1, "calls", alloc_s[k]});
    if (!free_s[k].empty()) csv.add({"um_free_call_live", "free_gpu_written_" + sz, 1, "calls", free_s[k]});
  }
  csv.add({"um_alloc_call_live", "malloc_managed_all", 1, "calls", all_alloc});
  csv.add({"um_free_call_live", "free_gpu_written_all", 1, "calls", all_free});
}

// A per-tensor allocator's activation under each of seed 000's advice, start to end (session 31): beside the same live
// set as bench_alloc_calls, per allocation: cudaMallocManaged of the next size of the cycle, the advice the seed's
// allocator gives every allocation (experiments/validate/managed_allocator.cu apply_advice: PreferredLocation=CPU
// first, then AccessedBy or ReadMostly), a kernel writing the range (the op making it), a kernel reading it (the
// op using it), and cudaFree of the range allocated `depth` calls before once the stream has drained. Rows
// um_advised_cycle,<none|prefer_cpu|prefer_cpu_accessed_by|prefer_cpu_read_mostly>_<size|all>: host seconds per
// allocation, the whole cycle; a variant less `none` is what that advice adds to each activation of a step (its
// calls, and the faults and remote accesses of the two kernels). Mode 3's decode ran 0.13-0.19 s a token slower
// than its weights' faults explain (results/validation/um-oversubscription): ~80 us over ~2000 allocations.
//
// um_advised_cycle_pressed (the same names; bench_advised_cycle_pressed): the same cycles with the GPU full of
// managed memory that is being evicted, as past VRAM: a balloon leaves --oversubscribe-leave GiB, a managed buffer of
// 1.5 times that (CPU-written, no advice) is there to fault, and before each cycle a kernel reads its next 2 MiB
// block (a fault that evicts, untimed), so that the cycle's own pages are found as a decode past VRAM finds them.
// Profiled in a decode (results/validation/um-oversubscription/diagnosis-s32) mode 3's advice on the activations cost
// 70-90 us each past VRAM, 2-4x the cycle beside a GPU with room.
namespace {

void advised_cycles(Csv& csv, const Options& o, const char* benchmark, BenchStream& bs, const std::byte* pressure,
                    size_t pressure_bytes) {
  cudaStream_t s = bs.stream;
  const int blocks = bs.sms * 8;
  cudaMemLocation cpu = host_loc(), gpu = device_loc(o.device);
  const std::vector<size_t> cycle = {16, 256, 4096, 16384, 65536, 262144};
  const int depth = 4, calls = o.quick ? 120 : 2400, warmup = 60;
  const size_t block = size_t(2) << 20;
  size_t next_block = 0;
  for (const std::string advice : {"none", "prefer_cpu", "prefer_cpu_accessed_by", "prefer_cpu_read_mostly"}) {
    std::vector<std::vector<double>> per_size(cycle.size());
    std::vector<double> all;
    std::deque<void*> in_flight;
    for (int i = 0; i < warmup + calls; ++i) {
      if (pressure) {  // the next block of the buffer faults in, evicting (untimed)
        stream_read(pressure + next_block * block, block, bs.sink, s, blocks);
        next_block = (next_block + 1) % (pressure_bytes / block);
        CUDA_CHECK(cudaStreamSynchronize(s));
      }
      const size_t k = size_t(i) % cycle.size();
      void* p = nullptr;
      const auto t0 = std::chrono::steady_clock::now();
      CUDA_CHECK(cudaMallocManaged(&p, cycle[k]));
      if (advice != "none") CUDA_CHECK(cudaMemAdvise(p, cycle[k], cudaMemAdviseSetPreferredLocation, cpu));
      if (advice == "prefer_cpu_accessed_by") CUDA_CHECK(cudaMemAdvise(p, cycle[k], cudaMemAdviseSetAccessedBy, gpu));
      if (advice == "prefer_cpu_read_mostly") CUDA_CHECK(cudaMemAdvise(p, cycle[k], cudaMemAdviseSetReadMostly, gpu));
      fill_bytes(p, cycle[k], 5, s);
      stream_read(p, cycle[k], bs.sink, s, blocks);
      in_flight.push_back(p);
      CUDA_CHECK(cudaStreamSynchronize(s));
      if (in_flight.size() > size_t(depth)) {
        CUDA_CHECK(cudaFree(in_flight.front()));
        in_flight.pop_front();
      }
      const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (i >= warmup) {
        per_size[k].push_back(t);
        all.push_back(t);
      }
    }
    CUDA_CHECK(cudaStreamSynchronize(s));
    for (void* p : in_flight) CUDA_CHECK(cudaFree(p));
    for (size_t k = 0; k < cycle.size(); ++k) {
      const std::string sz = cycle[k] < 1024 ? std::to_string(cycle[k]) + "B" : size_name(double(cycle[k]));
      csv.add({benchmark, advice + "_" + sz, 1, "calls", per_size[k]});
    }
    csv.add({benchmark, advice + "_all", 1, "calls", all});
  }
}

}  // namespace

void bench_advised_cycle(Csv& csv, const Options& o) {
  BenchStream bs(o.device);
  const LiveSet live(o, bs.stream);
  advised_cycles(csv, o, "um_advised_cycle", bs, nullptr, 0);
}

void bench_advised_cycle_pressed(Csv& csv, const Options& o) {
  const double host = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  size_t free_b = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total));
  const size_t leave = size_t(o.oversubscribe_leave * double(1ull << 30));
  const size_t block = size_t(2) << 20;
  const size_t pressure_bytes = size_t(1.5 * double(leave)) / block * block;
  if (leave >= free_b || double(pressure_bytes) > 0.6 * host || pressure_bytes < 4 * block) {
    csv.comment("advised_cycle_pressed", "not measured: --oversubscribe-leave is not below the free GPU memory, or "
                                         "1.5x it would pass 60% of host memory, or it is under 6 MiB");
    return;
  }
  size_t want = 0;
  void* balloon = balloon_leaving(free_b, leave, &want);  // all free memory but `leave`
  if (!balloon) {
    csv.comment("advised_cycle_pressed", "not measured: the balloon could not be allocated");
    return;
  }
  {
    BenchStream bs(o.device);
    const LiveSet live(o, bs.stream);
    void* pressure = nullptr;
    CUDA_CHECK(cudaMallocManaged(&pressure, pressure_bytes));
    std::memset(pressure, 7, pressure_bytes);  // CPU-written: host-resident until the GPU reads it
    size_t left = 0;
    CUDA_CHECK(cudaMemGetInfo(&left, &total));
    csv.comment("advised_cycle_pressed_balloon_bytes", std::to_string(want));
    csv.comment("advised_cycle_pressed_gpu_left_bytes", std::to_string(left));
    csv.comment("advised_cycle_pressed_buffer_bytes", std::to_string(pressure_bytes));
    // Fill the GPU: one pass over the buffer (1.5x what is left) leaves it full, evicting in order.
    stream_read(pressure, pressure_bytes, bs.sink, bs.stream, bs.sms * 8);
    CUDA_CHECK(cudaStreamSynchronize(bs.stream));
    advised_cycles(csv, o, "um_advised_cycle_pressed", bs, static_cast<const std::byte*>(pressure), pressure_bytes);
    CUDA_CHECK(cudaFree(pressure));
  }
  CUDA_CHECK(cudaFree(balloon));
}

}  // namespace calib
