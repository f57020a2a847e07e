#!/usr/bin/env bash
# Inference memory of Mixtral in transformers 5 (nvidia-h100-x1, ~2 minutes): the installed modeling_mixtral.py and
# core_model_loading.py (read for the allocation sequence and the load path), then infer_memory.py on Mixtral-8x7B's
# first 4 layers (random bf16 weights built on the GPU, resident, grouped_mm experts) at 1k, 4k and 16k prompts, 8
# decoded tokens.  OUT=$OUT bash experiments/validate/run_infer_memory_mixtral_lease.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp/infer_mixtral}
mkdir -p "$out"
python3 - "$out" <<'PY'
import inspect, sys, os
import transformers
import transformers.models.mixtral.modeling_mixtral as mx
out = sys.argv[1]
open(os.path.join(out, "modeling_mixtral.py"), "w").write(inspect.getsource(mx))
try:
    import transformers.core_model_loading as cml
    open(os.path.join(out, "core_model_loading.py"), "w").write(inspect.getsource(cml))
except Exception as e:
    print("core_model_loading:", e)
PY
timeout 300 python3 experiments/validate/infer_memory.py --models experiments/validate/calibration_models/mixtral-8x7b-L4.json \
  --prompts 1024 4096 16384 --decode 8 --budget-s 240 --out "$out/infer_memory_mixtral.jsonl" 2>&1 | grep -v -i warn \
  | tee "$out/infer_memory_mixtral.log"
