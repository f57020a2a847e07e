#!/usr/bin/env bash
# One device call (nvidia-h100-x1, about 5 minutes) for the memory work of session 10, into $OUT:
#   calib.csv / calib2.csv   tiersim_calib, two full runs (the managed-memory fresh first read among them)
#   train_calib.jsonl        training steps of the calibration models tiny-4 and tiny-24 (never validation rows):
#                            the host costs of a training step's forward, backward and optimizer
#   infer_memory.jsonl       inference peaks (prefill at long prompts, decode with a large KV cache)
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-results/validation/new}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,memory.used,memory.total,driver_version --format=csv > "$out/nvidia_smi.txt" 2>&1
source experiments/calibrate/cublas_path.sh
find_cublas
nvcc -O2 -std=c++17 -gencode=arch=compute_90,code=sm_90 calib/src/*.cu -lcublas -o /tmp/tiersim_calib \
  && for run in 1 2; do /tmp/tiersim_calib --out "$out/calib$run.csv" > "$out/calib$run.log" 2>&1; done
m=experiments/validate/calibration_models
python3 experiments/validate/train_memory.py --models $m/tiny-4.json $m/tiny-24.json --shapes 1x128 4x128 \
  --steps 10 --out "$out/train_calib.jsonl" 2>&1 | grep -v -E "[Ww]arn"
python3 experiments/validate/infer_memory.py --budget-s 200 --out "$out/infer_memory.jsonl" 2>&1 | grep -v -E "[Ww]arn"
