#!/usr/bin/env bash
# Configures and builds the kit (CMakeLists.txt beside this file) into carry/build: llama-bench,
# llama-quantize, llama-fit-params, cpu_matmul_bench, capture_routing and test-backend-ops, with the CUDA backend when nvcc is found.
#   build.sh [--cpu] [--configure-only] [--build-dir DIR] [-j N] [--no-tests] [-- EXTRA CMAKE ARGS]
#     --cpu             CPU backend only, even where nvcc is found
#     --configure-only  run cmake's configure step and stop (prints the CUDA translation units it would compile)
#     --build-dir DIR   default experiments/llamacpp/carry/build (ignored by git; stays on the device between calls)
#     -j N              parallel jobs (default: all cores)
#     --no-tests        leave test-backend-ops out
# Run it again after a timeout: ninja carries on where it stopped.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build_dir=$here/carry/build
cuda=auto
configure_only=0
jobs=$(nproc)
tests=1
extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --cpu) cuda=off ;;
    --cuda) cuda=on ;;
    --configure-only) configure_only=1 ;;
    --build-dir) build_dir=$2; shift ;;
    -j) jobs=$2; shift ;;
    -j*) jobs=${1#-j} ;;
    --no-tests) tests=0 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "build.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

[ -f "$here/carry/llama.cpp/COMMIT" ] || { echo "build.sh: run assemble_source.sh first (no carry/llama.cpp/COMMIT)" >&2; exit 1; }

nvcc=$(command -v nvcc || true)
[ -n "$nvcc" ] || { [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc; } || true
if [ "$cuda" = auto ]; then
  if [ -n "$nvcc" ]; then cuda=on; else cuda=off; fi
fi
if [ "$cuda" = on ] && [ -z "$nvcc" ]; then echo "build.sh: --cuda but no nvcc found" >&2; exit 1; fi

args=(-G Ninja -S "$here" -B "$build_dir"
      -DCMAKE_BUILD_TYPE=Release
      -DGGML_NATIVE=ON
      -DLLAMA_FATAL_WARNINGS=OFF
      -DGGML_CCACHE=OFF)
if [ "$cuda" = on ]; then
  # Hopper only (sm_90 SASS + compute_90 PTX). FA_ALL_QUANTS stays OFF: only the f16/q4_0/q8_0/bf16 vector
  # flash-attention instances (the default F16 KV cache needs f16-f16). NCCL: one GPU. Compression off: the
  # fatbin compression only shrinks the binary, no kernel changes. Graphs ON: llama.cpp's default.
  args+=(-DGGML_CUDA=ON
         -DCMAKE_CUDA_COMPILER="$nvcc"
         -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}"
         -DGGML_CUDA_FA_ALL_QUANTS=OFF
         -DGGML_CUDA_NCCL=OFF
         -DGGML_CUDA_COMPRESSION_MODE=none
         -DGGML_CUDA_GRAPHS=ON
         # libggml-cuda needs libcuda.so.1, the driver's: where ld cannot find it (a machine without the
         # driver, or the driver outside ld's paths) the programs still link, as upstream's CUDA Dockerfile does
         -DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined)
else
  args+=(-DGGML_CUDA=OFF)
fi
args+=("${extra[@]}")

t0=$(date +%s)
echo "build.sh: cmake ${args[*]}"
cmake "${args[@]}"
t1=$(date +%s)
echo "build.sh: configure took $((t1 - t0)) s"

if [ "$cuda" = on ]; then
  # How many CUDA translation units ggml-cuda compiles (from the generated Ninja rules).
  n_cu=$(grep -c -E '^build [^:]*ggml-cuda[^:]*\.cu\.o:' "$build_dir/build.ninja" || true)
  echo "build.sh: ggml-cuda compiles $n_cu CUDA translation units"
fi
[ "$configure_only" = 1 ] && exit 0

targets=(llama-bench llama-quantize llama-fit-params cpu_matmul_bench capture_routing)
[ "$tests" = 1 ] && targets+=(test-backend-ops)
echo "build.sh: building ${targets[*]} with -j $jobs"
cmake --build "$build_dir" -j "$jobs" --target "${targets[@]}"
t2=$(date +%s)
echo "build.sh: build took $((t2 - t1)) s (configure + build $((t2 - t0)) s)"
ls -la "$build_dir/bin"
