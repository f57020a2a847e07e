#pragma once
// Timing and the raw CSV. Each measurement is repeated; the CSV keeps median, min and max.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "cuda_check.hpp"

namespace calib {

struct Row {
  std::string benchmark;  // family: h2d, d2h, bidir, d2d, hbm_read, zero_copy, gemv, gemm, launch, peer, um_*
  std::string variant;    // pinned/pageable, shape, footprint, ...
  double work = 0;        // bytes moved or FLOPs done per repetition
  std::string work_unit;  // "bytes" or "flop" or "launches"
  std::vector<double> seconds;
};

class Csv {
 public:
  explicit Csv(std::string path) : path_(std::move(path)) {}
  void comment(const std::string& key, const std::string& value) { comments_.push_back("# " + key + ": " + value); }
  void add(Row r) {
    std::sort(r.seconds.begin(), r.seconds.end());
    const double med = r.seconds[(r.seconds.size() - 1) / 2];
    std::printf("  %-12s %-34s %14.0f %-8s median %10.3f us", r.benchmark.c_str(), r.variant.c_str(), r.work,
                r.work_unit.c_str(), med * 1e6);
    if (r.work_unit == "bytes") std::printf("  %8.2f GB/s", r.work / med / 1e9);
    if (r.work_unit == "flop") std::printf("  %8.2f TFLOP/s", r.work / med / 1e12);
    std::printf("\n");
    std::fflush(stdout);
    rows_.push_back(std::move(r));
  }
  void write() const {
    FILE* f = std::fopen(path_.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "calib: cannot write %s\n", path_.c_str());
      std::exit(1);
    }
    for (const auto& c : comments_) std::fprintf(f, "%s\n", c.c_str());
    std::fprintf(f, "benchmark,variant,work,work_unit,repeats,median_s,min_s,max_s\n");
    for (const auto& r : rows_)
      std::fprintf(f, "%s,%s,%.0f,%s,%zu,%.9e,%.9e,%.9e\n", r.benchmark.c_str(), r.variant.c_str(), r.work,
                   r.work_unit.c_str(), r.seconds.size(), r.seconds[(r.seconds.size() - 1) / 2], r.seconds.front(),
                   r.seconds.back());
    std::fclose(f);
  }

 private:
  std::string path_;
  std::vector<std::string> comments_;
  std::vector<Row> rows_;
};

// Times `body` on `stream` with CUDA events, `warmup` unrecorded runs first.
inline std::vector<double> time_device(cudaStream_t stream, int warmup, int repeats, const std::function<void()>& body) {
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < warmup; ++i) body();
  CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> out;
  for (int i = 0; i < repeats; ++i) {
    CUDA_CHECK(cudaEventRecord(start, stream));
    body();
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    out.push_back(ms * 1e-3);
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  return out;
}

// Times a synchronous host call with the host clock (pageable copies, launch issue cost).
inline std::vector<double> time_host(int warmup, int repeats, const std::function<void()>& body) {
  for (int i = 0; i < warmup; ++i) body();
  std::vector<double> out;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    body();
    out.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return out;
}

// Repeats so that small sizes get many samples and large ones few.
inline int repeats_for(double bytes) { return bytes <= (1 << 20) ? 100 : bytes <= (64 << 20) ? 20 : 5; }

