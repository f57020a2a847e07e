// A PyTorch CUDAPluggableAllocator backed by cudaMallocManaged (as in the seeds' allocator): every
// tensor allocation calls cudaMallocManaged and every free calls cudaFree (no caching). The advice
// applied to new allocations is switched with tiersim_set_advice() (ctypes), so weights can carry a
// hint and later activations none. CUDA 13 cudaMemAdvise signature (a cudaMemLocation).
// Safety: it refuses (returns null, PyTorch raises OOM) any allocation that would take managed memory
// past 80% of the GPU memory free when it was first called: managed memory is never oversubscribed.
#include <cuda_runtime.h>
#include "device_common.hpp"

#include <cstdio>
#include <mutex>
#include <sys/types.h>

namespace {
std::mutex g_lock;
int g_advice = 0;  // 0 none, 1 PreferredLocation=CPU, 2 PreferredLocation=CPU + AccessedBy=GPU, 3 ReadMostly
size_t g_budget = 0, g_in_use = 0;
bool g_failed = false;

bool check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "managed_allocator: %s failed: %s\n", what, cudaGetErrorString(e));
    g_failed = true;
    return false;
  }
  return true;
}

// Applies one advice (0 none, 1 PreferredLocation=CPU, 2 PreferredLocation=CPU + AccessedBy=GPU,
// 3 ReadMostly) to a managed range. False if a call failed (and says which).
bool apply_advice(void* p, size_t size, int advice, int device) {
  const cudaMemLocation cpu = device_common::host_location();
  const cudaMemLocation gpu = device_common::device_location(device);
  bool ok = true;
  if (advice == 1 || advice == 2)
    ok = check(cudaMemAdvise(p, size, cudaMemAdviseSetPreferredLocation, cpu), "cudaMemAdvise(PreferredLocation=CPU)");
  if (ok && advice == 2) ok = check(cudaMemAdvise(p, size, cudaMemAdviseSetAccessedBy, gpu), "cudaMemAdvise(AccessedBy)");
  if (ok && advice == 3) ok = check(cudaMemAdvise(p, size, cudaMemAdviseSetReadMostly, gpu), "cudaMemAdvise(ReadMostly)");
  return ok;
}
}  // namespace

extern "C" {

void tiersim_set_advice(int advice) {
  std::lock_guard<std::mutex> l(g_lock);
  g_advice = advice;
}

size_t tiersim_in_use() { return g_in_use; }
int tiersim_failed() { return g_failed ? 1 : 0; }

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
  if (!check(cudaMallocManaged(&p, size_t(size), cudaMemAttachGlobal), "cudaMallocManaged")) return nullptr;
  apply_advice(p, size_t(size), g_advice, device);  // a failure is recorded (tiersim_failed)
  g_in_use += size_t(size);
  return p;
}

void tiersim_free(void* p, ssize_t size, int, cudaStream_t) {
  std::lock_guard<std::mutex> l(g_lock);
  check(cudaFree(p), "cudaFree");
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
