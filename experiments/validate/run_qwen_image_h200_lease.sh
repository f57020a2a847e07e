#!/usr/bin/env bash
# Qwen-Image's job stages measured on a lent H200 (nvidia-h200, one call, ~6 minutes), with the H200 calibration their
# predictions need that h200-measured lacked. Carry .ext (bash experiments/validate/extract_comfyui.sh) and
# build/bin/tiersim_calib (rebuilt there with nvcc if it does not load).
# Calibration (not validation: shapes apart from the rows below):
#   tiersim_calib --only fp32_gemm   cuBLAS fp32 GEMMs without TF32 (ComfyUI's text encoders) -> calib.tar
#   conv_rate.py                     cuDNN bf16 convolutions (the VAE's layers)               -> calib.tar
#   cast_rate.py                     PyTorch's weight casts (fp8 -> bf16 / fp32, bf16 -> fp32)  -> calib.tar
# Validation (ComfyUI a125cd84's own code where it runs: qwen_image.py / llama.py, ldm/wan/vae.py):
#   qwen25_vl_encode.py  Qwen-Image's text encoder, bf16 and fp8_scaled, 39-1034 tokens, kernels at 134 -> te.tar
#   wan_vae_decode.py    the Wan 2.1 VAE (Qwen-Image's) at 1328x1328 and 1024x1024, one frame; Wan's 832x480x17 -> vae.tar
#   dit_iteration.py     Qwen-Image's DiT resident, 1328x1328 and 1024x1024, cfg 2.5, 100 / 5 text tokens -> dit.tar
#   OUT=$OUT bash experiments/validate/run_qwen_image_h200_lease.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/qwen_h200}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
work=/tmp/qwen_h200_work
rm -rf "$work" && mkdir -p "$work"/{te,calib,vae,dit}
pack() { tar -C "$work/$1" -cf "$out/$1.tar" . ; }
{
  nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version,clocks.max.sm --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"
  python3 -c "import transformers; print('transformers', transformers.__version__)"
} 2>&1 | tee "$work/gpu.txt"
cp "$work/gpu.txt" "$out/gpu.txt"

timeout 240 python3 experiments/validate/qwen25_vl_encode.py --comfyui .ext/comfyui --out "$work/te" --kernels \
  2>&1 | grep -v -E "[Ww]arn" | tee "$work/te/qwen25_vl_encode.log"
pack te

source experiments/calibrate/cublas_path.sh
find_cublas
calib=$(calib_binary)
timeout 120 "$calib" --only fp32_gemm --out "$work/calib/raw_h200_run5_fp32_gemm.csv" 2>&1 | tee "$work/calib/fp32_gemm.log"
(cd experiments/calibrate && timeout 120 python3 conv_rate.py --out "$work/calib/conv_rate.json" \
  --csv "$work/calib/conv_rate.csv") 2>&1 | tee "$work/calib/conv_rate.log"
(cd experiments/calibrate && timeout 60 python3 cast_rate.py --out "$work/calib/cast_rate.json") 2>&1 \
  | tee "$work/calib/cast_rate.log"
pack calib

timeout 120 python3 experiments/validate/wan_vae_decode.py --comfy-vae .ext/comfy_wan_vae.py --out "$work/vae" \
  --sizes 1328x1328x1 1024x1024x1 832x480x17 2>&1 | grep -v -E "[Ww]arn" | tee "$work/vae/wan_vae_decode.log"
pack vae

timeout 200 python3 experiments/validate/dit_iteration.py --model traces/models/qwen-image.json \
  --distorch .ext/distorch_2.py --resolutions 1328x1328 1024x1024 --cfg 2.5 --text-tokens 100 --negative-tokens 5 \
  --allocations none --iterations 3 --warmup 1 --out "$work/dit" 2>&1 | grep -v -E "[Ww]arn" | tee "$work/dit/dit_iteration.log"
pack dit
