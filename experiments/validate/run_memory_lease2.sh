#!/usr/bin/env bash
# The second memory call (nvidia-h100-x1, about 6 minutes), into $OUT:
#   train_memory_2.jsonl  issue 14's 36 training rows again under PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,
#                         then Llama-3.1-8B bf16 with checkpointing, SGD (fits) and AdamW (expected not to: its
#                         states and foreach temporary exceed 80 GB), under the default allocator
#   infer_memory_2.jsonl  inference peaks under expandable segments (the first call's 9 rows), at batch 4
#                         (Qwen3-4B, Llama-3.1-8B), and Llama-3.1-8B at batch 1
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-results/validation/new}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,memory.used,memory.total,driver_version --format=csv > "$out/nvidia_smi_2.txt" 2>&1
quiet() { grep -v -E "[Ww]arn"; }
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 experiments/validate/train_memory.py \
  --out /tmp/t_exp.jsonl 2>&1 | quiet
python3 experiments/validate/train_memory.py --models traces/models/llama-3.1-8b.json --setups bf16-sgd bf16-adamw \
  --ckpt on --shapes 1x1024 --out /tmp/t_llama.jsonl 2>&1 | quiet
cat /tmp/t_exp.jsonl /tmp/t_llama.jsonl > "$out/train_memory_2.jsonl"
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 experiments/validate/infer_memory.py --out /tmp/i_exp.jsonl 2>&1 | quiet
python3 experiments/validate/infer_memory.py --models traces/models/qwen3-4b.json traces/models/llama-3.1-8b.json \
  --batch 4 --prompts 2048 8192 --out /tmp/i_b4.jsonl 2>&1 | quiet
python3 experiments/validate/infer_memory.py --models traces/models/llama-3.1-8b.json --prompts 4096 16384 32768 \
  --out /tmp/i_llama.jsonl 2>&1 | quiet
cat /tmp/i_exp.jsonl /tmp/i_b4.jsonl /tmp/i_llama.jsonl > "$out/infer_memory_2.jsonl"
