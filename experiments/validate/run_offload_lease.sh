#!/usr/bin/env bash
# Optimizer offload to the CPU (torchao's CPUOffloadOptimizer, its own code staged by stage_torchao.sh) on the lent
# GPU, one call of about 8 minutes (nvidia-h100-x1; carry .ext):
#  1. calibration: cpu_offload_calib.py on synthetic parameters (fp32, bf16; 4 Ki - 64 Mi elements) -> cpu_offload_calib.jsonl
#  2. validation: train_memory.py with --optimizer-offload cpu and cpu-gradients (offload_gradients=True): Qwen3-0.6B
#     and 1.7B x {bf16 + AdamW, fp32 weights + bf16 autocast + AdamW} x checkpointing off/on, Qwen3-4B with
#     checkpointing, 1 x 1024 tokens, a process per row -> train_offload.jsonl
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-results/validation/new}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
test -f .ext/torchao-offload/torchao/optim/cpu_offload.py || { echo "stage torchao first (stage_torchao.sh) and carry .ext"; exit 2; }
cp .ext/torchao-offload/COMMIT "$out/torchao_commit.txt"
{ nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv; lscpu | grep -E "Model name|^CPU\(s\)|Thread|Socket|NUMA node\(s\)"; free -g; } > "$out/machine.txt" 2>&1
python3 -c 'import torch, transformers, sys; print(sys.version.split()[0], torch.__version__, transformers.__version__, torch.get_num_threads())' > "$out/versions.txt" 2>&1
[ -n "${SKIP_CALIB:-}" ] ||
  python3 experiments/validate/cpu_offload_calib.py --out "$out/cpu_offload_calib.jsonl" 2>&1 | grep -v -E "[Ww]arn" | tee "$out/calib.log"
# One process per row: CPUOffloadOptimizer's hooks (closures over the optimizer, held by the parameters) keep a
# row's model alive after it is dropped, so rows run in one process would carry the previous rows' weights.
row() {  # MODEL SETUP CKPT MODE
  python3 experiments/validate/train_memory.py --optimizer-offload "$4" --models "$1" --setups "$2" --ckpt "$3" \
    --shapes 1x1024 --warmup 2 --steps 3 --out "$out/train_offload.jsonl" 2>&1 | grep -v -E "[Ww]arn" | tee -a "$out/train_offload.log"
}
for mode in cpu cpu-gradients; do
  for model in qwen3-0.6b qwen3-1.7b; do
    for setup in bf16-adamw fp32-autocast-adamw; do
      for ckpt in off on; do row "traces/models/$model.json" "$setup" "$ckpt" "$mode"; done
    done
  done
  for setup in bf16-adamw fp32-autocast-adamw; do row traces/models/qwen3-4b.json "$setup" on "$mode"; done
done
