// A PyTorch CUDAPluggableAllocator backed by cudaMallocManaged (as in the seeds' allocator): every
// tensor allocation calls cudaMallocManaged and every free calls cudaFree (no caching). The advice
// applied to new allocations is switched with tiersim_set_advice() (ctypes), so weights can carry a
// hint and later activations none. CUDA 13 cudaMemAdvise signature (a cudaMemLocation).
// Safety: it refuses (returns null, PyTorch raises OOM) any allocation that would take managed memory
// past 80% of the GPU memory free when it was first called: managed memory is never oversubscribed, unless
// tiersim_set_budget() raises the budget (oversubscription runs: tiersim_balloon() first shrinks the GPU with a
// plain cudaMalloc, and the budget is kept within 60% of host memory by the caller, decode_latency.py).
#include <cuda_runtime.h>
#include "device_common.hpp"

#include <chrono>
#include <cstdio>
#include <mutex>
#include <vector>
#include <sys/types.h>

namespace {
std::mutex g_lock;
// 0 none, 1 PreferredLocation=CPU, 2 PreferredLocation=CPU + AccessedBy=GPU, 3 ReadMostly,
// 4 PreferredLocation=CPU + ReadMostly (seed 000's mode 3: its modes are cumulative)
int g_advice = 0;
size_t g_budget = 0, g_in_use = 0;
void* g_balloon = nullptr;
size_t g_balloon_bytes = 0;
bool g_failed = false;
// The allocator's census (tiersim_census): calls, and host seconds inside cudaMallocManaged + advice and cudaFree.
size_t g_allocs = 0, g_frees = 0;
double g_alloc_seconds = 0, g_free_seconds = 0;
// The size log (tiersim_size_log): while on, every allocation's size (+) and every free's (-), in call order.
bool g_logging = false;
std::vector<long long> g_size_log;
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "managed_allocator: %s failed: %s\n", what, cudaGetErrorString(e));
    g_failed = true;
    return false;
  }
  return true;
}

// Applies one advice (g_advice's codes) to a managed range. False if a call failed (and says which).
bool apply_advice(void* p, size_t size, int advice, int device) {
  const cudaMemLocation cpu = device_common::host_location();
  const cudaMemLocation gpu = device_common::device_location(device);
  bool ok = true;
  if (advice == 1 || advice == 2 || advice == 4)
    ok = check(cudaMemAdvise(p, size, cudaMemAdviseSetPreferredLocation, cpu), "cudaMemAdvise(PreferredLocation=CPU)");
  if (ok && advice == 2) ok = check(cudaMemAdvise(p, size, cudaMemAdviseSetAccessedBy, gpu), "cudaMemAdvise(AccessedBy)");
  if (ok && (advice == 3 || advice == 4))
    ok = check(cudaMemAdvise(p, size, cudaMemAdviseSetReadMostly, gpu), "cudaMemAdvise(ReadMostly)");
  return ok;
}
}  // namespace

