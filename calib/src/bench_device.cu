// The GPU itself: HBM streaming read and device-to-device copy, kernel launch cost, and cuBLAS
// bf16/fp16 GEMV and GEMM at the layer shapes LLM decode and prefill run; fp32 GEMM (no TF32) at the same shapes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "measure.hpp"

namespace calib {
namespace {

// (out, in) of Qwen3-14B's projections: q/o, k/v, gate/up, down; and Qwen3-8B's MLP.
constexpr int kShapes[][2] = {{5120, 5120}, {1024, 5120}, {17408, 5120}, {5120, 17408}, {12288, 4096}};

}  // namespace

void bench_device(Csv& csv, const Options& o) {
  BenchStream bs(o.device);
  cudaStream_t s = bs.stream;
  unsigned long long* sink = bs.sink;
  const int sms = bs.sms;

  // HBM: streaming read of 4 GiB (bytes read), and a D2D copy (bytes read + written).
  {
    const size_t bytes = o.quick ? (256ull << 20) : (4ull << 30);
    void *a = nullptr, *b = nullptr;
    CUDA_CHECK(cudaMalloc(&a, bytes));
    CUDA_CHECK(cudaMalloc(&b, bytes));
    fill_bytes(a, bytes, 1, s);
    csv.add({"hbm_read", "stream_" + size_name(double(bytes)), double(bytes), "bytes",
             time_device(s, 2, 10, [&] { stream_read(a, bytes, sink, s, sms * 8); })});
    csv.add({"d2d", "memcpy_" + size_name(double(bytes)), double(2 * bytes), "bytes",
             time_device(s, 2, 10, [&] { CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s)); })});
    CUDA_CHECK(cudaFree(a));
    CUDA_CHECK(cudaFree(b));
  }

  // Launch cost: host time to issue one empty kernel, and device time per back-to-back empty kernel.
  {
    const int n = 2000;
    auto issue = time_host(1, 5, [&] {
      for (int i = 0; i < n; ++i) empty_kernel(s);
      CUDA_CHECK(cudaStreamSynchronize(s));
    });
    csv.add({"launch", "issue_and_run_empty_x2000", double(n), "launches", issue});
    csv.add({"launch", "device_empty_x2000", double(n), "launches",
             time_device(s, 1, 5, [&] { for (int i = 0; i < n; ++i) empty_kernel(s); })});
  }

  // cuBLAS GEMV (M = 1) and GEMM (M = 16, 512) in bf16 and fp16, FP32 accumulate, random data.
  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  CUBLAS_CHECK(cublasSetStream(h, s));
  const int max_m = 2048;
  for (const auto& shape : kShapes) {
    const int out = shape[0], in = shape[1];
    for (cudaDataType_t type : {CUDA_R_16BF, CUDA_R_16F}) {
      const char* tname = type == CUDA_R_16BF ? "bf16" : "fp16";
      void *w = nullptr, *x = nullptr, *y = nullptr;
      CUDA_CHECK(cudaMalloc(&w, size_t(out) * in * 2));
      CUDA_CHECK(cudaMalloc(&x, size_t(max_m) * in * 2));
      CUDA_CHECK(cudaMalloc(&y, size_t(max_m) * out * 2));
      fill_random_bf16(w, size_t(out) * in, 7, s);  // bf16 bit patterns are also finite fp16 values
      fill_random_bf16(x, size_t(max_m) * in, 11, s);
      for (int m : {1, 16, 512, 2048}) {
        if (o.quick && m > 512) continue;
        auto body = [&] { linear(h, out, m, in, w, x, y, type); };
        char variant[96];
        std::snprintf(variant, sizeof variant, "%s_m%d_out%d_in%d", tname, m, out, in);
        if (m == 1) {
          // GEMV is weight-bound: report bytes (weights + x + y).
          const double bytes = 2.0 * (double(out) * in + in + out);
          csv.add({"gemv", variant, bytes, "bytes", time_device(s, 5, 30, body)});
        } else {
          csv.add({"gemm", variant, 2.0 * m * out * in, "flop", time_device(s, 5, 20, body)});
        }
      }
      CUDA_CHECK(cudaFree(w));
      CUDA_CHECK(cudaFree(x));
      CUDA_CHECK(cudaFree(y));
    }
  }
  CUBLAS_CHECK(cublasDestroy(h));
}

}  // namespace calib

namespace calib {

// cuBLAS fp32 GEMM without TF32 (CUBLAS_COMPUTE_32F in the default math mode): what PyTorch runs for an fp32 matmul
// while torch.backends.cuda.matmul.allow_tf32 is False, its default (ComfyUI's text encoders compute in fp32). The
// same LLM shapes as the bf16 GEMMs, M = 16 to 2048 (since 2026-11-28: a text encoder's prompt is tens to hundreds
// of rows, where cuBLAS's SGEMM tiles leave part of the GPU idle and pad the rows to a whole tile; M = 512 and 2048
// before).
void bench_fp32_gemm(Csv& csv, const Options& o) {
  BenchStream bs(o.device);
  cudaStream_t s = bs.stream;
  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  CUBLAS_CHECK(cublasSetStream(h, s));
  const int max_m = 2048;
  for (const auto& shape : kShapes) {
    const int out = shape[0], in = shape[1];
    void *w = nullptr, *x = nullptr, *y = nullptr;
    CUDA_CHECK(cudaMalloc(&w, size_t(out) * in * 4));
    CUDA_CHECK(cudaMalloc(&x, size_t(max_m) * in * 4));
    CUDA_CHECK(cudaMalloc(&y, size_t(max_m) * out * 4));
    // bf16 bit patterns two by two: each fp32's high half is a finite bf16, so every value is finite.
    fill_random_bf16(w, size_t(out) * in * 2, 7, s);
    fill_random_bf16(x, size_t(max_m) * in * 2, 11, s);
    // Powers of two and the rows between: a tile covers a fixed number of rows, so a product of 134 rows pays
    // for 192 (tiersim_fit derives that row tile from these).
    for (int m : {16, 24, 32, 40, 48, 64, 80, 96, 112, 128, 144, 160, 192, 224, 256, 320, 384, 448, 512, 640, 768, 1024,
                  2048}) {
      if (o.quick && m > 512) continue;
      auto body = [&] { linear(h, out, m, in, w, x, y, CUDA_R_32F); };
      char variant[96];
      std::snprintf(variant, sizeof variant, "fp32_m%d_out%d_in%d", m, out, in);
      csv.add({"gemm", variant, 2.0 * m * out * in, "flop", time_device(s, 3, 10, body)});
    }
    CUDA_CHECK(cudaFree(w));
    CUDA_CHECK(cudaFree(x));
    CUDA_CHECK(cudaFree(y));
  }
  CUBLAS_CHECK(cublasDestroy(h));
}

}  // namespace calib
