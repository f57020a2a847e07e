// How long a cuBLAS bf16 GEMV (y = W x, W in device memory) takes when its input vector x lives in host
// memory read over the link: managed memory with PreferredLocation=CPU (populated on the host; with and
// without AccessedBy=GPU), mapped pinned memory, against x in device memory. A GEMV's thread blocks
// each read x; from host memory, uncached, every block crosses the link. Microbenchmark for the
// managed-memory model (seed 000's allocator advises activations too); not a validation row.
//   nvcc -O2 -o remote_gemv experiments/validate/remote_gemv.cu -lcublas && ./remote_gemv > remote_gemv.jsonl
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include "../../calib/src/cuda_check.hpp"  // CUDA_CHECK, CUBLAS_CHECK: name the call, file and line, then stop
#include "device_common.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>



int main() {
  CUDA_CHECK(cudaSetDevice(0));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  const cudaMemLocation cpu = device_common::host_location();
  const cudaMemLocation gpu = device_common::device_location(0);
  struct Shape { int n, k; };
  const Shape shapes[] = {{4096, 4096}, {1024, 4096}, {12288, 4096}, {4096, 12288}, {151936, 4096}};
  const char* where_name[] = {"device", "managed-prefer-cpu", "managed-prefer-cpu+accessed-by", "pinned-mapped"};
  const float one = 1.0f, zero = 0.0f;
  for (const Shape s : shapes) {
    __nv_bfloat16 *w = nullptr, *y = nullptr;
    CUDA_CHECK(cudaMalloc(&w, size_t(s.n) * s.k * 2));
    CUDA_CHECK(cudaMalloc(&y, size_t(s.n) * 2));
    CUDA_CHECK(cudaMemset(w, 0, size_t(s.n) * s.k * 2));
    for (int where = 0; where < 4; ++where) {
      __nv_bfloat16* x = nullptr;
      const size_t xb = size_t(s.k) * 2;
      if (where == 0) {
        CUDA_CHECK(cudaMalloc(&x, xb));
        CUDA_CHECK(cudaMemset(x, 0, xb));
      } else if (where == 3) {
        CUDA_CHECK(cudaHostAlloc(&x, xb, cudaHostAllocMapped));
        std::fill(reinterpret_cast<char*>(x), reinterpret_cast<char*>(x) + xb, 0);
      } else {
        CUDA_CHECK(cudaMallocManaged(&x, xb));
        CUDA_CHECK(cudaMemAdvise(x, xb, cudaMemAdviseSetPreferredLocation, cpu));
        if (where == 2) CUDA_CHECK(cudaMemAdvise(x, xb, cudaMemAdviseSetAccessedBy, gpu));
        std::fill(reinterpret_cast<char*>(x), reinterpret_cast<char*>(x) + xb, 0);  // populated on the host
      }
      __nv_bfloat16* xd = x;
      if (where == 3) CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&xd), x, 0));
      std::vector<double> t;
      for (int r = 0; r < 60; ++r) {
        CUDA_CHECK(cudaEventRecord(a));
        CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, s.n, 1, s.k, &one, w, CUDA_R_16BF, s.k, xd, CUDA_R_16BF,
                                s.k, &zero, y, CUDA_R_16BF, s.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        CUDA_CHECK(cudaEventRecord(b));
        CUDA_CHECK(cudaEventSynchronize(b));
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
        if (r >= 10) t.push_back(ms * 1e3);
      }
      std::printf("{\"gpu\": \"%s\", \"n\": %d, \"k\": %d, \"x\": \"%s\", \"x_bytes\": %zu, \"gemv_us\": %.3f}\n", prop.name,
                  s.n, s.k, where_name[where], xb, device_common::upper_median(t));
      std::fflush(stdout);
      if (where == 3) CUDA_CHECK(cudaFreeHost(x));
      else CUDA_CHECK(cudaFree(x));
    }
    CUDA_CHECK(cudaFree(w));
    CUDA_CHECK(cudaFree(y));
  }
  CUBLAS_CHECK(cublasDestroy(h));
  return 0;
}
