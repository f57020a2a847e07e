#!/usr/bin/env bash
# Qwen3-30B-A3B's first 24 layers (random bf16 weights, transformers' Qwen3Moe) decoding in CUDA managed memory
# on one lent GPU: the weights start in host memory (managed_allocator.cu prefetches them there after random
# init), plain managed (faulted in on first touch), PreferredLocation=CPU and PreferredLocation=CPU + AccessedBy
# (read over PCIe), each under transformers 5's grouped_mm (its default) and eager experts implementations, one
# process per row so each starts from host memory; a resident row of each implementation on the same host
# first. Every row also writes the routing of its timed decodes (--routing-out) for `sim --routing replay:`.
# Writes $OUT/moe_um.jsonl, $OUT/routing.jsonl, $OUT/log.txt, $OUT/nvidia_smi.txt.
#   bash results/validation/moe-um/run.sh          (on the GPU machine, from the repository root)
# Safety: the allocator refuses managed allocations past 80% of the GPU memory free at its first call (the
# model is ~31 GB on an 80 GB H100): never oversubscribed. Every run is bounded in time (one 600 s call).
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:?}
export PYTHONUNBUFFERED=1
deadline=$((SECONDS + ${BUDGET_S:-545}))
model=experiments/llamacpp/models/qwen3-30b-a3b-L24.json
so=/tmp/tiersim_managed_alloc.so
log=$out/log.txt
nvidia-smi --query-gpu=index,name,memory.used,memory.free,memory.total,driver_version --format=csv \
  | tee "$out/nvidia_smi.txt"
nvcc -shared -Xcompiler -fPIC -cudart shared -o "$so" experiments/validate/managed_allocator.cu || exit 1
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" \
  | tee -a "$log"

bounded() {  # CAP_SECONDS decode_latency options...: stops at the cap or at the call's deadline
  local cap=$1 left=$((deadline - SECONDS))
  shift
  [ "$left" -lt "$cap" ] && cap=$left
  if [ "$cap" -lt 25 ]; then echo "SKIPPED (no time left): $*" | tee -a "$log"; return; fi
  echo "=== [$SECONDS s] cap $cap s: $*" | tee -a "$log"
  timeout "$cap" python3 experiments/validate/decode_latency.py "$@" 2>&1 | grep -v -E "[Ww]arn" | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  [ "$rc" -ne 0 ] && echo "EXIT $rc (124: timed out): $*" | tee -a "$log"
  nvidia-smi --query-gpu=memory.used,memory.free --format=csv,noheader | sed 's/^/after: /' | tee -a "$log"
}

# Smoke test: 2 layers, the routing recorder resident and managed (output discarded).
python3 - <<'EOF'
import json
d = json.load(open("experiments/llamacpp/models/qwen3-30b-a3b-L24.json"))
d["num_hidden_layers"] = 2
json.dump(d, open("/tmp/moe_l2.json", "w"))
EOF
bounded 60 --model /tmp/moe_l2.json --placements resident --tokens 2 --warmup 1 --experts-impl grouped_mm,eager \
  --no-routing-stats --routing-out /tmp/smoke_routing.jsonl --out /tmp/smoke.jsonl
bounded 60 --model /tmp/moe_l2.json --managed none --allocator-so "$so" --tokens 2 --warmup 1 \
  --experts-impl grouped_mm --no-routing-stats --routing-out /tmp/smoke_routing.jsonl --out /tmp/smoke.jsonl
n=$(wc -l < /tmp/smoke_routing.jsonl 2>/dev/null || echo 0)
echo "smoke: $(wc -l < /tmp/smoke.jsonl 2>/dev/null || echo 0) rows, $n routing lines" | tee -a "$log"
[ "$n" -eq 6 ] || { echo "smoke test failed" | tee -a "$log"; exit 1; }

common=(--model "$model" --tokens 8 --warmup 3 --prompt 128 --routing-out "$out/routing.jsonl" --out "$out/moe_um.jsonl")
bounded 90 "${common[@]}" --placements resident --experts-impl grouped_mm,eager --count-kernels
for row in none:grouped_mm none:eager accessed-by:grouped_mm prefer-cpu:grouped_mm accessed-by:eager prefer-cpu:eager; do
  bounded 110 "${common[@]}" --managed ${row%%:*} --allocator-so "$so" --experts-impl ${row#*:} --no-routing-stats --progress
done
echo "done at $SECONDS s" | tee -a "$log"
