#!/usr/bin/env bash
# The Wan 2.1 VAE's decode as ComfyUI runs it (wan_vae_decode.py, running ComfyUI a125cd84's own comfy/ldm/wan/vae.py)
# at Wan's 480p (1-81 frames) and 720p (17 frames) and Qwen-Image's single frames (1024, 1328), with kernel tables of
# two sizes; then the calibration microbenchmark of cuDNN's bf16 convolutions (experiments/calibrate/conv_rate.py,
# shapes apart from the decoder's).
# Machine: a lent H100 (nvidia-h100-x1); ~3-4 minutes.
# Carry: .ext (.ext/comfy_wan_vae.py: `git show a125cd84:comfy/ldm/wan/vae.py` of Comfy-Org/ComfyUI).
# -> /tmp/wanvae/{wan_vae_decode.jsonl, wan_vae_decode_kernels.jsonl, conv_rate.json, conv_rate.csv, *.log, gpu.txt};
#    with OUT set, packed as $OUT/wanvae.tar.
#   OUT=$OUT bash experiments/validate/run_wan_vae_lease.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
d=/tmp/wanvae
rm -rf "$d" && mkdir -p "$d"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv | tee "$d/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())" \
  | tee -a "$d/gpu.txt"
python3 experiments/validate/wan_vae_decode.py --comfy-vae .ext/comfy_wan_vae.py --out "$d" \
  --kernels 832x480x5 1328x1328x1 2>&1 | grep -v -E "[Ww]arn" | tee "$d/wan_vae_decode.log"
(cd experiments/calibrate && python3 conv_rate.py --out "$d/conv_rate.json" --csv "$d/conv_rate.csv") 2>&1 \
  | tee "$d/conv_rate.log"
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT" && tar -C "$d" -cf "$OUT/wanvae.tar" .
fi
