#!/usr/bin/env bash
# Inference memory under accelerate's own offload (infer_memory.py --accelerate): Qwen3-8B (random bf16 weights built
# on the GPU, saved once, loaded back by from_pretrained(device_map="auto", max_memory={0: CAP}) for each row) at an
# 8 GiB cap, prompts of 4096 and 16384 tokens, 8 decoded tokens. nvidia-h100-x1, ~2 minutes. The 12 GiB rows: the same
# infer_memory.py command with --accelerate 12GiB --budget-s 240 --out $OUT/infer_memory_accelerate_12gib.jsonl.
#   OUT=$OUT bash experiments/validate/run_infer_memory_accelerate_lease.sh  -> $OUT/infer_memory_accelerate.{jsonl,log}
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp/infer_acc}
mkdir -p "$out"
python3 -c "import torch, transformers, accelerate; print('torch', torch.__version__, 'transformers', transformers.__version__, 'accelerate', accelerate.__version__)" | tee "$out/infer_memory_accelerate.log"
timeout 360 python3 experiments/validate/infer_memory.py --models traces/models/qwen3-8b.json --prompts 4096 16384 \
  --decode 8 --accelerate 8GiB --budget-s 300 --out "$out/infer_memory_accelerate.jsonl" 2>&1 | grep -v -i warn \
  | tee -a "$out/infer_memory_accelerate.log"
