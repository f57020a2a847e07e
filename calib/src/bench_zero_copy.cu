// Zero-copy: kernels reading host memory directly over the link (what PreferredLocation=CPU managed
// memory and mapped pinned memory do). A streaming read at several host footprints, and cuBLAS GEMV
// with its weights in mapped host memory: the access pattern decode really has. And cuBLAS GEMV with
// its weights in device memory but its *input vector* in mapped host memory (an activation advised to
// the CPU, as seed 000's allocator advises every allocation): uncached over the link, the vector is
// read again for every output row, so the work is counted as the weight's bytes (experiments/validate/
// remote_gemv.cu: managed PreferredLocation=CPU input within 3% of mapped pinned).
#include <cuda_bf16.h>

#include "measure.hpp"

namespace calib {

void bench_zero_copy(Csv& csv, const Options& o) {
  BenchStream bs(o.device);
  cudaStream_t s = bs.stream;
  unsigned long long* sink = bs.sink;
  const int sms = bs.sms;

  // Streaming read of the whole footprint: large pinned footprints can lower link read bandwidth.
  const std::vector<size_t> footprints =
      o.quick ? std::vector<size_t>{256ull << 20} : std::vector<size_t>{1ull << 30, 4ull << 30, 16ull << 30};
  for (size_t bytes : footprints) {
    void* host = nullptr;
    CUDA_CHECK(cudaHostAlloc(&host, bytes, cudaHostAllocMapped));
    void* dptr = nullptr;
    CUDA_CHECK(cudaHostGetDevicePointer(&dptr, host, 0));
    fill_bytes(dptr, bytes, 3, s);
    csv.add({"zero_copy", "stream_read_footprint_" + size_name(double(bytes)), double(bytes), "bytes",
             time_device(s, 1, 3, [&] { stream_read(dptr, bytes, sink, s, sms * 8); })});
    CUDA_CHECK(cudaStreamSynchronize(s));
    CUDA_CHECK(cudaFreeHost(host));
  }

  // cuBLAS bf16 GEMV (M = 1) whose weight matrix lives in mapped host memory.
  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  CUBLAS_CHECK(cublasSetStream(h, s));
  const int shapes[][2] = {{5120, 5120}, {17408, 5120}, {5120, 17408}};
  for (const auto& shape : shapes) {
    const int out = shape[0], in = shape[1];
    void *w_host = nullptr, *w = nullptr, *x = nullptr, *y = nullptr;
    CUDA_CHECK(cudaHostAlloc(&w_host, size_t(out) * in * 2, cudaHostAllocMapped));
    CUDA_CHECK(cudaHostGetDevicePointer(&w, w_host, 0));
    CUDA_CHECK(cudaMalloc(&x, size_t(in) * 2));
    CUDA_CHECK(cudaMalloc(&y, size_t(out) * 2));
    fill_random_bf16(w, size_t(out) * in, 5, s);
    fill_random_bf16(x, size_t(in), 9, s);
    char variant[96];
    std::snprintf(variant, sizeof variant, "gemv_bf16_host_weights_out%d_in%d", out, in);
    csv.add({"zero_copy", variant, 2.0 * double(out) * in, "bytes",
             time_device(s, 2, 10, [&] { linear(h, out, 1, in, w, x, y, CUDA_R_16BF); })});
    CUDA_CHECK(cudaStreamSynchronize(s));
    CUDA_CHECK(cudaFreeHost(w_host));
    CUDA_CHECK(cudaFree(x));
    CUDA_CHECK(cudaFree(y));
  }
  for (const auto& shape : shapes) {
    const int out = shape[0], in = shape[1];
    void *x_host = nullptr, *w = nullptr, *x = nullptr, *y = nullptr;
    CUDA_CHECK(cudaMalloc(&w, size_t(out) * in * 2));
    CUDA_CHECK(cudaHostAlloc(&x_host, size_t(in) * 2, cudaHostAllocMapped));
    CUDA_CHECK(cudaHostGetDevicePointer(&x, x_host, 0));
    CUDA_CHECK(cudaMalloc(&y, size_t(out) * 2));
    fill_random_bf16(w, size_t(out) * in, 5, s);
    fill_random_bf16(x, size_t(in), 9, s);
    char variant[96];
    std::snprintf(variant, sizeof variant, "input_gemv_bf16_host_input_out%d_in%d", out, in);
    csv.add({"zero_copy", variant, 2.0 * double(out) * in, "bytes",
             time_device(s, 2, 10, [&] { linear(h, out, 1, in, w, x, y, CUDA_R_16BF); })});
    CUDA_CHECK(cudaStreamSynchronize(s));
    CUDA_CHECK(cudaFree(w));
    CUDA_CHECK(cudaFreeHost(x_host));
    CUDA_CHECK(cudaFree(y));
  }
  CUBLAS_CHECK(cublasDestroy(h));
}

}  // namespace calib
