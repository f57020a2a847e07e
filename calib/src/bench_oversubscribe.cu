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
  // The balloon: all free memory but `leave`, stepping down where the driver keeps a little back.
  void* balloon = nullptr;
  size_t want = free_b - leave;
  while (want > (64ull << 20) && cudaMalloc(&balloon, want) != cudaSuccess) {
    (void)cudaGetLastError();
    balloon = nullptr;
    want -= 64ull << 20;
  }
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
  const std::vector<double> ratios = o.oversubscribe_chunks_only ? std::vector<double>{}
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
  for (double r : o.oversubscribe_chunks_only ? std::vector<double>{}
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
  CUDA_CHECK(cudaFree(balloon));
}

}  // namespace calib
