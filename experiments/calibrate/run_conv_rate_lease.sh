#!/usr/bin/env bash
# Calibration: cuDNN's bf16 convolutions as PyTorch calls them (conv_rate.py: generic shapes and the Wan 2.1 VAE
# decoder's kinds at latent sizes apart from the validation's), and, for the record, the Wan decode's PyTorch ops by
# input shape at 832x480x5 (wan_vae_decode.py --ops, one size, not timed).
# Machine: a lent H100 (nvidia-h100-x1); ~2 minutes. Carry: .ext (.ext/comfy_wan_vae.py, for the op table).
# -> /tmp/conv/{conv_rate.json, conv_rate.csv, conv_rate.log, wan_vae_decode_ops.jsonl, gpu.txt}; with OUT set,
#    packed as $OUT/conv.tar.
#   OUT=$OUT bash experiments/calibrate/run_conv_rate_lease.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
d=/tmp/conv
rm -rf "$d" && mkdir -p "$d"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv | tee "$d/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())" \
  | tee -a "$d/gpu.txt"
(cd experiments/calibrate && python3 conv_rate.py --out "$d/conv_rate.json" --csv "$d/conv_rate.csv") 2>&1 \
  | tee "$d/conv_rate.log"
python3 experiments/validate/wan_vae_decode.py --comfy-vae .ext/comfy_wan_vae.py --out "$d/ops" --sizes 832x480x5 \
  --iterations 1 --warmup 1 --ops 832x480x5 2>&1 | tail -2
cp "$d/ops/wan_vae_decode_ops.jsonl" "$d/" 2>/dev/null
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT" && tar -C "$d" -cf "$OUT/conv.tar" .
fi
