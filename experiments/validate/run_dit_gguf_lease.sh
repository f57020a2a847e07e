#!/usr/bin/env bash
# GGUF weights (ComfyUI-GGUF 795e451: each Linear's weight dequantized to bf16 on the GPU per forward) on a lent H100
# (nvidia-h100-x1, ~5 minutes, well under 7: calibration ~1, smoke ~0.5, each FLUX.1-dev run ~1.5: build + 6
# configurations x 4 forwards of 0.3-1 s). Carry .ext, holding ComfyUI-MultiGPU's distorch_2.py (see
# run_qwen_image_lease.sh) and ComfyUI-GGUF's dequant.py (see experiments/validate/gguf_shim/README.md); the gguf
# package is the shim in experiments/validate/gguf_shim, put on PYTHONPATH here.
# 1. the dequantization calibration (experiments/calibrate/gguf_dequant_rate.py) -> gguf_dequant.json
# 2. a --tiny smoke of the harness in Q4_K_S
# 3. FLUX.1-dev (cfg 1) in Q8_0 and in Q4_K_S at 1024x1024 and 512x512, resident and with DisTorch's virtual VRAM
#    4 and 8 GB on the cpu from pageable memory -> flux_q8_0/, flux_q4_k_s/ (dit_iteration.jsonl, device maps) + .log
# The device tool brings back a limited number of files: with OUT set, everything is written under /tmp and packed
# into $OUT/gguf_lease.tar at the end. SKIP_CALIB=1 skips step 1 (a repeat of the FLUX runs alone).
set -uo pipefail
cd "$(dirname "$0")/../.."
final=${OUT:-}
out=${OUT:+/tmp/gguf_lease}
out=${out:-results/validation/new}
mkdir -p "$out/flux_q8_0" "$out/flux_q4_k_s"
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD/experiments/validate/gguf_shim${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv | tee "$out/gpu.txt"
[ "${SKIP_CALIB:-0}" = 1 ] ||
python3 experiments/calibrate/gguf_dequant_rate.py --dequant .ext/ComfyUI-GGUF/dequant.py --out "$out/gguf_dequant.json" \
  2>&1 | grep -v -E "[Ww]arn" | tee "$out/gguf_dequant.log"
python3 experiments/validate/dit_iteration.py --model traces/models/flux.1-dev.json --distorch .ext/distorch_2.py \
  --weight-dtype Q4_K_S --gguf-dequant .ext/ComfyUI-GGUF/dequant.py --tiny --resolutions 256x256 \
  --allocations none "#cuda:0;4.0;cpu" --host-memory pageable --iterations 1 --warmup 1 --out /tmp/smoke_gguf \
  2>&1 | tail -3
for ft in Q8_0 Q4_K_S; do
  d=flux_$(echo "$ft" | tr 'A-Z' 'a-z')
  python3 experiments/validate/dit_iteration.py --model traces/models/flux.1-dev.json --distorch .ext/distorch_2.py \
    --weight-dtype "$ft" --gguf-dequant .ext/ComfyUI-GGUF/dequant.py --resolutions 1024x1024 512x512 \
    --allocations none "#cuda:0;4.0;cpu" "#cuda:0;8.0;cpu" --host-memory pageable \
    --iterations 3 --warmup 1 --out "$out/$d" 2>&1 | grep -v -E "[Ww]arn" | tee "$out/$d.log"
done
[ -n "$final" ] && tar -C "$out" -cf "$final/gguf_lease.tar" .
