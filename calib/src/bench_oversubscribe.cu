// Managed memory past the GPU's memory, measured safely: a device-memory balloon (a plain cudaMalloc of all free
// memory but --oversubscribe-leave) shrinks the GPU first, then managed buffers of r times what is left are read
// (or written) in order, one kernel per 64 MiB chunk, pass after pass — a model's weights read layer by layer each
// decode token. Every managed buffer stays within 60% of host memory and at most 2.5x what the balloon leaves.
// Runs only when asked (--only oversubscribe --oversubscribe-leave GIB, the two together: main.cu refuses either
// alone): never part of a default calibration.
//
// What the rows answer (results/calib/h200-oversubscribe):
// - um_oversub_pass (plain): each pass faults the buffer back in; blocks are evicted in the driver's order and, with
//   the GPU holding the only copy, written back to host memory first. Its first pass at r < 1 is the fault
//   migration rate alone; at r > 1 the steady passes price a fault that must evict.
// - um_oversub_pass (read_mostly): the same reads of a ReadMostly buffer: a GPU read makes a read-only copy, so an
//   evicted block is dropped, not written back. Plain minus read-mostly is what the write-back adds: if it adds
//   the evicted bytes at the measured prefetch-to-host rate, eviction and migration run one after the other; if
//   less, they overlap on the full-duplex link.
// - um_oversub_pass (written): a kernel writes each chunk instead (dirty pages: as plain, unless the driver tells
//   clean from dirty pages).
// - um_oversub_prefetch: cudaMemPrefetchAsync of the whole buffer to the GPU, evicting as it goes.
// Each pass is a row of its own (variant ..._pN): the passes' order shows whether mild oversubscription repeats a
// pattern (some passes fast, some slow) that FIFO eviction alone cannot produce.
#include <unistd.h>

#include <cmath>
#include <cstring>

#include "measure.hpp"

