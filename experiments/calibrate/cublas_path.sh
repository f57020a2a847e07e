# Sourced by the GPU run scripts: puts cuBLAS 13 on LD_LIBRARY_PATH, from the CUDA toolkit or from
# PyTorch's Python wheels, whichever the machine has (tiersim_calib links it dynamically).
find_cublas() {
  local lib
  for lib in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
             $(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null || true); do
    if [ -e "$lib/libcublas.so.13" ]; then export LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"; fi
  done
}
