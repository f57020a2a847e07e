#!/usr/bin/env bash
# The offloaded optimizer in a loop that does not synchronize between phases (nvidia-h100-x1, ~3 minutes; carry
# .ext): the same rows timed both ways in one process (step_ms with a synchronize at every phase's end, as
# train_offload.jsonl; unsynced_step_ms back to back), so the overlap sim train leaves out (the CPU steps of the first
# gradients starting while the GPU finishes backward) shows as their difference. -> train_offload_nosync.jsonl
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-results/validation/new}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
row() {  # MODEL SETUP CKPT MODE
  python3 experiments/validate/train_memory.py --optimizer-offload "$4" --models "$1" --setups "$2" --ckpt "$3" \
    --shapes 1x1024 --warmup 2 --steps 3 --no-phase-sync --out "$out/train_offload_nosync.jsonl" 2>&1 \
    | grep -v -E "[Ww]arn" | tee -a "$out/train_offload_nosync.log"
}
row traces/models/qwen3-0.6b.json bf16-adamw off cpu-gradients
row traces/models/qwen3-1.7b.json fp32-autocast-adamw off cpu-gradients
row traces/models/qwen3-4b.json bf16-adamw on cpu-gradients
row traces/models/qwen3-4b.json fp32-autocast-adamw on cpu-gradients
row traces/models/qwen3-4b.json bf16-adamw on none
