#!/usr/bin/env bash
# Issue 14's training-step validation rows on the lent GPU (one call, about 5 minutes of device time):
# 3 Qwen3 models x {fp32 weights + bf16 autocast + AdamW, bf16 + AdamW, bf16 + SGD} x checkpointing off/on
# x {1x1024, 4x512}, into $OUT/train_memory.jsonl with the log and nvidia-smi beside it. The allocator is left
# as found (PYTORCH_CUDA_ALLOC_CONF unset unless the caller sets it; recorded per row).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-results/validation/training/new}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,memory.used,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv \
  > "$out/nvidia_smi.txt" 2>&1
python3 -c 'import torch, transformers, sys; print(sys.version.split()[0], torch.__version__, transformers.__version__)' \
  > "$out/versions.txt" 2>&1
python3 experiments/validate/train_memory.py --out "$out/train_memory.jsonl" --budget-s "${BUDGET_S:-420}" "$@" 2>&1 \
  | grep -v -E "[Ww]arn" | tee "$out/train_memory.log"
