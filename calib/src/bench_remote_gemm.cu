// Matrix products whose weight is read over the link: cuBLAS bf16 GEMM (PyTorch's Linear) at M = 1 to 8192 token
// rows with the weight in device memory and in managed memory advised to stay on the CPU (PreferredLocation=CPU,
// AccessedBy=the GPU: what a per-tensor managed allocator's weights are after a prefetch to the host). A GEMM
// reads its weight once per tile of M rows, and a remote weight is not cached by the GPU (every re-read crosses
// the link): the managed rows' time over the M <= 64 rows' is how many times the weight crossed. Shapes:
// Qwen3-30B-A3B's experts (the fused gate_up and the down projection) and attention, Qwen3-8B's projections
// (4096 x 4096, the MLP's 12288 x 4096 both ways), a 5120 x 5120 square. The managed buffers are at most 100 MB
// (never near the GPU's free memory). `--quick`: three M values and the first two shapes.
#include <cuda_bf16.h>

#include "measure.hpp"

namespace calib {

void bench_remote_gemm(Csv& csv, const Options& o) {
  BenchStream bs(o.device);
  cudaStream_t s = bs.stream;
  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  CUBLAS_CHECK(cublasSetStream(h, s));
  const std::vector<std::pair<int, int>> shapes =  // {out, in}
      o.quick ? std::vector<std::pair<int, int>>{{1536, 2048}, {2048, 768}}
              : std::vector<std::pair<int, int>>{{1536, 2048}, {2048, 768}, {2048, 4096}, {4096, 4096},
                                                 {12288, 4096}, {4096, 12288}, {5120, 5120}};
  const std::vector<int> rows = o.quick ? std::vector<int>{1, 16, 128}
                                        : std::vector<int>{1, 4, 16, 32, 64, 96, 128, 192, 256, 384, 512, 1024, 2048, 4096, 8192};
  const char* kinds[] = {"device", "managed"};
  for (const auto& shape : shapes) {
    const int out = shape.first, in = shape.second;
    const size_t wbytes = size_t(out) * in * 2;
    const int max_m = rows.back();
    void *x = nullptr, *y = nullptr;
    CUDA_CHECK(cudaMalloc(&x, size_t(in) * max_m * 2));
    CUDA_CHECK(cudaMalloc(&y, size_t(out) * max_m * 2));
    fill_random_bf16(x, size_t(in) * max_m, 9, s);
    for (const char* kind : kinds) {
      void* w = nullptr;
      const std::string k = kind;
      if (k == "device") {
        CUDA_CHECK(cudaMalloc(&w, wbytes));
        fill_random_bf16(w, wbytes / 2, 5, s);
      } else {
        w = managed_on_host_bf16(wbytes, 5, o.device, s);  // written by the GPU, then advised and sent to the host
      }
      CUDA_CHECK(cudaStreamSynchronize(s));
      for (int m : rows) {
        char variant[96];
        std::snprintf(variant, sizeof variant, "gemm_bf16_%s_weights_m%d_out%d_in%d", kind, m, out, in);
        // The first repetitions map a managed weight's pages for the GPU: warm-up, not timed.
        csv.add({"remote_gemm", variant, double(wbytes), "bytes",
                 time_device(s, 3, o.quick ? 3 : m >= 1024 ? 5 : 10, [&] { linear(h, out, m, in, w, x, y, CUDA_R_16BF); })});
      }
      CUDA_CHECK(cudaStreamSynchronize(s));
      CUDA_CHECK(cudaFree(w));
    }
    CUDA_CHECK(cudaFree(x));
    CUDA_CHECK(cudaFree(y));
  }
  CUBLAS_CHECK(cublasDestroy(h));
}

}  // namespace calib
