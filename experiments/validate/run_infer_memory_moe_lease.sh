#!/usr/bin/env bash
# Inference memory of a mixture of experts in transformers 5 (nvidia-h100-x1, ~3 minutes): the installed
# integrations/moe.py and modeling_qwen3_moe.py (the source the allocation sequence is read from), then
# infer_memory.py on Qwen3-30B-A3B's first 24 layers (random bf16 weights, resident, grouped_mm) at 1k, 4k and 16k
# prompts and 8 decoded tokens.  OUT=$OUT bash experiments/validate/run_infer_memory_moe_lease.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp/infer_moe}
mkdir -p "$out"
python3 - "$out" <<'PY'
import inspect, sys, os
import torch, transformers
import transformers.integrations.moe as moe
import transformers.models.qwen3_moe.modeling_qwen3_moe as q
out = sys.argv[1]
open(os.path.join(out, "moe.py"), "w").write(inspect.getsource(moe))
open(os.path.join(out, "modeling_qwen3_moe.py"), "w").write(inspect.getsource(q))
print("torch", torch.__version__, "transformers", transformers.__version__)
PY
timeout 420 python3 experiments/validate/infer_memory.py --models experiments/llamacpp/models/qwen3-30b-a3b-L24.json \
  --prompts 1024 4096 16384 --decode 8 --budget-s 360 --out "$out/infer_memory_moe.jsonl" 2>&1 | grep -v -i warn \
  | tee "$out/infer_memory_moe.log"
