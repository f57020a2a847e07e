#!/usr/bin/env bash
# Makes the random-weight models: an F16 GGUF per model (make_random_gguf.py) and its quantizations
# (llama-quantize from carry/build). A file already there is kept, so a run cut short can simply be repeated.
#   make_models.sh [--models "qwen3-4b llama-3.1-8b"] [--quants "Q4_K_M Q8_0"] [--layers N]
#                  [--dir DIR] [--threads N] [--python PY]
#     --models   names in traces/models/ (default: qwen3-4b llama-3.1-8b)
#     --quants   llama-quantize types (default: Q4_K_M Q8_0)
#     --layers   cut every model to N layers (files get an -L<N> suffix)
#     --dir      default experiments/llamacpp/carry/models (ignored by git)
#     --threads  llama-quantize threads (default: all cores)
# Output: <dir>/<model>[-L<N>]-f16.gguf and <dir>/<model>[-L<N>]-<QUANT>.gguf, with timings.
# Llama-3.1 models get rope_freqs.weight (rope_type llama3, factor 8) as convert_hf_to_gguf.py writes it:
# tiersim's model JSON omits rope_scaling.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
models="qwen3-4b llama-3.1-8b"
quants="Q4_K_M Q8_0"
layers=""
dir=$here/carry/models
threads=$(nproc)
py=python3
while [ $# -gt 0 ]; do
  case $1 in
    --models) models=$2; shift ;;
    --quants) quants=$2; shift ;;
    --layers) layers=$2; shift ;;
    --dir) dir=$2; shift ;;
    --threads) threads=$2; shift ;;
    --python) py=$2; shift ;;
    *) echo "make_models.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
quantize=${LLAMA_QUANTIZE:-$here/carry/build/bin/llama-quantize}  # run_on_gpu.sh: the CPU build's
[ -x "$quantize" ] || { echo "make_models.sh: no $quantize: run build.sh first" >&2; exit 1; }
mkdir -p "$dir"
df -h "$dir" | tail -1 | awk '{print "make_models.sh: " $4 " free on " $6}'

for m in $models; do
  tag=$m${layers:+-L$layers}
  f16=$dir/$tag-f16.gguf
  if [ ! -s "$f16" ]; then
    extra=()
    [ -n "$layers" ] && extra+=(--layers "$layers")
    case $m in llama-3.1-*) extra+=(--llama3-rope-factor 8) ;; esac
    "$py" "$here/make_random_gguf.py" "$m" -o "$f16.part" "${extra[@]}"
    mv "$f16.part" "$f16"
  else
    echo "make_models.sh: $f16 already there"
  fi
  for q in $quants; do
    out=$dir/$tag-$q.gguf
    if [ -s "$out" ]; then echo "make_models.sh: $out already there"; continue; fi
    t0=$(date +%s.%N)
    "$quantize" "$f16" "$out.part" "$q" "$threads" > "$out.log" 2>&1 || { tail -20 "$out.log"; exit 1; }
    mv "$out.part" "$out"
    t1=$(date +%s.%N)
    echo "make_models.sh: $out: $(grep -E 'quant size' "$out.log" | sed 's/.*= *//'), quantized in $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") s with $threads threads"
  done
done
ls -la "$dir"
df -h "$dir" | tail -1 | awk '{print "make_models.sh: " $4 " left on " $6}'
