#!/bin/bash
# One device call (nvidia-h100-x1): ComfyUI's decision whether a guided iteration's two prompts share a batch
# (comfy/samplers.py _calc_cond_batch), taken by the harness from its own free memory with part of the GPU held,
# for Wan2.1-T2V-14B (bf16, 832x480, 17 / 33 / 81 frames, cfg 6): resident, and DisTorch's 16 GB on the CPU from
# pageable and pinned memory. The held memory leaves about 6 GB free beside the weights on the GPU, so ComfyUI's
# rule batches 17 frames (1.5 x 3.0 GB) and runs 33 and 81 apart (1.5 x 5.4 and 12.7 GB).
# Needs .ext/distorch_2.py (results/frameworks/distorch/README.md) carried. Writes under $OUT.
#   bash experiments/validate/cond_batch_lease.sh
set -euo pipefail
OUT=${OUT:-/tmp/cond_batch_out}
mkdir -p "$OUT"
M=traces/models/wan2.1-t2v-14b.json
nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm,clocks.max.sm --format=csv > "$OUT/nvidia_smi.txt"
common=(--model $M --distorch .ext/distorch_2.py --resolutions 832x480 --frames 17 33 81 --cfg 6 --cond-batch comfy
        --iterations 3 --warmup 1)
# Resident: 28.58 GB of weights on the GPU; 49.9 GB held leaves about 6 GB free.
python3 experiments/validate/dit_iteration.py "${common[@]}" --allocations none --occupy-gb 49.9 --out "$OUT/resident" \
    2>&1 | tee "$OUT/resident.log"
# DisTorch #cuda:0;16.0;cpu: 11.44 GB on the GPU; 67.0 GB held leaves about 6 GB free.
python3 experiments/validate/dit_iteration.py "${common[@]}" --allocations "#cuda:0;16.0;cpu" --host-memory pageable pinned \
    --occupy-gb 67.0 --out "$OUT/distorch" 2>&1 | tee "$OUT/distorch.log"
cat "$OUT/resident/dit_iteration.jsonl" "$OUT/distorch/dit_iteration.jsonl" > "$OUT/wan_cond_batch_iteration.jsonl"
cp "$OUT/distorch/wan_device_map_0.json" "$OUT/wancb_wan_device_map_0.json"
