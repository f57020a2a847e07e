#!/bin/bash
# One device call (nvidia-h100-x1, about 5 minutes): a diffusion iteration's peak allocated AND reserved memory
# (torch.cuda.max_memory_allocated / max_memory_reserved after torch.cuda.empty_cache()), for tiersim's replay of the
# transient values through PyTorch's caching allocator: FLUX.1-dev bf16 and fp8 (1024x1024, 512x512), Qwen-Image bf16
# (1328x1328, cfg 2.5: the negative prompt a second forward), Wan2.1-T2V-14B bf16 (832x480, 17 and 33 frames, cfg 6),
# each resident and with DisTorch's 8 GB on the CPU (pinned: host memory kind does not change GPU memory).
# Needs .ext/distorch_2.py carried. Writes under $OUT.
#   bash experiments/validate/dit_reserved_lease.sh
# PART=2 (a second call): FLUX.1-dev from GGUF Q8_0 and Q4_K_S files as ComfyUI-GGUF runs them (1024x1024, resident and
# DisTorch's 8 GB; needs .ext/ComfyUI-GGUF/dequant.py carried: `git --git-dir=<ComfyUI-GGUF mirror> show
# 795e451:dequant.py`) and Wan2.1-T2V-14B at 81 frames resident; everything packed into $OUT/reserved2.tar (the tool
# brings back a few files). PART=3 (a third call): FLUX.1-dev fp8 again with --reload-weights.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/dit_reserved_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv > "$OUT/gpu.txt"
run() {  # name, then dit_iteration.py arguments
  local name=$1; shift
  python3 experiments/validate/dit_iteration.py --distorch .ext/distorch_2.py --iterations 2 --warmup 1 \
      --host-memory pinned --out "$OUT/$name" "$@" 2>&1 | grep -v -E "[Ww]arn" | tee "$OUT/$name.log"
}
if [ "${PART:-1}" = 3 ]; then
  # FLUX.1-dev fp8 with its weights moved to host memory and back after the conversion (--reload-weights: the GPU
  # holds them as ComfyUI's load from host memory leaves them).
  run flux_fp8_reload --model traces/models/flux.1-dev.json --weight-dtype fp8 --reload-weights \
      --resolutions 1024x1024 512x512 --allocations none "#cuda:0;8.0;cpu"
  cp "$OUT/flux_fp8_reload/dit_iteration.jsonl" "$OUT/dit_reserved3.jsonl"
  cp "$OUT/flux_fp8_reload/flux_device_map_1.json" "$OUT/reserved_flux_fp8_reload_flux_device_map_1.json"
  exit 0
fi
if [ "${PART:-1}" = 2 ]; then
  export PYTHONPATH="$PWD/experiments/validate/gguf_shim${PYTHONPATH:+:$PYTHONPATH}"
  final=$OUT
  OUT=/tmp/reserved2
  mkdir -p "$OUT"
  for ft in Q8_0 Q4_K_S; do
    run "gguf_$ft" --model traces/models/flux.1-dev.json --weight-dtype $ft --gguf-dequant .ext/ComfyUI-GGUF/dequant.py \
        --resolutions 1024x1024 --allocations none "#cuda:0;8.0;cpu"
  done
  run wan81 --model traces/models/wan2.1-t2v-14b.json --resolutions 832x480 --frames 81 --cfg 6 --allocations none
  for n in gguf_Q8_0 gguf_Q4_K_S wan81; do cat "$OUT/$n/dit_iteration.jsonl"; done > "$OUT/dit_reserved2.jsonl"
  tar -C "$OUT" -cf "$final/reserved2.tar" .
  ls -la "$OUT"
  exit 0
fi
run flux --model traces/models/flux.1-dev.json --resolutions 1024x1024 512x512 --allocations none "#cuda:0;8.0;cpu"
run flux_fp8 --model traces/models/flux.1-dev.json --weight-dtype fp8 --resolutions 1024x1024 512x512 \
    --allocations none "#cuda:0;8.0;cpu"
run qwen --model traces/models/qwen-image.json --resolutions 1328x1328 --cfg 2.5 --text-tokens 100 --negative-tokens 5 \
    --allocations none "#cuda:0;8.0;cpu"
run wan --model traces/models/wan2.1-t2v-14b.json --resolutions 832x480 --frames 17 33 --cfg 6 \
    --allocations none "#cuda:0;8.0;cpu"
for n in flux flux_fp8 qwen wan; do cat "$OUT/$n/dit_iteration.jsonl"; done > "$OUT/dit_reserved.jsonl"
for n in flux flux_fp8 qwen wan; do for f in "$OUT/$n"/*_device_map_*.json; do cp "$f" "$OUT/reserved_${n}_$(basename "$f")"; done; done
ls -la "$OUT"
