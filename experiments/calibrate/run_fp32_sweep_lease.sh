#!/usr/bin/env bash
# The fp32 GEMM sweep (tiersim_calib --only fp32_gemm: cuBLAS without TF32 at M 16-2048 on Qwen3-14B's and
# Qwen3-8B's shapes -> gpu.fp32_gemm_efficiency by output elements), then, as validation on the same machine, FLUX's
# and Wan's text encoders as ComfyUI runs them (experiments/validate/comfy_stages.py: T5-XXL fp16/fp8 at 256 and 512
# tokens, CLIP-L at 77, umT5-XXL at 512; shapes of none of which the sweep measures) with kernel tables.
# Machine: a lent H200 (nvidia-h200), ~3 minutes. Carry build/bin/tiersim_calib (rebuilt there with nvcc if it does
# not load).   OUT=$OUT bash experiments/calibrate/run_fp32_sweep_lease.sh   -> $OUT/{calib.tar, stages.tar, gpu.txt}
# PART=calib: the sweep alone (the stages were measured by an earlier call, with the sweep's powers of two only).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/fp32_sweep}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
work=/tmp/fp32_sweep_work
rm -rf "$work" && mkdir -p "$work"/{calib,stages}
{
  nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version,clocks.max.sm --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
} 2>&1 | tee "$out/gpu.txt"
source experiments/calibrate/cublas_path.sh
find_cublas
calib=$(calib_binary)
timeout 240 "$calib" --only fp32_gemm --out "$work/calib/raw_h200_run7_fp32_gemm.csv" 2>&1 | tee "$work/calib/fp32_gemm.log"
tar -C "$work/calib" -cf "$out/calib.tar" .
[ "${PART:-}" = calib ] && exit 0
timeout 240 python3 experiments/validate/comfy_stages.py --stages t5xxl clip_l umt5xxl --umt5-tokens 512 \
  --iterations 5 --warmup 2 --kernels --out "$work/stages" 2>&1 | grep -v -E "[Ww]arn" | tee "$work/stages/comfy_stages.log"
tar -C "$work/stages" -cf "$out/stages.tar" .
