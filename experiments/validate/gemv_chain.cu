// A decode step with no framework in the way: a chain of cuBLAS bf16 GEMVs (M = 1) over weights laid
// out like a model's projections (per layer q, k, v, o, gate, up, down), one layer after another, then
// a sync. It runs the chain under the strategies tiersim models and prints one JSON line each:
//   resident                     weights in device memory
//   copy:K:P:MEM                 the last K layers' weights in pinned or pageable host memory, copied to a
//                                staging buffer before use: P = 0 on the compute stream (pageable: a
//                                synchronous cudaMemcpy), P = 1 one layer ahead on a copy stream with two
//                                staging slots (a slot is reused once the layer two back has run)
//   managed:ADVICE               every weight from cudaMallocManaged, advice none | prefer-cpu |
//                                accessed-by | read-mostly, starting in host memory; at most 80% of free
//                                GPU memory is ever allocated as managed memory
// Usage: gemv_chain --layers 36 --hidden 4096 --inter 12288 --heads 32 --kv-heads 8 --head-dim 128
//                   --steps 8 --config resident,copy:12:0:pinned,... [--managed ADVICE]
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include "../../calib/src/cuda_check.hpp"  // CUDA_CHECK, CUBLAS_CHECK: name the call, file and line, then stop
#include "device_common.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>


