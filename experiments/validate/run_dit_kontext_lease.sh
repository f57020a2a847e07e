#!/usr/bin/env bash
# FLUX.1 Kontext's shape on a lent H100 (nvidia-h100-x1, ~2 minutes; carry .ext with ComfyUI-MultiGPU's distorch_2.py,
# see run_qwen_image_lease.sh): FLUX.1-dev's transformer (random bf16 weights) at 1024x1024 with a 1024x1024 reference
# image appended to its tokens as ComfyUI's Flux._forward appends ref_latents, resident and with DisTorch's own 4 GB of
# virtual VRAM on the cpu from pageable and pinned memory. -> kontext/dit_iteration.jsonl and its device map.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-results/validation/new}
mkdir -p "$out/kontext"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv | tee "$out/gpu.txt"
python3 experiments/validate/dit_iteration.py --model traces/models/flux.1-dev.json --distorch .ext/distorch_2.py \
  --tiny --resolutions 256x256 --reference 256x256 --allocations none --iterations 1 --warmup 1 --out /tmp/smoke \
  2>&1 | tail -2
python3 experiments/validate/dit_iteration.py --model traces/models/flux.1-dev.json --distorch .ext/distorch_2.py \
  --resolutions 1024x1024 --reference 1024x1024 --allocations none "#cuda:0;4.0;cpu" --host-memory pageable pinned \
  --iterations 3 --warmup 1 --out "$out/kontext" 2>&1 | grep -v -E "[Ww]arn" | tee "$out/kontext.log"
