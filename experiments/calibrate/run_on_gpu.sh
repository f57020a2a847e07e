#!/usr/bin/env bash
# Runs on a GPU machine: two full calibration runs back to back (the second checks repeatability),
# raw CSVs and logs into $OUT (default results/calib/). Expects build/bin/tiersim_calib built by
# `cmake --build build` on a machine with nvcc; falls back to compiling it here with nvcc.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-results/calib}
mkdir -p "$out"
nvidia-smi --query-gpu=index,name,memory.total,memory.used,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv | tee "$out/nvidia_smi.txt"
source experiments/calibrate/cublas_path.sh
find_cublas
calib=$(calib_binary)
for run in 1 2; do
  "$calib" --out "$out/raw_run$run.csv" 2>&1 | tee "$out/run$run.log"
done
