// GEMVs (M = 1, cuBLAS bf16: PyTorch's Linear at decode) whose operands are host-resident managed memory, per shape:
// the decode-step kernel of seed 000's modes 2 and 4, where every allocation is advised to the CPU. Three placements,
// each operand in device memory or in managed memory advised PreferredLocation=CPU + AccessedBy=the GPU, written by
// the GPU and prefetched to the host (a per-tensor allocator's tensors after mode 4's advice):
// - input: the input vector host-resident, the weight on the device (an activation advised to the CPU);
// - weight: the weight host-resident, the input on the device;
// - both: weight and input host-resident (modes 2 and 4 as a decode runs them).
// An uncached host-resident input is re-read by every thread block over the link, so its cost is not its bytes:
// on the zero_copy rows it was ~5 ms whatever the shape. The shapes are the projections of Qwen3-8B (4096 wide) and
// Qwen3-14B (5120 wide) and their LM heads, and a 2048- and 8192-wide pair around them; rows are
// remote_gemv,gemv_bf16_<placement>_out<O>_in<I>, work = the weight's bytes. Managed buffers at most 1.6 GB.
// Since session 29 also a grid that no model's widths picked: inputs 2048 to 23168 wide in steps of about sqrt(2)
// (multiples of 64), outputs 512 to 32768 in steps of 2 (weights up to 1.6 GB), the input and both placements only
// (what the fit reads). tiersim still prices a GEMV from the nearest measured input width, scaled; interpolating
// between widths over this grid is not in the model yet. With --gemv-shapes FILE, the file's shapes instead of both
// (input and both placements): the exact shapes of the shipped decoders the grid lacks
// (experiments/calibrate/decoder_gemv_shapes.py), since cuBLAS's kernel choice makes neighbours poor guides (the grid's
// 1024 x 2048 takes 11.5 ms, 2048 x 2048 0.9 ms).
#include <cuda_bf16.h>

#include <algorithm>

#include "measure.hpp"

namespace calib {

namespace {

void* on_device(size_t bytes, unsigned seed, cudaStream_t s) {
  void* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, bytes));
  fill_random_bf16(p, bytes / 2, seed, s);
  return p;
}

}  // namespace

void bench_remote_gemv(Csv& csv, const Options& o) {
  BenchStream bs(o.device);
  cudaStream_t s = bs.stream;
  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  CUBLAS_CHECK(cublasSetStream(h, s));
  const std::vector<std::pair<int, int>> shapes =  // {out, in}
      o.quick ? std::vector<std::pair<int, int>>{{4096, 4096}, {1024, 5120}}
              : std::vector<std::pair<int, int>>{{2048, 2048}, {1024, 4096}, {4096, 4096}, {12288, 4096},
                                                 {4096, 12288}, {151936, 4096}, {1024, 5120}, {5120, 5120},
                                                 {17408, 5120}, {5120, 17408}, {151936, 5120}, {8192, 8192}};
  std::vector<std::pair<std::pair<int, int>, int>> runs;  // {{out, in}, placements: 3 = all, 2 = input and both}
  for (const auto& shape : o.gemv_shapes) runs.push_back({shape, 2});
  if (o.gemv_shapes.empty())
    for (const auto& shape : shapes) runs.push_back({shape, 3});
  if (!o.quick && o.gemv_shapes.empty())
    for (int in : {2048, 2880, 4096, 5824, 8192, 11584, 16384, 23168})
      for (int out = 512; out <= 32768; out *= 2)
        if (size_t(out) * in * 2 <= (size_t(1600) << 20) &&
            std::find(shapes.begin(), shapes.end(), std::make_pair(out, in)) == shapes.end())
          runs.push_back({{out, in}, 2});
  const char* all_placements[] = {"input", "weight", "both"};
  const char* grid_placements[] = {"input", "both"};
  for (const auto& [shape, n_placements] : runs) {
    const int out = shape.first, in = shape.second;
    const char* const* placements = n_placements == 3 ? all_placements : grid_placements;
    const size_t wbytes = size_t(out) * in * 2;
    void* y = nullptr;
    CUDA_CHECK(cudaMalloc(&y, size_t(out) * 2));
    for (int pi = 0; pi < n_placements; ++pi) {
      const char* placement = placements[pi];
      const std::string p = placement;
      void* w = p == "input" ? on_device(wbytes, 5, s) : managed_on_host_bf16(wbytes, 5, o.device, s);
      void* x = p == "weight" ? on_device(size_t(in) * 2, 9, s) : managed_on_host_bf16(size_t(in) * 2, 9, o.device, s);
      CUDA_CHECK(cudaStreamSynchronize(s));
      char variant[96];
      std::snprintf(variant, sizeof variant, "gemv_bf16_%s_out%d_in%d", placement, out, in);
      csv.add({"remote_gemv", variant, double(wbytes), "bytes",
               time_device(s, 2, wbytes > (512u << 20) ? 5 : 10, [&] { linear(h, out, 1, in, w, x, y, CUDA_R_16BF); })});
      CUDA_CHECK(cudaStreamSynchronize(s));
      CUDA_CHECK(cudaFree(w));
      CUDA_CHECK(cudaFree(x));
    }
    CUDA_CHECK(cudaFree(y));
  }
  CUBLAS_CHECK(cublasDestroy(h));
}

}  // namespace calib
