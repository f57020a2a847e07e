#!/bin/bash
# One device call: SDPA's rate at diffusion transformers' attention shapes (experiments/calibrate/sdpa_rate.py), as
# the JSON summary and tiersim_calib's raw CSV rows that tiersim_fit --extra reads (gpu.attention_efficiency).
#   OUT=... bash experiments/calibrate/sdpa_lease.sh
set -euo pipefail
OUT=${OUT:-/tmp/sdpa_out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/nvidia_smi.txt"
cd experiments/calibrate
python3 sdpa_rate.py --out "$OUT/sdpa_rate.json" --csv "$OUT/attention.csv" 2>&1 | tee "$OUT/sdpa_rate.log"
