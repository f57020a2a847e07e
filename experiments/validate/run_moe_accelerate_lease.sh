#!/usr/bin/env bash
# transformers 5's mixture-of-experts parameters and accelerate's offload of them (nvidia-h100-x1, ~5 minutes):
# 1. the parameters (names, shapes) of the published MoE configs as transformers builds them (meta device):
#    tests/fixtures/hf_moe_parameters.jsonl;
# 2. decode under accelerate's own hooks (accelerate_decode.py) of Qwen3-30B-A3B's first 24 layers (random bf16
#    weights saved once, loaded back with from_pretrained(device_map="auto", max_memory={0: CAP})) at two caps, and
#    resident: results/validation/moe-accelerate.
#   OUT=$OUT bash experiments/validate/run_moe_accelerate_lease.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp/moe_acc}
mkdir -p "$out"
nvidia-smi > "$out/gpu.txt" 2>&1
python3 -c "import torch, transformers, accelerate; print('torch', torch.__version__, 'transformers', transformers.__version__, 'accelerate', accelerate.__version__)" | tee "$out/log.txt"
timeout 120 python3 experiments/frameworks/hf_moe_parameters.py --out "$out/hf_moe_parameters.jsonl" \
  traces/models/qwen3-30b-a3b.json traces/models/mixtral-8x7b.json traces/models/gpt-oss-20b.json \
  traces/models/gpt-oss-120b.json traces/models/deepseek-v3.json 2>&1 | grep -v -i warn | tee -a "$out/log.txt"
timeout 420 python3 experiments/validate/accelerate_decode.py --model experiments/llamacpp/models/qwen3-30b-a3b-L24.json \
  --caps 20GiB,10GiB --tokens 6 --warmup 2 --out "$out/accelerate_moe.jsonl" 2>&1 | grep -v -i warn | tee -a "$out/log.txt"
df -h /tmp | tee -a "$out/log.txt"
