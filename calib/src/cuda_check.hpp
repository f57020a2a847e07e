#pragma once
// Every CUDA and cuBLAS call goes through these: a failure names the call, the file and the line, and
// stops the run (a calibration with a silently failed measurement is worse than none).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CUDA_CHECK(call)                                                                          \
  do {                                                                                            \
    const cudaError_t err_ = (call);                                                              \
    if (err_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "calib: %s failed at %s:%d: %s\n", #call, __FILE__, __LINE__,          \
                   cudaGetErrorString(err_));                                                     \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

#define CUBLAS_CHECK(call)                                                                        \
  do {                                                                                            \
    const cublasStatus_t st_ = (call);                                                            \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                           \
      std::fprintf(stderr, "calib: %s failed at %s:%d: cuBLAS status %d\n", #call, __FILE__,      \
                   __LINE__, static_cast<int>(st_));                                              \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

// After every kernel launch: launch errors now, execution errors at the next checked sync.
#define LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())
