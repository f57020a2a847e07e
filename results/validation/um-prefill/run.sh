#!/usr/bin/env bash
# Prompts read from host memory: Qwen3-8B (random bf16 weights, transformers 5) through the per-tensor
# cudaMallocManaged allocator, its weights advised PreferredLocation=CPU + AccessedBy=GPU and prefetched to host
# memory, prefill at 512, 2048 and 4096 tokens (one process each), then 2 decode steps, the whole decode run
# twice (fresh, then warm: the second prefill is the one with the process's one-time costs paid).
# Writes $OUT/um_prefill.jsonl, $OUT/log.txt, $OUT/nvidia_smi.txt.
#   bash results/validation/um-prefill/run.sh          (on the GPU machine, from the repository root)
# Safety: the allocator refuses managed allocations past 80% of the GPU memory free at its first call (the model
# is 16.4 GB on an 80 GB H100): never oversubscribed. Each process is bounded in time.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:?}
export PYTHONUNBUFFERED=1
so=/tmp/tiersim_managed_alloc.so
nvidia-smi --query-gpu=index,name,memory.used,memory.free,memory.total,driver_version --format=csv \
  | tee "$out/nvidia_smi.txt"
nvcc -shared -Xcompiler -fPIC -cudart shared -o "$so" experiments/validate/managed_allocator.cu || exit 1
for prompt in 512 2048 4096; do
  echo "=== prompt $prompt" | tee -a "$out/log.txt"
  timeout 170 python3 experiments/validate/decode_latency.py --model traces/models/qwen3-8b.json \
    --managed accessed-by --allocator-so "$so" --prompt "$prompt" --warmup 1 --tokens 2 \
    --out "$out/um_prefill.jsonl" 2>&1 | grep -v -i warn | tee -a "$out/log.txt"
  echo "exit ${PIPESTATUS[0]}" | tee -a "$out/log.txt"
done
