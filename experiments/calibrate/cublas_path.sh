# Sourced by the GPU run scripts: puts cuBLAS 13 on LD_LIBRARY_PATH, from the CUDA toolkit or from
# PyTorch's Python wheels, whichever the machine has (tiersim_calib links it dynamically).
find_cublas() {
  local lib
  for lib in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
             $(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null || true); do
    if [ -e "$lib/libcublas.so.13" ]; then export LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"; fi
  done
}

# The tiersim_calib to run (its path on stdout): build/bin's when it loads here, else one compiled here with nvcc.
calib_binary() {
  local calib=build/bin/tiersim_calib
  if [ ! -x "$calib" ] || ldd "$calib" | grep -q "not found"; then
    echo "building tiersim_calib with nvcc on this machine" >&2
    nvcc -O2 -std=c++17 -gencode=arch=compute_90,code=sm_90 calib/src/*.cu -lcublas -o /tmp/tiersim_calib >&2
    calib=/tmp/tiersim_calib
  fi
  echo "$calib"
}
