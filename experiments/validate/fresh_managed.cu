// What the first GPU touch of a *fresh* cudaMallocManaged range costs, as the seeds' per-tensor
// allocator makes one for every tensor (every op's output): allocate, advise, launch a kernel that
// writes the whole range, time the kernel (events), then time the same kernel on the now-populated
// range; also the host time of cudaMallocManaged and of cudaFree. Per advice (none, PreferredLocation=CPU,
// PreferredLocation=CPU + AccessedBy=GPU) and size (8 KiB, 64 KiB, 2 MiB). Microbenchmark for the
// managed-memory model (not a validation row). Small allocations only, each freed at once; every CUDA
// call checked.
//   nvcc -O2 -o fresh_managed experiments/validate/fresh_managed.cu && ./fresh_managed > fresh_managed.jsonl
#include <cuda_runtime.h>
#include "../../calib/src/cuda_check.hpp"  // CUDA_CHECK, CUBLAS_CHECK: name the call, file and line, then stop
#include "device_common.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>


__global__ void write_range(float* p, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] = 1.0f;
}


int main() {
  int dev = 0;
  CUDA_CHECK(cudaSetDevice(dev));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  const cudaMemLocation cpu = device_common::host_location();
  const cudaMemLocation gpu = device_common::device_location(dev);
  const char* advice_name[] = {"none", "prefer-cpu", "prefer-cpu+accessed-by"};
  const size_t sizes[] = {8 << 10, 64 << 10, 2 << 20};
  const int repeats = 200;
  // Warm up the context and the kernel.
  float* w = nullptr;
  CUDA_CHECK(cudaMallocManaged(&w, 1 << 20));
  write_range<<<64, 256>>>(w, (1 << 20) / 4);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaFree(w));
  for (int adv = 0; adv < 3; ++adv) {
    for (size_t size : sizes) {
      std::vector<double> first, second, alloc_us, free_us;
      const size_t n = size / 4;
      const int blocks = int(std::min<size_t>(1024, (n + 255) / 256));
      for (int r = 0; r < repeats; ++r) {
        float* p = nullptr;
        auto t0 = std::chrono::steady_clock::now();
        CUDA_CHECK(cudaMallocManaged(&p, size));
        auto t1 = std::chrono::steady_clock::now();
        if (adv >= 1) CUDA_CHECK(cudaMemAdvise(p, size, cudaMemAdviseSetPreferredLocation, cpu));
        if (adv == 2) CUDA_CHECK(cudaMemAdvise(p, size, cudaMemAdviseSetAccessedBy, gpu));
        auto timed_write = [&] {  // microseconds of one kernel writing the whole range
          float ms = 0;
          CUDA_CHECK(cudaEventRecord(a));
          write_range<<<blocks, 256>>>(p, n);
          CUDA_CHECK(cudaGetLastError());
          CUDA_CHECK(cudaEventRecord(b));
          CUDA_CHECK(cudaEventSynchronize(b));
          CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
          return ms * 1e3;
        };
        first.push_back(timed_write());   // the fresh range's first touch
        second.push_back(timed_write());  // the same range, populated
        auto t2 = std::chrono::steady_clock::now();
        CUDA_CHECK(cudaFree(p));
        auto t3 = std::chrono::steady_clock::now();
        alloc_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        free_us.push_back(std::chrono::duration<double, std::micro>(t3 - t2).count());
      }
      const auto median = device_common::upper_median;
      std::printf(
          "{\"gpu\": \"%s\", \"advice\": \"%s\", \"bytes\": %zu, \"repeats\": %d, \"first_touch_kernel_us\": %.3f, "
          "\"populated_kernel_us\": %.3f, \"fresh_extra_us\": %.3f, \"cudaMallocManaged_us\": %.3f, \"cudaFree_us\": %.3f}\n",
          prop.name, advice_name[adv], size, repeats, median(first), median(second), median(first) - median(second),
          median(alloc_us), median(free_us));
      std::fflush(stdout);
    }
  }
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  return 0;
}
