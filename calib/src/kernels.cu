#include <cuda_bf16.h>

#include "measure.hpp"

namespace calib {
namespace {

__device__ unsigned hash32(unsigned x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

__global__ void fill_bf16_kernel(__nv_bfloat16* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float v = (hash32(static_cast<unsigned>(i) ^ seed) & 0xffff) / 32768.0f - 1.0f;  // [-1, 1)
    p[i] = __float2bfloat16(v * 0.05f);
  }
}

__global__ void fill_bytes_kernel(unsigned* p, size_t words, unsigned seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x)
    p[i] = hash32(static_cast<unsigned>(i) ^ seed);
}

__global__ void stream_read_kernel(const uint4* p, size_t n, unsigned long long* sink) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) atomicAdd(sink, 1ull);  // keeps the loads; practically never taken
}

__global__ void sparse_touch_kernel(const unsigned* p, size_t n_touch, size_t stride_words, unsigned long long* sink) {
  const size_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n_touch) {
    const unsigned v = p[i * stride_words];
    if (v == 0x9e3779b9u) atomicAdd(sink, 1ull);
  }
}

// One thread touching one word per stride, each access waiting for the previous: isolated faults.
__global__ void serial_touch_kernel(const unsigned* p, size_t n_touch, size_t stride_words, unsigned long long* sink) {
  unsigned acc = 0;
  for (size_t i = 0; i < n_touch; ++i) acc += p[i * stride_words + (acc & 1)];
  if (acc == 0x9e3779b9u) atomicAdd(sink, 1ull);
}

__global__ void empty() {}

}  // namespace

void fill_random_bf16(void* p, size_t count, unsigned seed, cudaStream_t s) {
  fill_bf16_kernel<<<1024, 256, 0, s>>>(static_cast<__nv_bfloat16*>(p), count, seed);
  LAUNCH_CHECK();
}

void* managed_on_host_bf16(size_t bytes, unsigned seed, int device, cudaStream_t s) {
  void* p = nullptr;
  CUDA_CHECK(cudaMallocManaged(&p, bytes));
  fill_random_bf16(p, bytes / 2, seed, s);
  CUDA_CHECK(cudaMemAdvise(p, bytes, cudaMemAdviseSetPreferredLocation, host_loc()));
  CUDA_CHECK(cudaMemAdvise(p, bytes, cudaMemAdviseSetAccessedBy, device_loc(device)));
  CUDA_CHECK(cudaMemPrefetchAsync(p, bytes, host_loc(), 0, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  return p;
}

void fill_bytes(void* p, size_t bytes, unsigned seed, cudaStream_t s) {
  fill_bytes_kernel<<<1024, 256, 0, s>>>(static_cast<unsigned*>(p), bytes / 4, seed);
  LAUNCH_CHECK();
}

void* balloon_leaving(size_t free_bytes, size_t leave, size_t* bytes) {
  void* balloon = nullptr;
  size_t want = free_bytes > leave ? free_bytes - leave : 0;
  while (want > (64ull << 20) && cudaMalloc(&balloon, want) != cudaSuccess) {
    (void)cudaGetLastError();
    balloon = nullptr;
    want -= 64ull << 20;
  }
  *bytes = balloon ? want : 0;
  return balloon;
}

void stream_read(const void* p, size_t bytes, unsigned long long* sink, cudaStream_t s, int blocks) {
  stream_read_kernel<<<blocks, 512, 0, s>>>(static_cast<const uint4*>(p), bytes / 16, sink);
  LAUNCH_CHECK();
}

void sparse_touch(const void* p, size_t bytes, size_t stride, unsigned long long* sink, cudaStream_t s) {
  const size_t n = bytes / stride;
  sparse_touch_kernel<<<static_cast<unsigned>((n + 127) / 128), 128, 0, s>>>(static_cast<const unsigned*>(p), n,
                                                                            stride / 4, sink);
  LAUNCH_CHECK();
}

void serial_touch(const void* p, size_t bytes, size_t stride, unsigned long long* sink, cudaStream_t s) {
  serial_touch_kernel<<<1, 1, 0, s>>>(static_cast<const unsigned*>(p), bytes / stride, stride / 4, sink);
  LAUNCH_CHECK();
}

void empty_kernel(cudaStream_t s) {
  empty<<<1, 32, 0, s>>>();
  LAUNCH_CHECK();
}

}  // namespace calib
