#pragma once
// Small pieces the device experiments in this folder share (each .cu is built alone by nvcc).
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

namespace device_common {

// Where cudaMemAdvise / cudaMemPrefetchAsync put a managed range: host memory, or GPU `device`.
inline cudaMemLocation host_location() {
  cudaMemLocation l{};
  l.type = cudaMemLocationTypeHost;
  l.id = 0;
  return l;
}
inline cudaMemLocation device_location(int device) {
  cudaMemLocation l{};
  l.type = cudaMemLocationTypeDevice;
  l.id = device;
  return l;
}

// The median as fresh_managed and remote_gemv report it: for an even count, the upper of the middle two
// (gemv_chain reports the lower one, as its committed results were made).
inline double upper_median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace device_common