inline std::string size_name(double bytes) {
  char buf[32];
  if (bytes >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.0fGiB", bytes / (1ull << 30));
  else if (bytes >= (1 << 20)) std::snprintf(buf, sizeof buf, "%.0fMiB", bytes / (1 << 20));
  else std::snprintf(buf, sizeof buf, "%.0fKiB", bytes / 1024);
  return buf;
}

// Where cudaMemAdvise / cudaMemPrefetchAsync put a managed range: GPU `d`, or host memory.
inline cudaMemLocation device_loc(int d) {
  cudaMemLocation l{};
  l.type = cudaMemLocationTypeDevice;
  l.id = d;
  return l;
}
inline cudaMemLocation host_loc() {
  cudaMemLocation l{};
  l.type = cudaMemLocationTypeHost;
  l.id = 0;
  return l;
}

// Kernels shared by the benchmarks (kernels.cu).
void fill_random_bf16(void* p, size_t count, unsigned seed, cudaStream_t s);
// A managed range of random bf16 written by the GPU, then advised PreferredLocation=CPU + AccessedBy=`device` and
// prefetched to the host (a per-tensor allocator's tensors after seed 000's mode 4): what remote_gemm's and
// remote_gemv's host-resident operands are. Synchronizes `s` before returning.
void* managed_on_host_bf16(size_t bytes, unsigned seed, int device, cudaStream_t s);
void fill_bytes(void* p, size_t bytes, unsigned seed, cudaStream_t s);
// Reads every 16-byte word of [p, p + bytes) and folds it into *sink: a streaming read.
void stream_read(const void* p, size_t bytes, unsigned long long* sink, cudaStream_t s, int blocks);
// A device-memory balloon (a plain cudaMalloc) of all `free_bytes` but `leave`, stepping down 64 MiB at a time where
// the driver keeps a little back; nullptr when none could be allocated. `*bytes` is its size.
void* balloon_leaving(size_t free_bytes, size_t leave, size_t* bytes);
// Touches one 4-byte word every `stride` bytes (page faults without bulk reads).
void sparse_touch(const void* p, size_t bytes, size_t stride, unsigned long long* sink, cudaStream_t s);
void serial_touch(const void* p, size_t bytes, size_t stride, unsigned long long* sink, cudaStream_t s);
void empty_kernel(cudaStream_t s);

// What most benchmarks share: a non-blocking stream, a sink that keeps read kernels' loads alive,
// and the device's multiprocessor count (read kernels launch 8 blocks per SM).
struct BenchStream {
  cudaStream_t stream = nullptr;
  unsigned long long* sink = nullptr;
  int sms = 0;
  explicit BenchStream(int device) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaMalloc(&sink, sizeof(unsigned long long)));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  }
  ~BenchStream() {
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaFree(sink));
    CUDA_CHECK(cudaStreamDestroy(stream));
  }
  BenchStream(const BenchStream&) = delete;
  BenchStream& operator=(const BenchStream&) = delete;
};

// PyTorch's linear through cuBLAS: y[out x m] = W x, W stored [out, in] row-major (column-major
// [in x out], used transposed), FP32 accumulate.
inline void linear(cublasHandle_t h, int out, int m, int in, const void* w, const void* x, void* y, cudaDataType_t type) {
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, out, m, in, &alpha, w, type, in, x, type, in, &beta, y, type,
                            out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

struct Options {
  int device = 0;
  bool quick = false;  // smaller sizes, fewer repeats (for a smoke test)
  double oversubscribe_leave = 0;  // GiB the balloon leaves free for bench_oversubscribe; 0: not run
  bool oversubscribe_main = false;     // the cyclic 64 MiB passes and prefetches (--only oversubscribe)
  bool oversubscribe_chunks = false;   // the passes by chunk size (--only oversubscribe_chunks)
  bool oversubscribe_decoder = false;  // a decoder's weights by layer (--only oversubscribe_decoder --gemv-shapes)
  // Its advice on every weight (--decoder-advice LIST): plain (none), read_mostly, prefer_cpu_read_mostly (seed 000's
  // mode 3: PreferredLocation=CPU, then ReadMostly).
  std::vector<std::string> decoder_advice = {"plain", "read_mostly"};
  // remote_gemv's shapes {out, in} from --gemv-shapes FILE (read by main): measured in place of its own list and grid;
  // for oversubscribe_decoder, one decoder layer's weights in order.
  std::vector<std::pair<int, int>> gemv_shapes;
};

void bench_host_link(Csv& csv, const Options& o);
void bench_device(Csv& csv, const Options& o);
void bench_fp32_gemm(Csv& csv, const Options& o);
void bench_zero_copy(Csv& csv, const Options& o);
void bench_remote_gemm(Csv& csv, const Options& o);
void bench_remote_gemv(Csv& csv, const Options& o);
void bench_fresh_touch(Csv& csv, const Options& o);
void bench_alloc_calls(Csv& csv, const Options& o);
void bench_advised_cycle(Csv& csv, const Options& o);
void bench_advised_cycle_pressed(Csv& csv, const Options& o);  // needs oversubscribe_leave
void bench_peer(Csv& csv, const Options& o);
void bench_managed(Csv& csv, const Options& o);
void bench_oversubscribe(Csv& csv, const Options& o);
void describe_machine(Csv& csv, const Options& o);

}  // namespace calib