extern "C" {

void tiersim_set_advice(int advice) {
  std::lock_guard<std::mutex> l(g_lock);
  g_advice = advice;
}

size_t tiersim_in_use() { return g_in_use; }

// Raises the managed budget past the GPU's free memory (oversubscription). The caller keeps it within 60% of
// host memory. Returns the budget in force.
size_t tiersim_set_budget(size_t bytes) {
  std::lock_guard<std::mutex> l(g_lock);
  g_budget = bytes;
  return g_budget;
}

// The device-memory balloon: a plain cudaMalloc of all free GPU memory but `leave` bytes, outside PyTorch and
// before any managed allocation, so that a model a few GB larger than `leave` oversubscribes the GPU. Returns the
// free memory left (cudaMemGetInfo) or 0 on failure; called once.
size_t tiersim_balloon(size_t leave) {
  std::lock_guard<std::mutex> l(g_lock);
  if (g_balloon) return 0;
  size_t free_b = 0, total = 0;
  if (!check(cudaMemGetInfo(&free_b, &total), "cudaMemGetInfo")) return 0;
  if (free_b <= leave) return free_b;
  size_t want = free_b - leave;
  // A request of all but `leave` can fail by a little (the driver's own reserve): step down 64 MiB at a time.
  while (want > 0 && cudaMalloc(&g_balloon, want) != cudaSuccess) {
    cudaGetLastError();
    g_balloon = nullptr;
    want = want > (64ull << 20) ? want - (64ull << 20) : 0;
  }
  g_balloon_bytes = want;
  if (!check(cudaMemGetInfo(&free_b, &total), "cudaMemGetInfo")) return 0;
  return free_b;
}
size_t tiersim_balloon_bytes() { return g_balloon_bytes; }
int tiersim_failed() { return g_failed ? 1 : 0; }
// The census so far: allocations, frees, host seconds in cudaMallocManaged (with its advice) and in cudaFree.
void tiersim_census(size_t* allocs, size_t* frees, double* alloc_seconds, double* free_seconds) {
  std::lock_guard<std::mutex> l(g_lock);
  *allocs = g_allocs;
  *frees = g_frees;
  *alloc_seconds = g_alloc_seconds;
  *free_seconds = g_free_seconds;
}

// The size log: tiersim_size_log(1) clears it and starts it, tiersim_size_log(0) stops it; tiersim_size_log_read
// copies up to `cap` entries (allocation sizes +, frees -, in order) and returns how many it holds.
void tiersim_size_log(int on) {
  std::lock_guard<std::mutex> l(g_lock);
  if (on) g_size_log.clear();
  g_logging = on != 0;
}
size_t tiersim_size_log_read(long long* out, size_t cap) {
  std::lock_guard<std::mutex> l(g_lock);
  for (size_t i = 0; i < g_size_log.size() && i < cap; ++i) out[i] = g_size_log[i];
  return g_size_log.size();
}

void* tiersim_alloc(ssize_t size, int device, cudaStream_t) {
  std::lock_guard<std::mutex> l(g_lock);
  if (g_budget == 0) {
    size_t free_b = 0, total = 0;
    if (!check(cudaMemGetInfo(&free_b, &total), "cudaMemGetInfo")) return nullptr;
    g_budget = free_b / 10 * 8;
  }
  if (size <= 0) size = 1;
  if (g_in_use + size_t(size) > g_budget) {
    std::fprintf(stderr, "managed_allocator: refusing %zd bytes: would exceed the safety budget of %zu\n", size, g_budget);
    return nullptr;
  }
  void* p = nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  if (!check(cudaMallocManaged(&p, size_t(size), cudaMemAttachGlobal), "cudaMallocManaged")) return nullptr;
  apply_advice(p, size_t(size), g_advice, device);  // a failure is recorded (tiersim_failed)
  g_alloc_seconds += seconds_since(t0);
  ++g_allocs;
  if (g_logging) g_size_log.push_back(static_cast<long long>(size));
  g_in_use += size_t(size);
  return p;
}

void tiersim_free(void* p, ssize_t size, int, cudaStream_t) {
  std::lock_guard<std::mutex> l(g_lock);
  const auto t0 = std::chrono::steady_clock::now();
  check(cudaFree(p), "cudaFree");
  g_free_seconds += seconds_since(t0);
  ++g_frees;
  if (g_logging) g_size_log.push_back(-static_cast<long long>(size > 0 ? size : 1));
  g_in_use -= size_t(size > 0 ? size : 1);
}

// Advice for an existing managed range (see apply_advice): for advice given after the weights are
// loaded rather than at allocation.
int tiersim_advise(void* p, size_t size, int advice, int device) { return apply_advice(p, size, advice, device) ? 0 : 1; }

// Moves a managed range to host memory, as if freshly loaded from a checkpoint.
int tiersim_prefetch_to_host(void* p, size_t size) {
  if (!check(cudaMemPrefetchAsync(p, size, device_common::host_location(), 0, 0), "cudaMemPrefetchAsync")) return 1;
  return check(cudaDeviceSynchronize(), "cudaDeviceSynchronize") ? 0 : 1;
}

}  // extern "C"
