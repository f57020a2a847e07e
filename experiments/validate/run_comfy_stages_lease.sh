#!/usr/bin/env bash
# FLUX.1's stages around the DiT as ComfyUI runs them (comfy_stages.py): T5-XXL encode (fp16 and fp8_e4m3fn
# weights, fp32 compute) at 256 and 512 tokens, CLIP-L at 77 tokens, VAE decode (bf16) of 1024x1024, 512x512 and
# 1328x1328 images, in one piece; then one profiled run of each for its kernel table.
# Machine: a lent H100 (nvidia-h100-x1); ~2-3 minutes (most of it building T5-XXL twice with random weights).
# Carry: nothing beyond the repo (torch only; ComfyUI is not needed on the machine).
# -> /tmp/stages/{comfy_stages.jsonl, comfy_stages_kernels.jsonl, comfy_stages.log, gpu.txt}; with OUT set, packed as
#    $OUT/comfy_stages.tar (the device tool brings back only a few files).
#   OUT=$OUT bash experiments/validate/run_comfy_stages_lease.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
stages=/tmp/stages
rm -rf "$stages" && mkdir -p "$stages"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv | tee "$stages/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())" \
  | tee -a "$stages/gpu.txt"
# smoke (tiny configs, a few seconds), then the measurement; timed rows and the kernel tables in one pass
python3 experiments/validate/comfy_stages.py --tiny --iterations 1 --warmup 1 --out /tmp/stages_smoke 2>&1 | tail -3
python3 experiments/validate/comfy_stages.py --iterations 5 --warmup 2 --kernels --out "$stages" 2>&1 \
  | grep -v -E "[Ww]arn" | tee "$stages/comfy_stages.log"
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT" && tar -C "$stages" -cf "$OUT/comfy_stages.tar" .
fi
