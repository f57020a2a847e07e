// What a GPU's first read of PreferredLocation=CPU managed memory costs, by how the memory got its contents
// (a diagnosis for the managed-memory model's mapping_fault_cost; not a validation row). tiersim_calib's
// fresh_first_read (CPU-written, then read by the GPU) costs ~1.2 s per GiB on the H100, yet the validation
// harness's prefer-cpu runs (weights initialised by GPU kernels, then prefetched to host memory) read theirs at
// about the speed of AccessedBy's mapped reads. One 1 GiB range per repetition (checked against free GPU
// memory), three repetitions per variant; the first and a second full read timed with events:
//   cpu-written        cudaMallocManaged, advise PreferredLocation=CPU, memset on the CPU
//   gpu-init-prefetch  advise CPU at allocation, a GPU kernel writes it, cudaMemPrefetchAsync to the CPU (the
//                      harness's order: decode_latency.py with managed_allocator.cu, random init on the GPU)
//   gpu-init-advise    a GPU kernel writes it (no advice), prefetch to the CPU, then advise CPU
//   gpu-init-cpu-touch as gpu-init-prefetch, then the CPU writes every page
//   cpu-written-accessed-by  as cpu-written plus AccessedBy=GPU
//   h2d-copy-pageable  advise CPU, then cudaMemcpy from a pageable host buffer into it (what tensor.copy_(cpu_tensor)
//                      does when a checkpoint is loaded into a managed CUDA tensor)
//   h2d-copy-pinned    the same from pinned host memory
// One JSON line per variant on stdout.
//   nvcc -O2 -o managed_first_read experiments/validate/managed_first_read.cu && ./managed_first_read
#include <cuda_runtime.h>
#include "../../calib/src/cuda_check.hpp"  // CUDA_CHECK: name the call, file and line, then stop
#include "device_common.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

__global__ void write_range(float* p, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] = 1.0f;
}

__global__ void read_range(const float4* p, size_t n, float* sink) {
  float acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float4 v = p[i];
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == 12345.678f) *sink = acc;  // keeps the loads
}

int main() {
  const int dev = 0;
  CUDA_CHECK(cudaSetDevice(dev));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  const size_t bytes = 1ull << 30;
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  if (free_b < 4 * bytes) {
    std::fprintf(stderr, "managed_first_read: %zu bytes free, want 4 GiB of headroom\n", free_b);
    return 1;
  }
  float* sink = nullptr;
  CUDA_CHECK(cudaMalloc(&sink, sizeof(float)));
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreate(&s));
  cudaEvent_t a, b, c;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  CUDA_CHECK(cudaEventCreate(&c));
  const int grid = prop.multiProcessorCount * 8, block = 256;
  const std::vector<std::string> variants = {"cpu-written", "gpu-init-prefetch", "gpu-init-advise", "gpu-init-cpu-touch",
                                             "cpu-written-accessed-by", "h2d-copy-pageable", "h2d-copy-pinned"};
  char* pageable = static_cast<char*>(std::malloc(bytes));
  if (!pageable) {
    std::fprintf(stderr, "managed_first_read: no host memory\n");
    return 1;
  }
  std::memset(pageable, 0x44, bytes);
  char* pinned = nullptr;
  CUDA_CHECK(cudaMallocHost(&pinned, bytes));
  std::memset(pinned, 0x44, bytes);
  for (const std::string& v : variants) {
    std::vector<double> first, second;
    for (int rep = 0; rep < 3; ++rep) {
      char* p = nullptr;
      CUDA_CHECK(cudaMallocManaged(&p, bytes));
      const bool gpu_init = v.rfind("gpu-init", 0) == 0;
      if (v != "gpu-init-advise")
        CUDA_CHECK(cudaMemAdvise(p, bytes, cudaMemAdviseSetPreferredLocation, device_common::host_location()));
      if (v.rfind("h2d-copy", 0) == 0) {
        CUDA_CHECK(cudaMemcpy(p, v == "h2d-copy-pinned" ? pinned : pageable, bytes, cudaMemcpyHostToDevice));
      } else if (gpu_init) {
        write_range<<<grid, block, 0, s>>>(reinterpret_cast<float*>(p), bytes / sizeof(float));
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaMemPrefetchAsync(p, bytes, device_common::host_location(), 0, s));
        CUDA_CHECK(cudaStreamSynchronize(s));
        if (v == "gpu-init-advise")
          CUDA_CHECK(cudaMemAdvise(p, bytes, cudaMemAdviseSetPreferredLocation, device_common::host_location()));
        if (v == "gpu-init-cpu-touch") std::memset(p, 0x33, bytes);
      } else {
        std::memset(p, 0x33, bytes);
      }
      if (v == "cpu-written-accessed-by")
        CUDA_CHECK(cudaMemAdvise(p, bytes, cudaMemAdviseSetAccessedBy, device_common::device_location(dev)));
      CUDA_CHECK(cudaEventRecord(a, s));
      read_range<<<grid, block, 0, s>>>(reinterpret_cast<const float4*>(p), bytes / sizeof(float4), sink);
      CUDA_CHECK(cudaGetLastError());
      CUDA_CHECK(cudaEventRecord(b, s));
      read_range<<<grid, block, 0, s>>>(reinterpret_cast<const float4*>(p), bytes / sizeof(float4), sink);
      CUDA_CHECK(cudaGetLastError());
      CUDA_CHECK(cudaEventRecord(c, s));
      CUDA_CHECK(cudaEventSynchronize(c));
      float ms1 = 0, ms2 = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms1, a, b));
      CUDA_CHECK(cudaEventElapsedTime(&ms2, b, c));
      first.push_back(ms1 / 1e3);
      second.push_back(ms2 / 1e3);
      CUDA_CHECK(cudaFree(p));
    }
    std::printf("{\"variant\": \"%s\", \"bytes\": %zu, \"gpu\": \"%s\", \"first_read_s\": [%.6f, %.6f, %.6f], "
                "\"second_read_s\": [%.6f, %.6f, %.6f]}\n",
                v.c_str(), bytes, prop.name, first[0], first[1], first[2], second[0], second[1], second[2]);
    std::fflush(stdout);
  }
  CUDA_CHECK(cudaFree(sink));
  CUDA_CHECK(cudaFreeHost(pinned));
  std::free(pageable);
  return 0;
}
