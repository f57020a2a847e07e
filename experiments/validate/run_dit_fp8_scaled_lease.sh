#!/usr/bin/env bash
# Scaled fp8 weights (ComfyUI's *_fp8_scaled files, comfy/ops.py scaled_fp8_ops: each Linear's weight cast to bf16 and
# multiplied, or its input, by the weight's scale per forward) beside plain fp8 (fp8_e4m3fn), on a lent H100
# (nvidia-h100-x1, ~5 minutes; carry .ext with ComfyUI-MultiGPU's distorch_2.py, see run_qwen_image_lease.sh):
# Wan2.1-T2V-14B at 832x480, 17 and 33 frames, cfg 6 (the scaled format's usual model), resident and with DisTorch's
# own 8 GB of virtual VRAM on the cpu from pageable memory; FLUX.1-dev 1024x1024 scaled, resident.
# -> wan_fp8/, wan_fp8_scaled/, flux_fp8_scaled/ (dit_iteration.jsonl and device maps).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-results/validation/new}
mkdir -p "$out/wan_fp8" "$out/wan_fp8_scaled" "$out/flux_fp8_scaled"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv | tee "$out/gpu.txt"
python3 experiments/validate/dit_iteration.py --model traces/models/wan2.1-t2v-14b.json --distorch .ext/distorch_2.py \
  --weight-dtype fp8_scaled --tiny --resolutions 256x256 --frames 5 --cfg 6 --allocations none --iterations 1 --warmup 1 \
  --out /tmp/smoke 2>&1 | tail -2
for dt in fp8 fp8_scaled; do
  python3 experiments/validate/dit_iteration.py --model traces/models/wan2.1-t2v-14b.json --distorch .ext/distorch_2.py \
    --weight-dtype $dt --resolutions 832x480 --frames 17 33 --cfg 6 --allocations none "#cuda:0;8.0;cpu" \
    --host-memory pageable --iterations 3 --warmup 1 --out "$out/wan_$dt" 2>&1 | grep -v -E "[Ww]arn" | tee "$out/wan_$dt.log"
done
python3 experiments/validate/dit_iteration.py --model traces/models/flux.1-dev.json --distorch .ext/distorch_2.py \
  --weight-dtype fp8_scaled --resolutions 1024x1024 --allocations none --iterations 3 --warmup 1 \
  --out "$out/flux_fp8_scaled" 2>&1 | grep -v -E "[Ww]arn" | tee "$out/flux_fp8_scaled.log"
