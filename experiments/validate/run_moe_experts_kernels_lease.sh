#!/usr/bin/env bash
# transformers' Qwen3-MoE launches and host syncs per decode step by experts implementation (moe_experts_kernels.py):
# a smoke run of tiny models, then the Qwen3-30B-A3B-shaped ones at 2 and 4 layers. nvidia-h100-x1, ~1-2 minutes.
#   OUT=$OUT bash experiments/validate/run_moe_experts_kernels_lease.sh    -> $OUT/moe_experts_kernels.{json,log}
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp/moe_kernels}
mkdir -p "$out"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" | tee "$out/moe_experts_kernels.log"
python3 experiments/validate/moe_experts_kernels.py --tiny --out /tmp/moe_tiny.json 2>&1 | grep -v -i warn | tail -8
python3 experiments/validate/moe_experts_kernels.py --out "$out/moe_experts_kernels.json" 2>&1 | grep -v -i warn | tee -a "$out/moe_experts_kernels.log"
