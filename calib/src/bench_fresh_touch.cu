// The first GPU write of a *fresh* cudaMallocManaged range (no advice): what a per-tensor managed allocator (the
// seeds', the validation harness's managed_allocator.cu) pays for every tensor an op writes, since each is a new
// allocation that the driver populates on the GPU's first touch. Per size: allocate, time a kernel writing the whole
// range (CUDA events), time the same kernel again on the populated range, free; the difference is the first touch.
// Sizes 8 KiB to 64 MiB (an op's output, a decode token's to a long prompt's), each freed at once: never near the
// GPU's free memory.
#include "measure.hpp"

namespace calib {

void bench_fresh_touch(Csv& csv, const Options& o) {
  int concurrent = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, o.device));
  if (!concurrent) {
    csv.comment("fresh_touch", "not measured: the device has no concurrent managed access (no GPU page faults)");
    return;
  }
  BenchStream bs(o.device);
  cudaStream_t s = bs.stream;
  const std::vector<size_t> sizes = o.quick ? std::vector<size_t>{8 << 10, 2 << 20}
                                            : std::vector<size_t>{8 << 10, 64 << 10, 2 << 20, 16 << 20, 64 << 20};
  void* warm = nullptr;  // the context and the kernel, warmed
  CUDA_CHECK(cudaMallocManaged(&warm, 1 << 20));
  fill_bytes(warm, 1 << 20, 1, s);
  CUDA_CHECK(cudaStreamSynchronize(s));
  CUDA_CHECK(cudaFree(warm));
  // One size: allocate, time the first write and a second one, free; `reps` times. Rows of `family`.
  auto measure = [&](const std::string& family, size_t size, int reps) {
    std::vector<double> first, populated;
    for (int r = 0; r < reps; ++r) {
      void* p = nullptr;
      CUDA_CHECK(cudaMallocManaged(&p, size));
      first.push_back(time_device(s, 0, 1, [&] { fill_bytes(p, size, 3, s); })[0]);
      populated.push_back(time_device(s, 0, 1, [&] { fill_bytes(p, size, 5, s); })[0]);
      CUDA_CHECK(cudaStreamSynchronize(s));
      CUDA_CHECK(cudaFree(p));
    }
    csv.add({family, "first_write_" + size_name(double(size)), double(size), "bytes", first});
    csv.add({family, "populated_write_" + size_name(double(size)), double(size), "bytes", populated});
  };
  for (size_t size : sizes) measure("um_fresh_touch", size, o.quick ? 5 : size >= (16u << 20) ? 30 : 100);
  // The same beside live allocations, as a framework's step has them: 64 small ranges allocated and written first
  // and kept while the timed ones come and go (whether a new small range lands on pages already populated).
  std::vector<void*> live(64, nullptr);
  for (void*& p : live) {
    CUDA_CHECK(cudaMallocManaged(&p, 8 << 10));
    fill_bytes(p, 8 << 10, 7, s);
  }
  CUDA_CHECK(cudaStreamSynchronize(s));
  for (size_t size : sizes)
    if (size <= (2u << 20)) measure("um_fresh_touch_live", size, o.quick ? 5 : 100);
  for (void* p : live) CUDA_CHECK(cudaFree(p));
}

}  // namespace calib