namespace {

struct Matrix {
  int out, in;
  size_t bytes() const { return size_t(out) * in * 2; }
};

__global__ void fill(__nv_bfloat16* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned x = unsigned(i) * 2654435761u ^ seed;
    x ^= x >> 13;
    p[i] = __float2bfloat16(((x & 0xffff) / 32768.0f - 1.0f) * 0.02f);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int layers = 36, hidden = 4096, inter = 12288, heads = 32, kv_heads = 8, head_dim = 128, steps = 8;
  std::string configs = "resident", managed;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--layers") layers = std::atoi(v.c_str());
    else if (k == "--hidden") hidden = std::atoi(v.c_str());
    else if (k == "--inter") inter = std::atoi(v.c_str());
    else if (k == "--heads") heads = std::atoi(v.c_str());
    else if (k == "--kv-heads") kv_heads = std::atoi(v.c_str());
    else if (k == "--head-dim") head_dim = std::atoi(v.c_str());
    else if (k == "--steps") steps = std::atoi(v.c_str());
    else if (k == "--config") configs = v;
    else if (k == "--managed") managed = v;
    else {
      std::fprintf(stderr, "gemv_chain: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  const int q = heads * head_dim, kv = kv_heads * head_dim;
  const std::vector<Matrix> per_layer{{q, hidden}, {kv, hidden}, {kv, hidden}, {hidden, q},
                                      {inter, hidden}, {inter, hidden}, {hidden, inter}};
  const int n = layers * int(per_layer.size());
  size_t layer_bytes = 0, max_bytes = 0;
  for (const auto& m : per_layer) {
    layer_bytes += m.bytes();
    max_bytes = std::max(max_bytes, m.bytes());
  }
  const int max_dim = std::max({q, kv, hidden, inter});

  cudaStream_t compute, copy;
  CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  CUBLAS_CHECK(cublasSetStream(h, compute));
  __nv_bfloat16 *x = nullptr, *y = nullptr;
  CUDA_CHECK(cudaMalloc(&x, size_t(max_dim) * 2));
  CUDA_CHECK(cudaMalloc(&y, size_t(max_dim) * 2));
  fill<<<64, 256, 0, compute>>>(x, max_dim, 1);
  CUDA_CHECK(cudaGetLastError());
  const float alpha = 1.0f, beta = 0.0f;
  auto gemv = [&](const Matrix& m, const void* w) {
    CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m.out, 1, m.in, &alpha, w, CUDA_R_16BF, m.in, x, CUDA_R_16BF,
                        m.in, &beta, y, CUDA_R_16BF, m.out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };
  auto report = [&](const std::string& config, const std::vector<double>& t) {
    std::printf("{\"harness\": \"gemv_chain\", \"config\": \"%s\", \"layers\": %d, \"hidden\": %d, \"inter\": %d, "
                "\"first_step_s\": %.9f, \"decode_median_s\": %.9f, \"steps\": %d}\n",
                config.c_str(), layers, hidden, inter, t.front(), median(std::vector<double>(t.begin() + 1, t.end())),
                int(t.size()) - 1);
    std::fflush(stdout);
  };
  auto time_steps = [&](const std::function<void()>& step) {
    std::vector<double> t;
    for (int s = 0; s < steps + 1; ++s) {
      CUDA_CHECK(cudaDeviceSynchronize());
      const auto t0 = std::chrono::steady_clock::now();
      step();
      CUDA_CHECK(cudaStreamSynchronize(compute));
      CUDA_CHECK(cudaStreamSynchronize(copy));
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return t;
  };

  if (!managed.empty()) {
    size_t free_b = 0, total = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total));
    if (layer_bytes * layers > free_b / 10 * 8) {
      std::fprintf(stderr, "gemv_chain: %zu bytes of managed weights exceed 80%% of free GPU memory; refusing\n",
                   layer_bytes * layers);
      return 3;
    }
    std::vector<void*> w(n);
    const cudaMemLocation cpu = device_common::host_location();
    const cudaMemLocation gpu = device_common::device_location(0);
    for (int i = 0; i < n; ++i) {
      const Matrix& m = per_layer[i % per_layer.size()];
      CUDA_CHECK(cudaMallocManaged(&w[i], m.bytes()));
      fill<<<256, 256, 0, compute>>>(static_cast<__nv_bfloat16*>(w[i]), m.bytes() / 2, unsigned(i));
      CUDA_CHECK(cudaGetLastError());
      CUDA_CHECK(cudaStreamSynchronize(compute));
      if (managed == "prefer-cpu" || managed == "accessed-by")
        CUDA_CHECK(cudaMemAdvise(w[i], m.bytes(), cudaMemAdviseSetPreferredLocation, cpu));
      if (managed == "accessed-by") CUDA_CHECK(cudaMemAdvise(w[i], m.bytes(), cudaMemAdviseSetAccessedBy, gpu));
      if (managed == "read-mostly") CUDA_CHECK(cudaMemAdvise(w[i], m.bytes(), cudaMemAdviseSetReadMostly, gpu));
      CUDA_CHECK(cudaMemPrefetchAsync(w[i], m.bytes(), cpu, 0, compute));  // start in host memory
    }
    CUDA_CHECK(cudaStreamSynchronize(compute));
    report("managed:" + managed, time_steps([&] {
             for (int i = 0; i < n; ++i) gemv(per_layer[i % per_layer.size()], w[i]);
           }));
    for (void* p : w) CUDA_CHECK(cudaFree(p));
    return 0;
  }

  // Device copies of every weight (resident), and host copies for the offloaded layers.
  std::vector<void*> dev(n, nullptr), pinned(n, nullptr), pageable(n, nullptr);
  for (int i = 0; i < n; ++i) {
    const Matrix& m = per_layer[i % per_layer.size()];
    CUDA_CHECK(cudaMalloc(&dev[i], m.bytes()));
    fill<<<256, 256, 0, compute>>>(static_cast<__nv_bfloat16*>(dev[i]), m.bytes() / 2, unsigned(i));
    CUDA_CHECK(cudaGetLastError());
  }
  CUDA_CHECK(cudaStreamSynchronize(compute));
  void* slot[2];
  for (auto& s : slot) CUDA_CHECK(cudaMalloc(&s, layer_bytes));
  cudaEvent_t copied[2], consumed[2];
  for (int s = 0; s < 2; ++s) {
    CUDA_CHECK(cudaEventCreateWithFlags(&copied[s], cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&consumed[s], cudaEventDisableTiming));
  }

  size_t start = 0;
  while (start < configs.size()) {
    const size_t comma = configs.find(',', start);
    const std::string config = configs.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? configs.size() : comma + 1;
    if (config == "resident") {
      report(config, time_steps([&] {
               for (int i = 0; i < n; ++i) gemv(per_layer[i % per_layer.size()], dev[i]);
             }));
      continue;
    }
    int k = 0, pf = 0;
    char mem[16] = {0};
    if (std::sscanf(config.c_str(), "copy:%d:%d:%15s", &k, &pf, mem) != 3 || k < 0 || k > layers) {
      std::fprintf(stderr, "gemv_chain: bad config %s\n", config.c_str());
      return 2;
    }
    const bool is_pinned = std::strcmp(mem, "pinned") == 0;
    const int first = layers - k;
    for (int i = first * int(per_layer.size()); i < n; ++i) {  // host copies of the offloaded layers
      const Matrix& m = per_layer[i % per_layer.size()];
      if (is_pinned && !pinned[i]) {
        CUDA_CHECK(cudaMallocHost(&pinned[i], m.bytes()));
        CUDA_CHECK(cudaMemcpy(pinned[i], dev[i], m.bytes(), cudaMemcpyDeviceToHost));
      }
      if (!is_pinned && !pageable[i]) {
        pageable[i] = std::malloc(m.bytes());
        if (!pageable[i]) return 1;
        CUDA_CHECK(cudaMemcpy(pageable[i], dev[i], m.bytes(), cudaMemcpyDeviceToHost));
      }
    }
    auto host = [&](int i) { return is_pinned ? pinned[i] : pageable[i]; };
    auto copy_layer = [&](int layer, cudaStream_t s, void* dst) {
      size_t off = 0;
      for (size_t j = 0; j < per_layer.size(); ++j) {
        const int i = layer * int(per_layer.size()) + int(j);
        if (is_pinned)
          CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(dst) + off, host(i), per_layer[j].bytes(), cudaMemcpyHostToDevice, s));
        else
          CUDA_CHECK(cudaMemcpy(static_cast<char*>(dst) + off, host(i), per_layer[j].bytes(), cudaMemcpyHostToDevice));
        off += per_layer[j].bytes();
      }
    };
    auto run_layer_from = [&](void* base) {
      size_t off = 0;
      for (const auto& m : per_layer) {
        gemv(m, static_cast<char*>(base) + off);
        off += m.bytes();
      }
    };
    report(config, time_steps([&] {
             for (int l = 0; l < layers; ++l) {
               if (l < first) {
                 for (size_t j = 0; j < per_layer.size(); ++j) gemv(per_layer[j], dev[l * per_layer.size() + j]);
                 if (pf == 1 && l + 1 == first) {  // issue the first offloaded layer one layer ahead
                   copy_layer(first, copy, slot[0]);
                   CUDA_CHECK(cudaEventRecord(copied[0], copy));
                 }
                 continue;
               }
               const int s = (l - first) % 2;
               if (pf == 0) {
                 copy_layer(l, compute, slot[0]);  // in order on the compute stream
                 run_layer_from(slot[0]);
                 continue;
               }
               if (l == first && first == 0) {
                 copy_layer(l, copy, slot[s]);
                 CUDA_CHECK(cudaEventRecord(copied[s], copy));
               }
               if (l + 1 < layers) {  // one ahead, into the other slot once the layer that used it ran
                 const int t = 1 - s;
                 CUDA_CHECK(cudaStreamWaitEvent(copy, consumed[t], 0));
                 copy_layer(l + 1, copy, slot[t]);
                 CUDA_CHECK(cudaEventRecord(copied[t], copy));
               }
               CUDA_CHECK(cudaStreamWaitEvent(compute, copied[s], 0));
               run_layer_from(slot[s]);
               CUDA_CHECK(cudaEventRecord(consumed[s], compute));
             }
           }));
  }
  return 0;
}
