#!/usr/bin/env bash
# Wan's text encoder, umT5-XXL, as ComfyUI runs it (comfy_stages.py --stages umt5xxl: the rebuilt T5 with a bias in
# every block and attention masks, equal to ComfyUI's own t5.py bit for bit on the CPU: comfy_stages_check.py), fp16
# and fp8_e4m3fn weights, fp32 compute, 512 and 1024 tokens, with one profiled run each.
# Machine: a lent H100 (nvidia-h100-x1); ~2 minutes (building umT5-XXL twice with random weights).
# Carry: nothing beyond the repo.
# -> $OUT/umt5/{comfy_stages.jsonl, comfy_stages_kernels.jsonl, comfy_stages.log, gpu.txt}
#   OUT=$OUT bash experiments/validate/run_umt5_lease.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
d="${OUT:-/tmp}/umt5"
rm -rf "$d" && mkdir -p "$d"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv | tee "$d/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a "$d/gpu.txt"
python3 experiments/validate/comfy_stages.py --stages umt5xxl --t5-dtypes fp16 fp8_e4m3fn --iterations 5 --warmup 2 \
  --kernels --out "$d" 2>&1 | grep -v -E "[Ww]arn" | tee "$d/comfy_stages.log"
