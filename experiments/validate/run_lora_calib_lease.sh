#!/usr/bin/env bash
# LoRA's host costs on the calibration models (never validation rows; nvidia-h100-x1, about 2 minutes), into
# $OUT/train_lora_calib.jsonl: tiny-4 and tiny-24, bf16 + AdamW, 1x128 and 4x128, checkpointing off, without LoRA and
# with rank 16 on q_proj,v_proj and on all-linear, all in one process per set on one host.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-results/validation/new}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
m=experiments/validate/calibration_models
common=(--models $m/tiny-4.json $m/tiny-24.json --setups bf16-adamw --ckpt off --shapes 1x128 4x128 --steps 10
        --out "$out/train_lora_calib.jsonl")
python3 experiments/validate/train_memory.py "${common[@]}" 2>&1 | grep -v -E "[Ww]arn"
for targets in q_proj,v_proj all-linear; do
  python3 experiments/validate/train_memory.py "${common[@]}" --lora 16 --lora-targets "$targets" 2>&1 | grep -v -E "[Ww]arn"
done
