#!/usr/bin/env bash
# FLUX's VAE as ComfyUI runs it for FLUX.1 Kontext's job, on a lent H200 (nvidia-h200, one call, ~2 minutes): the
# reference image's encode at FluxKontextImageScale's sizes and the decode at 1024 and 1328 square
# (experiments/validate/ae_encode.py: ComfyUI a125cd84's own model.py Encoder / Decoder, bf16, random weights), with
# one encode's kernel table; then, as a diagnosis of the Qwen-Image DiT's H200 rows (results/validation/qwen-image-h200),
# where one resident forward's kernel time goes by kind (dit_profile.py, 1024x1024, cfg 1, the prompt's 100 tokens). Carry .ext (bash experiments/validate/extract_comfyui.sh).
#   OUT=$OUT bash experiments/validate/run_kontext_h200_lease.sh   -> $OUT/{ae.tar, dit_profile.json, gpu.txt}
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/kontext_h200}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
work=/tmp/kontext_h200_work
rm -rf "$work" && mkdir -p "$work/ae"
{
  nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version,clocks.max.sm --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"
} 2>&1 | tee "$out/gpu.txt"
timeout 240 python3 experiments/validate/ae_encode.py --comfyui .ext/comfyui --out "$work/ae" --kernels 2>&1 \
  | grep -v -E "[Ww]arn" | tee "$work/ae/ae_encode.log"
tar -C "$work/ae" -cf "$out/ae.tar" .
timeout 240 python3 experiments/validate/dit_profile.py --model traces/models/qwen-image.json --resolution 1024x1024 \
  --cfg 1 --text-tokens 100 --out "$out/dit_profile.json" 2>&1 | grep -v -E "[Ww]arn" | tail -20
