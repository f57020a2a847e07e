// Host link: copies host->device and device->host from pinned and from pageable memory over sizes
// 4 KiB .. 1 GiB, and both directions at once from pinned memory.
// Pageable copies are staged by the driver through a pinned bounce buffer with a CPU memcpy, so their
// rate depends on whether the source is in the CPU's caches. An offloaded model's weights are not: a
// step reads gigabytes of them once. So each pageable repetition uses the next region of a footprint
// much larger than the last-level cache (4 GiB; 256 MiB with --quick), never the region it used last.
// (Pinned copies are DMA reads of host memory and are not staged; they use one buffer.)
#include <cstdlib>
#include <cstring>

#include "measure.hpp"

namespace calib {

void bench_host_link(Csv& csv, const Options& o) {
  const size_t max_bytes = o.quick ? (64ull << 20) : (1ull << 30);
  void *dev = nullptr, *pinned = nullptr;
  CUDA_CHECK(cudaMalloc(&dev, max_bytes));
  CUDA_CHECK(cudaMallocHost(&pinned, max_bytes));
  const size_t footprint = o.quick ? (256ull << 20) : (4ull << 30);
  char* pageable = static_cast<char*>(std::malloc(footprint));
  if (!pageable) {
    std::fprintf(stderr, "calib: malloc of %zu bytes failed\n", footprint);
    std::exit(1);
  }
  std::memset(pageable, 0x5a, footprint);  // fault the pages in before timing
  size_t next = 0;  // the next pageable region: advances by one copy each repetition, wrapping
  auto region = [&](size_t bytes) {
    if (next + bytes > footprint) next = 0;
    char* p = pageable + next;
    next += bytes;
    return p;
  };
  std::memset(pinned, 0x5a, max_bytes);
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  for (size_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
    const int reps = repeats_for(static_cast<double>(bytes));
    const std::string v = size_name(static_cast<double>(bytes));
    csv.add({"h2d", "pinned_" + v, double(bytes), "bytes",
             time_device(s, 3, reps, [&] { CUDA_CHECK(cudaMemcpyAsync(dev, pinned, bytes, cudaMemcpyHostToDevice, s)); })});
    csv.add({"d2h", "pinned_" + v, double(bytes), "bytes",
             time_device(s, 3, reps, [&] { CUDA_CHECK(cudaMemcpyAsync(pinned, dev, bytes, cudaMemcpyDeviceToHost, s)); })});
    // Pageable copies are staged by the driver and return when done: the host clock times them.
    csv.add({"h2d", "pageable_" + v, double(bytes), "bytes",
             time_host(3, reps, [&] { CUDA_CHECK(cudaMemcpy(dev, region(bytes), bytes, cudaMemcpyHostToDevice)); })});
    csv.add({"d2h", "pageable_" + v, double(bytes), "bytes",
             time_host(3, reps, [&] { CUDA_CHECK(cudaMemcpy(region(bytes), dev, bytes, cudaMemcpyDeviceToHost)); })});
  }

  // Both directions at once: half the buffer each way on two streams, timed end to end.
  {
    const size_t half = max_bytes / 2;
    cudaStream_t s2;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    cudaEvent_t fork, join;
    CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    csv.add({"bidir", "pinned_" + size_name(double(half)) + "_each_way", double(2 * half), "bytes",
             time_device(s, 2, 5, [&] {
               CUDA_CHECK(cudaEventRecord(fork, s));
               CUDA_CHECK(cudaStreamWaitEvent(s2, fork, 0));
               CUDA_CHECK(cudaMemcpyAsync(dev, pinned, half, cudaMemcpyHostToDevice, s));
               CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(pinned) + half, static_cast<char*>(dev) + half, half,
                                          cudaMemcpyDeviceToHost, s2));
               CUDA_CHECK(cudaEventRecord(join, s2));
               CUDA_CHECK(cudaStreamWaitEvent(s, join, 0));
             })});
    CUDA_CHECK(cudaEventDestroy(fork));
    CUDA_CHECK(cudaEventDestroy(join));
    CUDA_CHECK(cudaStreamDestroy(s2));
  }
  CUDA_CHECK(cudaStreamDestroy(s));
  std::free(pageable);
  CUDA_CHECK(cudaFreeHost(pinned));
  CUDA_CHECK(cudaFree(dev));
}

}  // namespace calib
