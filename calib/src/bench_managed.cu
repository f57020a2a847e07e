// Managed (unified) memory, always within free GPU memory (never oversubscribed: that can hang a
// shared GPU; oversubscription is simulated from these undersubscribed costs). Measures first-touch
// migration, isolated and batched fault cost, explicit prefetch both ways, and each cudaMemAdvise mode
// (CUDA 13 signatures, taking a cudaMemLocation).
#include <cstring>

#include "measure.hpp"

namespace calib {
namespace {

// `timed` after `setup`, `reps` times; for measurements whose first run changes the state.
std::vector<double> with_setup(cudaStream_t s, int reps, const std::function<void()>& setup,
                               const std::function<void()>& timed) {
  std::vector<double> out;
  for (int i = 0; i < reps; ++i) {
    setup();
    CUDA_CHECK(cudaDeviceSynchronize());
    const auto t = time_device(s, 0, 1, timed);
    out.push_back(t[0]);
  }
  return out;
}

}  // namespace

void bench_managed(Csv& csv, const Options& o) {
  int concurrent = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, o.device));
  if (!concurrent) {
    csv.comment("managed", "not measured: the device has no concurrent managed access (no GPU page faults)");
    return;
  }
  size_t free_bytes = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  size_t bytes = o.quick ? (128ull << 20) : (1ull << 30);
  // Safety: at most a quarter of what is free now.
  while (bytes > free_bytes / 4) bytes /= 2;
  if (bytes < (64ull << 20)) {
    csv.comment("managed", "not measured: too little free GPU memory");
    return;
  }
  csv.comment("managed_buffer_bytes", std::to_string(bytes) + " (free GPU memory " + std::to_string(free_bytes) + ")");

  BenchStream bs(o.device);
  cudaStream_t s = bs.stream;
  unsigned long long* sink = bs.sink;
  const int sms = bs.sms;
  char* um = nullptr;
  CUDA_CHECK(cudaMallocManaged(&um, bytes));
  const std::string sz = size_name(double(bytes));
  auto on_host = [&] {
    // Writing every page on the CPU makes the CPU the only valid copy.
    std::memset(um, 0x33, bytes);
  };
  auto read_all = [&] { stream_read(um, bytes, sink, s, sms * 8); };
  const size_t block = 2ull << 20;

  csv.add({"um_first_touch", "gpu_read_of_cpu_pages_" + sz, double(bytes), "bytes", with_setup(s, 3, on_host, read_all)});
  csv.add({"um_fault", "batched_one_touch_per_2MiB_" + sz, double(bytes / block), "faults",
           with_setup(s, 3, on_host, [&] { sparse_touch(um, bytes, block, sink, s); })});
  const size_t serial_bytes = std::min<size_t>(bytes, 128 * block);
  csv.add({"um_fault", "serial_one_touch_per_2MiB_x" + std::to_string(serial_bytes / block), double(serial_bytes / block),
           "faults", with_setup(s, 3, on_host, [&] { serial_touch(um, serial_bytes, block, sink, s); })});
  csv.add({"um_fault", "batched_one_touch_per_64KiB_" + sz, double(bytes / (64 << 10)), "faults",
           with_setup(s, 3, on_host, [&] { sparse_touch(um, bytes, 64 << 10, sink, s); })});

  csv.add({"um_prefetch", "to_gpu_" + sz, double(bytes), "bytes",
           with_setup(s, 3, on_host, [&] { CUDA_CHECK(cudaMemPrefetchAsync(um, bytes, device_loc(o.device), 0, s)); })});
  auto on_gpu = [&] {
    on_host();
    CUDA_CHECK(cudaMemPrefetchAsync(um, bytes, device_loc(o.device), 0, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
  };
  csv.add({"um_prefetch", "to_cpu_" + sz, double(bytes), "bytes",
           with_setup(s, 3, on_gpu, [&] { CUDA_CHECK(cudaMemPrefetchAsync(um, bytes, host_loc(), 0, s)); })});
  csv.add({"um_resident", "gpu_read_after_prefetch_" + sz, double(bytes), "bytes", with_setup(s, 3, on_gpu, read_all)});

  // PreferredLocation = CPU: first read establishes mappings, later reads cross the link every time.
  // A round trip through the GPU invalidates the GPU's mappings, so every repetition of the first read
  // is cold (CPU writes alone leave them in place: only the first repetition would pay).
  CUDA_CHECK(cudaMemAdvise(um, bytes, cudaMemAdviseSetPreferredLocation, host_loc()));
  auto unmapped = [&] {
    CUDA_CHECK(cudaMemPrefetchAsync(um, bytes, device_loc(o.device), 0, s));
    CUDA_CHECK(cudaMemPrefetchAsync(um, bytes, host_loc(), 0, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    on_host();
  };
  csv.add({"um_preferred_cpu", "first_read_" + sz, double(bytes), "bytes", with_setup(s, 3, unmapped, read_all)});
  // The same first read of memory the GPU has never held: a fresh allocation each repetition, written on the CPU
  // (weights loaded into host memory). The row above, after a round trip through the GPU, costs far more per block
  // (H100: 2.25 ms against a framework's load-then-read at a few us; results/validation/moe-um), so it is not
  // what a model's weights pay; profile_fit prefers this row.
  char* fresh = nullptr;
  auto fresh_on_host = [&] {
    if (fresh) CUDA_CHECK(cudaFree(fresh));
    CUDA_CHECK(cudaMallocManaged(&fresh, bytes));
    CUDA_CHECK(cudaMemAdvise(fresh, bytes, cudaMemAdviseSetPreferredLocation, host_loc()));
    std::memset(fresh, 0x33, bytes);
  };
  csv.add({"um_preferred_cpu", "fresh_first_read_" + sz, double(bytes), "bytes",
           with_setup(s, 3, fresh_on_host, [&] { stream_read(fresh, bytes, sink, s, sms * 8); })});
  CUDA_CHECK(cudaStreamSynchronize(s));
  CUDA_CHECK(cudaFree(fresh));
  csv.add({"um_preferred_cpu", "second_read_" + sz, double(bytes), "bytes",
           with_setup(s, 3, [&] { on_host(); CUDA_CHECK(cudaStreamSynchronize(s)); read_all(); }, read_all)});
  // + AccessedBy = GPU: mapped from the start, no mapping faults.
  CUDA_CHECK(cudaMemAdvise(um, bytes, cudaMemAdviseSetAccessedBy, device_loc(o.device)));
  csv.add({"um_accessed_by", "first_read_" + sz, double(bytes), "bytes", with_setup(s, 3, on_host, read_all)});
  csv.add({"um_accessed_by", "second_read_" + sz, double(bytes), "bytes",
           with_setup(s, 3, [&] { on_host(); CUDA_CHECK(cudaStreamSynchronize(s)); read_all(); }, read_all)});
  CUDA_CHECK(cudaMemAdvise(um, bytes, cudaMemAdviseUnsetAccessedBy, device_loc(o.device)));
  CUDA_CHECK(cudaMemAdvise(um, bytes, cudaMemAdviseUnsetPreferredLocation, host_loc()));

  // ReadMostly: a GPU read makes a read-only duplicate; a CPU write invalidates it.
  CUDA_CHECK(cudaMemAdvise(um, bytes, cudaMemAdviseSetReadMostly, device_loc(o.device)));
  csv.add({"um_read_mostly", "first_read_duplicates_" + sz, double(bytes), "bytes", with_setup(s, 3, on_host, read_all)});
  csv.add({"um_read_mostly", "second_read_local_" + sz, double(bytes), "bytes",
           with_setup(s, 3, [&] { on_host(); CUDA_CHECK(cudaStreamSynchronize(s)); read_all(); }, read_all)});
  CUDA_CHECK(cudaMemAdvise(um, bytes, cudaMemAdviseUnsetReadMostly, device_loc(o.device)));

  CUDA_CHECK(cudaStreamSynchronize(s));
  CUDA_CHECK(cudaFree(um));

  // The calls a per-tensor managed allocator makes for every tensor, host time with the device idle:
  // cudaMallocManaged, and cudaFree of a range the GPU has written (its pages resident there).
  for (size_t call_bytes : {size_t(64) << 10, size_t(16) << 20}) {
    const std::string csz = size_name(double(call_bytes));
    std::vector<double> alloc_s, free_s;
    for (int i = 0; i < (o.quick ? 20 : 200); ++i) {
      void* p = nullptr;
      const auto t0 = std::chrono::steady_clock::now();
      CUDA_CHECK(cudaMallocManaged(&p, call_bytes));
      alloc_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      CUDA_CHECK(cudaMemsetAsync(p, 0x11, call_bytes, s));
      CUDA_CHECK(cudaStreamSynchronize(s));
      const auto t1 = std::chrono::steady_clock::now();
      CUDA_CHECK(cudaFree(p));
      free_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count());
    }
    csv.add({"um_alloc_call", "malloc_managed_" + csz, 1, "calls", alloc_s});
    csv.add({"um_free_call", "free_gpu_written_" + csz, 1, "calls", free_s});
  }
}

}  // namespace calib
