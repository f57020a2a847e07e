#!/usr/bin/env bash
# LoRA fine-tuning steps through peft on the lent GPU (nvidia-h100-x1, about 3 minutes), into $OUT/train_lora.jsonl:
# Qwen3-0.6B/1.7B/4B/8B, bf16 weights + AdamW over the adapters, rank 16 on q_proj,v_proj (peft's default targets
# for Llama and Qwen2) and on all-linear, checkpointing off and on, 1 x 1024 tokens.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-results/validation/new}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -c 'import peft, torch, transformers; print("peft", peft.__version__, "torch", torch.__version__, "transformers", transformers.__version__)'
for targets in q_proj,v_proj all-linear; do
  python3 experiments/validate/train_memory.py --models traces/models/qwen3-0.6b.json traces/models/qwen3-1.7b.json \
    traces/models/qwen3-4b.json traces/models/qwen3-8b.json --setups bf16-adamw --shapes 1x1024 \
    --lora 16 --lora-targets "$targets" --out "$out/train_lora.jsonl" 2>&1 | grep -v -E "[Ww]arn"
done
