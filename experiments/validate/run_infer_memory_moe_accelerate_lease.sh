#!/usr/bin/env bash
# Inference memory of a mixture of experts under accelerate's own offload (nvidia-h100-x1, ~3 minutes): infer_memory.py
# --accelerate on Qwen3-30B-A3B's first 24 layers (random bf16 weights built on the GPU, saved once per process, loaded
# back by from_pretrained(device_map="auto", max_memory={0: CAP})), caps of 20 and 12 GiB, 1k and 4k prompts, 8 decoded
# tokens. OUT=$OUT bash experiments/validate/run_infer_memory_moe_accelerate_lease.sh
#   -> $OUT/infer_memory_moe_accelerate_{20,12}gib.jsonl and .log
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp/infer_moe_acc}
mkdir -p "$out"
for cap in 20 12; do
  timeout 280 python3 experiments/validate/infer_memory.py --models experiments/llamacpp/models/qwen3-30b-a3b-L24.json \
    --prompts 1024 4096 --decode 8 --accelerate ${cap}GiB --budget-s 240 \
    --out "$out/infer_memory_moe_accelerate_${cap}gib.jsonl" 2>&1 | grep -v -i warn | tee "$out/infer_memory_moe_accelerate_${cap}gib.log"
  rm -rf /tmp/tiersim-infer-memory-*
done
