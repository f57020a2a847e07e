// Peer links between GPUs (NVLink or PCIe P2P): copy bandwidth over sizes from cuda:1 to cuda:0.
#include "measure.hpp"

namespace calib {

void bench_peer(Csv& csv, const Options& o) {
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  if (count < 2) {
    csv.comment("peer", "not measured: " + std::to_string(count) + " GPU visible");
    std::printf("  peer: skipped, %d GPU visible\n", count);
    return;
  }
  const int src = o.device == 0 ? 1 : 0;
  int can = 0;
  CUDA_CHECK(cudaDeviceCanAccessPeer(&can, o.device, src));
  csv.comment("peer_access", std::to_string(src) + "->" + std::to_string(o.device) + (can ? " enabled" : " not possible (copies staged through the host)"));
  if (can) {
    const cudaError_t e = cudaDeviceEnablePeerAccess(src, 0);
    if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) CUDA_CHECK(e);
    (void)cudaGetLastError();  // clear "already enabled"
  }
  const size_t max_bytes = o.quick ? (64ull << 20) : (1ull << 30);
  void *dst_buf = nullptr, *src_buf = nullptr;
  CUDA_CHECK(cudaMalloc(&dst_buf, max_bytes));
  CUDA_CHECK(cudaSetDevice(src));
  CUDA_CHECK(cudaMalloc(&src_buf, max_bytes));
  CUDA_CHECK(cudaSetDevice(o.device));
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (size_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
    csv.add({"peer", "to_cuda" + std::to_string(o.device) + "_" + size_name(double(bytes)), double(bytes), "bytes",
             time_device(s, 3, repeats_for(double(bytes)), [&] {
               CUDA_CHECK(cudaMemcpyPeerAsync(dst_buf, o.device, src_buf, src, bytes, s));
             })});
  }
  CUDA_CHECK(cudaStreamDestroy(s));
  CUDA_CHECK(cudaFree(dst_buf));
  CUDA_CHECK(cudaSetDevice(src));
  CUDA_CHECK(cudaFree(src_buf));
  CUDA_CHECK(cudaSetDevice(o.device));
}

}  // namespace calib
