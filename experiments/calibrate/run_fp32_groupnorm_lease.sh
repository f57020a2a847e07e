#!/usr/bin/env bash
# Two calibrations in one lease (2026-11-24, nvidia-h100-x1, ~2 minutes):
#  1. tiersim_calib --only fp32_gemm: cuBLAS fp32 GEMMs without TF32 (what PyTorch runs for fp32 matmuls by default)
#     -> raw_h100_run4_fp32_gemm.csv, an --extra for tiersim_fit's h100-measured;
#  2. experiments/calibrate/group_norm_rate.py: PyTorch's GroupNorm kernels (the statistics' per-block rate)
#     -> group_norm_rate.json, for the PyTorch runtimes' gpu_row_moments.
# Carry build/bin/tiersim_calib (built here with nvcc; rebuilt there with nvcc if it does not load).
#   OUT=$OUT bash experiments/calibrate/run_fp32_groupnorm_lease.sh     (everything packed as $OUT/calib.tar)
set -uo pipefail
cd "$(dirname "$0")/../.."
work=/tmp/calib_fp32_gn
rm -rf "$work" && mkdir -p "$work"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version,clocks.max.sm --format=csv | tee "$work/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a "$work/gpu.txt"
source experiments/calibrate/cublas_path.sh
find_cublas
calib=$(calib_binary)
"$calib" --only fp32_gemm --out "$work/raw_h100_run4_fp32_gemm.csv" 2>&1 | tee "$work/fp32_gemm.log"
python3 experiments/calibrate/group_norm_rate.py --out "$work/group_norm_rate.json" 2>&1 | tee "$work/group_norm_rate.log"
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT" && tar -C "$work" -cf "$OUT/calib.tar" .
fi