namespace calib {
namespace {

// One pass: chunk after chunk, in order, each its own kernel (read, or write when `write`).
void pass(char* p, size_t bytes, size_t chunk, bool write, unsigned seed, unsigned long long* sink, cudaStream_t s,
          int blocks) {
  for (size_t off = 0; off < bytes; off += chunk) {
    const size_t n = std::min(chunk, bytes - off);
    if (write) fill_bytes(p + off, n, seed, s);
    else stream_read(p + off, n, sink, s, blocks);
  }
}

char ratio_buf[16];
const char* ratio_name(double r) {
  std::snprintf(ratio_buf, sizeof ratio_buf, "r%.2f", r);
  return ratio_buf;
}

}  // namespace

// How the fault path past the GPU's memory depends on how much one kernel touches: the plain and ReadMostly passes at
// r = 1.5 with chunks of 16 MiB and 256 MiB (the main part's are 64 MiB; a decode's GEMVs read 8-300 MiB weights),
// and the same 64 MiB chunks as separate cudaMallocManaged ranges (a per-tensor allocator's weights). Rows
// um_oversub_chunk,<plain|read_mostly>_<chunk|tensors64MiB>_r1.50_pN. Called by bench_oversubscribe with the balloon
// in place and `left` the GPU memory it leaves.
void oversubscribe_chunks(Csv& csv, const Options& o, BenchStream& bs, size_t left, double host) {
  cudaStream_t s = bs.stream;
  const size_t block = 2ull << 20;
  const int blocks = bs.sms * 8;
  const double r = 1.5;
  const size_t bytes = size_t(r * double(left)) / block * block;
  if (double(bytes) > 0.6 * host) {
    csv.comment("oversubscribe", "skipped the chunk passes: past 60% of host memory");
    return;
  }
  for (bool read_mostly : {false, true}) {
    const std::string kind = read_mostly ? "read_mostly" : "plain";
    for (size_t chunk : {16ull << 20, 256ull << 20, 0ull}) {  // 0: 64 MiB chunks, each its own allocation
      const size_t step = chunk ? chunk : 64ull << 20;
      std::vector<char*> ranges;
      for (size_t off = 0; off < bytes; off += (chunk ? bytes : step)) {
        const size_t n = chunk ? bytes : std::min(step, bytes - off);
        char* um = nullptr;
        CUDA_CHECK(cudaMallocManaged(&um, n));
        if (read_mostly) CUDA_CHECK(cudaMemAdvise(um, n, cudaMemAdviseSetReadMostly, device_loc(o.device)));
        std::memset(um, 0x5a, n);
        ranges.push_back(um);
      }
      const std::string name = kind + "_" + (chunk ? size_name(double(chunk)) : std::string("tensors64MiB")) + "_" + ratio_name(r);
      for (int i = 0; i < 4; ++i) {
        const auto t = time_device(s, 0, 1, [&] {
          if (chunk) pass(ranges[0], bytes, chunk, false, unsigned(i), bs.sink, s, blocks);
          else
            for (size_t k = 0; k < ranges.size(); ++k)
              stream_read(ranges[k], std::min(step, bytes - k * step), bs.sink, s, blocks);
        });
        csv.add({"um_oversub_chunk", name + "_p" + std::to_string(i + 1), double(bytes), "bytes", t});
      }
      CUDA_CHECK(cudaStreamSynchronize(s));
      for (char* um : ranges) CUDA_CHECK(cudaFree(um));
    }
  }
}

// A decoder's weights past the GPU's memory, read as a decode reads them (session 31): one cudaMallocManaged range
// per weight (a per-tensor allocator's), layer after layer of --gemv-shapes FILE's shapes ({out, in} bf16, one
// decoder layer's projections in order), as many layers as make r times what the balloon leaves, each weight read
// pass after pass by the cuBLAS GEMV PyTorch's Linear runs at batch 1 (kernel "gemv") or by calib's streaming read
// (kernel "stream", the main passes' kernel), plain and ReadMostly. Under full thrash a Hugging Face decode moved
// 7.3-9.5 GB/s of weights where the 64 MiB streaming passes ran 6.2-7.0 (results/validation/um-oversubscription):
// these rows say whether the kernel's access pattern or the sizes of the ranges make the difference. Rows
// um_oversub_decoder,<plain|read_mostly|prefer_cpu_read_mostly>_<gemv|stream>_rX.XX_pN (--decoder-advice), work =
// the pass's bytes; the layer and the weights a pass reads are comments (oversubscribe_decoder_layer, _rX.XX_weights).
void oversubscribe_decoder(Csv& csv, const Options& o, BenchStream& bs, size_t left, double host) {
  cudaStream_t s = bs.stream;
  const int blocks = bs.sms * 8;
  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  CUBLAS_CHECK(cublasSetStream(h, s));
  size_t layer_bytes = 0;
  int max_out = 0, max_in = 0;
  for (const auto& [out, in] : o.gemv_shapes) {
    layer_bytes += size_t(out) * size_t(in) * 2;
    max_out = std::max(max_out, out), max_in = std::max(max_in, in);
  }
  void* x = nullptr;
  void* y = nullptr;
  CUDA_CHECK(cudaMalloc(&x, size_t(max_in) * 2));
  CUDA_CHECK(cudaMalloc(&y, size_t(max_out) * 2));
  fill_random_bf16(x, size_t(max_in), 3, s);
  std::string layer;
  for (const auto& [out, in] : o.gemv_shapes) layer += (layer.empty() ? "" : " ") + std::to_string(out) + "x" + std::to_string(in);
  csv.comment("oversubscribe_decoder_layer", layer);
  for (double r : {0.5, 1.1, 1.5, 2.0}) {
    const size_t layers = std::max<size_t>(1, size_t(std::ceil(r * double(left) / double(layer_bytes))));
    const double bytes = double(layers) * double(layer_bytes);
    if (bytes > 0.6 * host || bytes > 2.5 * double(left)) {
      csv.comment("oversubscribe", std::string("skipped the decoder passes at ") + ratio_name(r) +
                                       ": past 60% of host memory or 2.5x what the balloon leaves");
      continue;
    }
    const std::string ratio = ratio_name(r);
    csv.comment("oversubscribe_decoder_" + ratio + "_weights",
                std::to_string(layers) + " layers, " + std::to_string(layers * o.gemv_shapes.size()) + " ranges, " +
                    std::to_string(size_t(bytes)) + " bytes");
    for (const std::string& kind : o.decoder_advice) {
      const bool read_mostly = kind != "plain", prefer_cpu = kind == "prefer_cpu_read_mostly";
      struct Weight {
        char* p;
        int out, in;
      };
      std::vector<Weight> weights;
      for (size_t l = 0; l < layers; ++l)
        for (const auto& [out, in] : o.gemv_shapes) {
          const size_t n = size_t(out) * size_t(in) * 2;
          char* um = nullptr;
          CUDA_CHECK(cudaMallocManaged(&um, n));
          if (prefer_cpu) CUDA_CHECK(cudaMemAdvise(um, n, cudaMemAdviseSetPreferredLocation, host_loc()));
          if (read_mostly) CUDA_CHECK(cudaMemAdvise(um, n, cudaMemAdviseSetReadMostly, device_loc(o.device)));
          std::memset(um, 0x3c, n);  // every page written on the CPU (bf16 0x3c3c, about 0.0115): the only copy
          weights.push_back({um, out, in});
        }
      for (const char* kernel : {"gemv", "stream"}) {
        const bool gemv = std::string(kernel) == "gemv";
        const int passes = r < 1 ? 2 : r < 1.2 ? 5 : 4;
        for (int i = 0; i < passes; ++i) {
          const auto t = time_device(s, 0, 1, [&] {
            for (const Weight& w : weights) {
              if (gemv) linear(h, w.out, 1, w.in, w.p, x, y, CUDA_R_16BF);
              else stream_read(w.p, size_t(w.out) * size_t(w.in) * 2, bs.sink, s, blocks);
            }
          });
          csv.add({"um_oversub_decoder", kind + "_" + kernel + "_" + ratio + "_p" + std::to_string(i + 1), bytes,
                   "bytes", t});
        }
      }
      CUDA_CHECK(cudaStreamSynchronize(s));
      for (const Weight& w : weights) CUDA_CHECK(cudaFree(w.p));
    }
  }
  CUDA_CHECK(cudaFree(x));
  CUDA_CHECK(cudaFree(y));
  CUBLAS_CHECK(cublasDestroy(h));
}

void bench_oversubscribe(Csv& csv, const Options& o) {
  int concurrent = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, o.device));
  if (!concurrent) {
    csv.comment("oversubscribe", "not measured: no concurrent managed access (no demand paging, no oversubscription)");
    return;
  }
  const double host = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  size_t free_b = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total));
  const size_t leave = size_t(o.oversubscribe_leave * double(1ull << 30));
  if (leave >= free_b) {
    csv.comment("oversubscribe", "not measured: --oversubscribe-leave is not less than the free GPU memory");
    return;
  }
  // The balloon: all free memory but `leave`.
  size_t want = 0;
  void* balloon = balloon_leaving(free_b, leave, &want);
  if (!balloon) {
    csv.comment("oversubscribe", "not measured: the balloon could not be allocated");
    return;
  }
  BenchStream bs(o.device);
  cudaStream_t s = bs.stream;
  size_t left = 0;
  CUDA_CHECK(cudaMemGetInfo(&left, &total));
  csv.comment("oversubscribe_balloon_bytes", std::to_string(want));
  csv.comment("oversubscribe_gpu_left_bytes", std::to_string(left));
  csv.comment("oversubscribe_host_memory_bytes", std::to_string(size_t(host)));
  const size_t block = 2ull << 20, chunk = 64ull << 20;
  const int blocks = bs.sms * 8;
  const std::vector<double> ratios = !o.oversubscribe_main ? std::vector<double>{}
                                    : o.quick ? std::vector<double>{0.5, 1.25} : std::vector<double>{0.5, 1.05, 1.1, 1.25, 1.5, 2.0};
  struct Variant {
    const char* name;
    bool read_mostly, write;
  };
  const Variant variants[] = {{"plain", false, false}, {"read_mostly", true, false}, {"written", false, true}};
  for (const Variant& v : variants) {
    for (double r : ratios) {
      if (v.write && r < 1) continue;  // below the GPU's memory a write pass is the read pass
      const size_t bytes = size_t(r * double(left)) / block * block;
      if (double(bytes) > 0.6 * host || r > 2.5) {
        csv.comment("oversubscribe", std::string("skipped ") + v.name + " " + ratio_name(r) + ": past 60% of host memory");
        continue;
      }
      char* um = nullptr;
      CUDA_CHECK(cudaMallocManaged(&um, bytes));
      if (v.read_mostly) CUDA_CHECK(cudaMemAdvise(um, bytes, cudaMemAdviseSetReadMostly, device_loc(o.device)));
      std::memset(um, 0x5a, bytes);  // every page written on the CPU: the CPU holds the only copy
      const int passes = o.quick ? 2 : (r > 1.0 && r < 1.2 ? 7 : 4);
      for (int i = 0; i < passes; ++i) {
        const auto t = time_device(s, 0, 1, [&] { pass(um, bytes, chunk, v.write, unsigned(i), bs.sink, s, blocks); });
        csv.add({"um_oversub_pass", std::string(v.name) + "_" + ratio_name(r) + "_p" + std::to_string(i + 1),
                 double(bytes), "bytes", t});
      }
      CUDA_CHECK(cudaStreamSynchronize(s));
      CUDA_CHECK(cudaFree(um));
    }
  }
  // Explicit prefetch past the GPU's memory: the whole buffer to the GPU, twice (the second evicts what the first
  // brought), from host memory each time the first.
  for (double r : !o.oversubscribe_main ? std::vector<double>{}
                  : o.quick ? std::vector<double>{1.25} : std::vector<double>{1.25, 2.0}) {
    const size_t bytes = size_t(r * double(left)) / block * block;
    if (double(bytes) > 0.6 * host) continue;
    char* um = nullptr;
    CUDA_CHECK(cudaMallocManaged(&um, bytes));
    std::memset(um, 0x5a, bytes);
    for (int i = 0; i < 2; ++i) {
      const auto t = time_device(s, 0, 1, [&] { CUDA_CHECK(cudaMemPrefetchAsync(um, bytes, device_loc(o.device), 0, s)); });
      csv.add({"um_oversub_prefetch", std::string("to_gpu_") + ratio_name(r) + "_p" + std::to_string(i + 1),
               double(bytes), "bytes", t});
    }
    CUDA_CHECK(cudaStreamSynchronize(s));
    CUDA_CHECK(cudaFree(um));
  }
  if (o.oversubscribe_chunks) oversubscribe_chunks(csv, o, bs, left, host);
  if (o.oversubscribe_decoder) oversubscribe_decoder(csv, o, bs, left, host);
  CUDA_CHECK(cudaFree(balloon));
}

}  // namespace calib
