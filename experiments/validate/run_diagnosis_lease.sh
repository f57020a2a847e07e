#!/usr/bin/env bash
# One device call (nvidia-h100-x1, about 3 minutes): two diagnoses, into $OUT.
#   managed_first_read.jsonl  the first GPU read of PreferredLocation=CPU managed memory by how it was filled
#   train_profile.jsonl       a training step's phases under torch.profiler: host issue against GPU busy time
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-results/validation/new}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,memory.used,memory.total,driver_version --format=csv > "$out/nvidia_smi.txt" 2>&1
nvcc -O2 -o /tmp/managed_first_read experiments/validate/managed_first_read.cu \
  && /tmp/managed_first_read | tee "$out/managed_first_read.jsonl"
python3 experiments/validate/train_profile.py --out "$out/train_profile.jsonl" 2>&1 | grep -v -E "[Ww]arn"
