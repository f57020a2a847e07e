#!/usr/bin/env bash
# Managed memory past the GPU's memory on a lent H200, safely (shared/docs/uvm.md "Measuring oversubscription"):
# the GPU is shrunk by a device-memory balloon (a plain cudaMalloc outside PyTorch, before any managed allocation),
# every managed allocation stays within 60% of host memory, few steps, a timeout on every run.
#   PART=calib OUT=... bash experiments/um/run_oversubscribe_lease.sh   tiersim_calib --only oversubscribe (the
#             calibration: balloon leaving 4 GiB, cyclic chunked reads/writes at 0.5-2x, prefetch), then the
#             Qwen3-8B rows (development set)
#   PART=8b   OUT=... bash ...                                          the Qwen3-8B rows alone, then tiersim_calib
#             --only zero_copy (GEMVs and products reading host memory, per kernel: the H200 had none)
#   PART=14b  OUT=... bash ...                                          the Qwen3-14B rows (held back: scored once)
#   PART=llama OUT=... bash ...                                         tiersim_calib --only oversubscribe_chunks,
#             then the Llama-3.1-8B rows (held back: scored once)
#   PART=census OUT=... bash ...                                        allocations per decode token (no balloon)
#   PART=sizes OUT=... bash ...                                         session 26: the second decode token's allocator
#             calls in order for Qwen3-8B and Llama-3.1-8B (no balloon), then the Qwen3-4B rows (held back)
#   PART=llama2 OUT=... bash ...                                        session 26: the Llama-2-7B rows (held back)
#   PART=s29 OUT=... bash ...                                           session 29: tiersim_calib --only
#             alloc_calls,remote_gemv (the allocator's calls beside live ranges; GEMVs on host-resident operands
#             over a width grid), then the allocator's calls of one Qwen2.5-7B token in order (no balloon)
#   PART=qwen2 OUT=... bash ...                                         session 29: the Qwen2.5-7B rows (held back:
#             a family, qwen2, never used in development)
#   PART=s30 OUT=... bash ...                                           session 30: tiersim_calib --only remote_gemv
#             --gemv-shapes (the shipped dense decoders' decode GEMVs that h200-s29 lacks:
#             experiments/calibrate/decoder_gemv_shapes.py), then the Qwen3-1.7B rows (held back: hidden 2048, where
#             cuBLAS's GEMVs on host inputs are slowest per byte)
#   PART=s30b OUT=... bash ...                                          session 30, one lease calibrated for its host
#             (results/validation/lease13-s30): lscpu, sdpa_shapes.py, Qwen3-8B resident (the calibration row
#             compare.py fits the lease's host costs to) and managed:none (a validation row), tiersim_calib --only
#             alloc_calls; then the Qwen3-0.6B rows (held back) and five Qwen3-8B rows (development) on that host
#   PART=s30c OUT=... bash ...                                          straight after s30b on the same machine: its
#             sdpa_shapes.json and the Qwen3-0.6B rows again (s30b's did not come back), in one tar
#   PART=s30d OUT=... bash ...                                          lease 14 calibrated for its host as s30b, then
#             Llama-3.1-8B and Qwen3-4B rows at a 1024-token prompt, held back for a later session, in one tar
#   PART=s31 OUT=... bash ...                                           session 31: tiersim_calib --only
#             oversubscribe_decoder, a decoder's weights as per-tensor ranges read by cuBLAS's GEMV and by the
#             streaming read, past a GPU left with 10 GiB (Qwen3-8B's layer) and 2.5 GiB (Qwen3-1.7B's), in one tar
#   PART=s31b OUT=... bash ...                                          session 31: the same with mode 3's advice
#             (PreferredLocation=CPU, then ReadMostly; --decoder-advice prefer_cpu_read_mostly), then Qwen3-32B rows held
#             back (never used in development: mode 1 and mode 3 at x1.5, mode 2 at x1.1), in one tar
#   PART=s31c OUT=... bash ...                                          session 31: tiersim_calib --only
#             alloc_calls,advised_cycle (an activation's whole cycle under each mode's advice), the host calibration
#             (lease 15), then Qwen3-8B mode 3 and mode 1 at x1.5 on that host (development rows), in one tar
#   PART=s31d OUT=... bash ...                                          session 31, after the GEMV eviction costs: lease
#             16 calibrated for its host, then rows held back and scored once with that model: Qwen3-14B, Qwen2.5-7B
#             and Llama-2-7B at a 512-token prompt, x1.3 (a ratio no set had), modes 1 and 3 (Qwen2.5-7B mode 2 too)
#   PART=s32 OUT=... bash ...                                           session 32, a diagnosis: step_profile.py's
#             kernel time per step by kind, mode 3 against mode 1 (advice on weights alone, later allocations alone),
#             Qwen3-4B mode 2 at prompts 128 and 1024 on one host, Qwen3-0.6B modes 3 and 1, in one tar
#   PART=s32b OUT=... bash ...                                          session 32, after the advised-cycle change: lease
#             17 calibrated for its host, then held-back rows of two new models (Qwen2.5-3B, Qwen2.5-14B) at x1.2 and
#             x1.75 with a 256-token prompt, modes 1-4, in one tar
#   PART=s32c OUT=... bash ...                                          session 32, a diagnosis: mode 2 at long prompts
#             (and mode 3) with the weights built under the mode's own advice beside the default build, in one tar
#   PART=s32d OUT=... bash ...                                          session 32: experiments/calibrate/remote_linear.py
#             (F.linear at batch 1 on a host-resident input, with and without a bias, Qwen2.5's q/k/v shapes)
#   PART=s32e OUT=... bash ...                                          session 32: the same with a fresh input vector
#             every call (remote_linear.py --fresh), beside a GPU with room and past a balloon leaving 1 GiB
#   PART=s33 OUT=... bash ...                                           prepared in session 32: the advised cycle past
#             a ballooned GPU, Qwen2.5-3B/14B's unmeasured decode GEMVs, the host-resident footprint test, in one tar
#   PART=modes24 OUT=... bash ...                                       tiersim_calib --only remote_gemv, then the
#             Qwen3-14B rows of modes 2 and 4 (held back), then Qwen3-8B mode 4 at 1.1 and 2.0
# Rows: seed 000's modes (experiments/um/oversubscribe_decode.py: 1 managed, 2 +PreferredLocation=CPU, 3 +ReadMostly,
# 4 PreferredLocation=CPU + AccessedBy), the advice on every allocation as the seed's allocator applies it, at GPU
# memory left = weights / r for r in 1.05 (mild: 8 tokens, to see the pattern), 1.1, 1.5 and 2.0.
# Writes $OUT/{calib_oversubscribe.csv, calib.log, rows_8b.jsonl | rows_14b.jsonl, log_*.txt, gpu.txt}.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:?}
part=${PART:?PART=calib, 8b, 14b, llama, census, modes24, sizes, llama2, s29, qwen2, s30, s30b, s30c, s30d, s31, s31b, s31c, s31d, s32, s32b, s32c, s32d, s32e or s33}
export PYTHONUNBUFFERED=1
deadline=$((SECONDS + ${BUDGET_S:-560}))
{
  nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
  grep MemTotal /proc/meminfo
  for p in /sys/module/nvidia_uvm/parameters/*; do echo "$(basename "$p") $(cat "$p" 2>/dev/null)"; done
} > "$out/gpu_$part.txt" 2>&1
so=/tmp/tiersim_managed_alloc.so
nvcc -shared -Xcompiler -fPIC -cudart shared -o "$so" experiments/validate/managed_allocator.cu || exit 1

bounded() {  # CAP_SECONDS LOG args...: one oversubscribe_decode run, stopped at the cap or at the call's deadline
  local cap=$1 log=$2 left=$((deadline - SECONDS))
  shift 2
  [ "$left" -lt "$cap" ] && cap=$left
  if [ "$cap" -lt 20 ]; then echo "SKIPPED (no time left): $*" >> "$log"; return; fi
  echo "=== [$SECONDS s] cap $cap s: $*" >> "$log"
  timeout "$cap" python3 experiments/um/oversubscribe_decode.py --allocator-so "$so" "$@" 2>&1 \
    | grep -v -E "[Ww]arn" >> "$log"
  local rc=${PIPESTATUS[0]}
  [ "$rc" -ne 0 ] && echo "EXIT $rc (124: timed out): $*" >> "$log"
  nvidia-smi --query-gpu=memory.used,memory.free --format=csv,noheader | sed 's/^/after: /' >> "$log"
}

rows() {  # MODEL WEIGHT_GIB OUTFILE LOG: the row set for one model
  local model=$1 w=$2 file=$3 log=$4 leave
  leave() { python3 -c "print(round($w / $1, 2))"; }
  bounded 100 "$log" --model "$model" --mode 1 --leave-gib "$(leave 1.05)" --tokens 8 --warmup 1 --label mild --out "$file"
  for r in 1.1 1.5 2.0; do bounded 100 "$log" --model "$model" --mode 1 --leave-gib "$(leave $r)" --out "$file"; done
  for r in 1.1 1.5 2.0; do bounded 100 "$log" --model "$model" --mode 3 --leave-gib "$(leave $r)" --out "$file"; done
  for r in 1.1 2.0; do bounded 80 "$log" --model "$model" --mode 2 --leave-gib "$(leave $r)" --out "$file"; done
  bounded 80 "$log" --model "$model" --mode 4 --leave-gib "$(leave 1.5)" --out "$file"
}

heldout_rows() {  # MODEL WEIGHT_GIB OUTFILE LOG: a fitting row (x0.9), then rows()
  bounded 80 "$4" --model "$1" --mode 1 --leave-gib "$(python3 -c "print(round($2 / 0.9, 2))")" --tokens 6 --warmup 1 \
    --label fit --out "$3"
  rows "$@"
}

calib_setup() {  # $calib: tiersim_calib with cuBLAS on the library path (built here if the carried one cannot run)
  source experiments/calibrate/cublas_path.sh
  find_cublas
  calib=$(calib_binary)
}

host_calibration() {  # what experiments/validate/compare.py calibrates a lease's host costs from: this host's CPU,
  # its SDPA new-length cost and the calibration row (Qwen3-8B resident) in $out/measured.jsonl
  { lscpu; grep MHz /proc/cpuinfo | sort | uniq -c | sort -rn | head -5; } > "$out/host_cpu.txt" 2>&1
  timeout 60 python3 experiments/validate/sdpa_shapes.py --out "$out/sdpa_shapes.json" 2>&1 | grep -v -E "warn" | tail -1
  echo "sdpa at $SECONDS s"
  timeout 90 python3 experiments/validate/decode_latency.py --model traces/models/qwen3-8b.json --placements resident \
    --count-kernels --out "$out/measured.jsonl" 2>&1 | grep -v -E "[Ww]arn" | tail -1
  echo "resident at $SECONDS s"
}

if [ "$part" = sizes ]; then
  # Development models only: what the allocator is called with, to set beside inference_allocations' sequence.
  for m in qwen3-8b llama-3.1-8b; do
    timeout 120 python3 experiments/um/allocator_census.py --model traces/models/$m.json --allocator-so "$so" \
      --sizes --tokens 4 --out "$out/allocator_sizes.jsonl" 2>&1 | grep -v -E "[Ww]arn" | tail -2
  done
  # Session 26's held-back model (never used in development): Qwen3-4B, 7.49 GiB of bf16 weights. Not printed.
  heldout_rows traces/models/qwen3-4b.json 7.49 "$out/rows_qwen3_4b.jsonl" "$out/log_qwen3_4b.txt"
  echo "qwen3-4b rows: $(wc -l < "$out/rows_qwen3_4b.jsonl" 2>/dev/null || echo 0); exits: $(grep -c EXIT "$out/log_qwen3_4b.txt")"
elif [ "$part" = s29 ]; then
  calib_setup
  timeout 150 "$calib" --only alloc_calls,remote_gemv --out "$out/calib_s29.csv" > "$out/calib_s29.log" 2>&1
  echo "calib exit $? at $SECONDS s"
  grep -E "um_(alloc|free)_call_live" "$out/calib_s29.log"
  # The GEMV grid again (repeatability: the first call's 1024 x 2048 took 12 ms, 2048 x 2048 0.9 ms).
  timeout 60 "$calib" --only remote_gemv --out "$out/calib_s29b.csv" > /dev/null 2>&1
  echo "second remote_gemv exit $? at $SECONDS s"
  [ -n "${SKIP_CENSUS:-}" ] || timeout 90 python3 experiments/um/allocator_census.py --model traces/models/qwen2.5-7b.json --allocator-so "$so" \
    --sizes --tokens 4 --out "$out/allocator_sizes_qwen2.jsonl" 2>&1 | grep -v -E "[Ww]arn" | tail -2
elif [ "$part" = s30 ]; then
  calib_setup
  python3 experiments/calibrate/decoder_gemv_shapes.py --measured results/calib/h200-s29/calib_s29.csv \
    > "$out/gemv_shapes_s30.txt" || exit 1
  timeout 150 "$calib" --only remote_gemv --gemv-shapes "$out/gemv_shapes_s30.txt" --out "$out/calib_s30.csv" \
    > "$out/calib_s30.log" 2>&1
  echo "calib exit $? at $SECONDS s"
  # Held back (never used in development): Qwen3-1.7B, 3.20 GiB of bf16 weights. Not printed.
  heldout_rows traces/models/qwen3-1.7b.json 3.20 "$out/rows_qwen3_1_7b.jsonl" "$out/log_qwen3_1_7b.txt"
  echo "qwen3-1.7b rows: $(wc -l < "$out/rows_qwen3_1_7b.jsonl" 2>/dev/null || echo 0); exits: $(grep -c EXIT "$out/log_qwen3_1_7b.txt")"
elif [ "$part" = s30b ]; then
  calib_setup
  host_calibration
  timeout 120 python3 experiments/validate/decode_latency.py --model traces/models/qwen3-8b.json --managed none \
    --allocator-so "$so" --tokens 8 --out "$out/measured.jsonl" 2>&1 | grep -v -E "[Ww]arn" | tail -1
  echo "managed at $SECONDS s"
  timeout 60 "$calib" --only alloc_calls --out "$out/calib_alloc_s30.csv" > "$out/calib_alloc_s30.log" 2>&1
  echo "alloc_calls exit $? at $SECONDS s"
  # Held back (never used in development): Qwen3-0.6B, 1.11 GiB of bf16 weights. Not printed.
  heldout_rows traces/models/qwen3-0.6b.json 1.11 "$out/rows_qwen3_0_6b.jsonl" "$out/log_qwen3_0_6b.txt"
  echo "qwen3-0.6b rows: $(wc -l < "$out/rows_qwen3_0_6b.jsonl" 2>/dev/null || echo 0); exits: $(grep -c EXIT "$out/log_qwen3_0_6b.txt")"
  # Development rows on this calibrated host: the fitting row, full thrash, and modes 2, 3, 4.
  f=rows_8b_lease13.jsonl l="$out/log_8b_lease13.txt"
  bounded 70 "$l" --model traces/models/qwen3-8b.json --mode 1 --leave-gib 16.96 --tokens 6 --warmup 1 --label fit --out "$out/$f"
  bounded 90 "$l" --model traces/models/qwen3-8b.json --mode 1 --leave-gib 10.17 --out "$out/$f"
  bounded 70 "$l" --model traces/models/qwen3-8b.json --mode 2 --leave-gib 13.87 --out "$out/$f"
  bounded 80 "$l" --model traces/models/qwen3-8b.json --mode 3 --leave-gib 10.17 --out "$out/$f"
  bounded 70 "$l" --model traces/models/qwen3-8b.json --mode 4 --leave-gib 10.17 --out "$out/$f"
  grep -E "mode [0-9] leave|EXIT|SKIPPED" "$l"
elif [ "$part" = s30c ]; then
  # The same lease as s30b, straight after it (whose Qwen3-0.6B rows and sdpa_shapes.json did not come back: the
  # device returns at most 8 files): both again, into one tar.
  timeout 60 python3 experiments/validate/sdpa_shapes.py --out "$out/sdpa_shapes.json" 2>&1 | grep -v -E "warn" | tail -1
  heldout_rows traces/models/qwen3-0.6b.json 1.11 "$out/rows_qwen3_0_6b.jsonl" "$out/log_qwen3_0_6b.txt"
  echo "qwen3-0.6b rows: $(wc -l < "$out/rows_qwen3_0_6b.jsonl" 2>/dev/null || echo 0); exits: $(grep -c EXIT "$out/log_qwen3_0_6b.txt")"
  (cd "$out" && tar czf s30c.tgz sdpa_shapes.json rows_qwen3_0_6b.jsonl log_qwen3_0_6b.txt gpu_s30c.txt && rm -f sdpa_shapes.json rows_qwen3_0_6b.jsonl log_qwen3_0_6b.txt)
elif [ "$part" = s30d ]; then
  # A second lease calibrated for its host (lease 14), then rows held back for a later session (not printed, not
  # scored in session 30): Llama-3.1-8B and Qwen3-4B at a 1024-token prompt, a fitting row and modes 1-4. Everything
  # in one tar (the device returns at most 8 files).
  calib_setup
  host_calibration
  timeout 60 "$calib" --only alloc_calls --out "$out/calib_alloc_s30d.csv" > "$out/calib_alloc_s30d.log" 2>&1
  echo "calibration done at $SECONDS s"
  for spec in "llama-3.1-8b 14.96 llama8b" "qwen3-4b 7.49 qwen3_4b"; do
    set -- $spec
    f="$out/rows_${3}_p1024.jsonl" l="$out/log_${3}_p1024.txt"
    leave() { python3 -c "print(round($2 / $1, 2))"; }
    bounded 80 "$l" --model traces/models/$1.json --mode 1 --prompt 1024 --leave-gib "$(leave 0.9 $2)" --tokens 6 --label fit --out "$f"
    bounded 90 "$l" --model traces/models/$1.json --mode 1 --prompt 1024 --leave-gib "$(leave 1.5 $2)" --out "$f"
    bounded 80 "$l" --model traces/models/$1.json --mode 2 --prompt 1024 --leave-gib "$(leave 1.1 $2)" --out "$f"
    bounded 80 "$l" --model traces/models/$1.json --mode 3 --prompt 1024 --leave-gib "$(leave 1.5 $2)" --out "$f"
    bounded 80 "$l" --model traces/models/$1.json --mode 4 --prompt 1024 --leave-gib "$(leave 1.5 $2)" --out "$f"
    echo "$1 rows: $(wc -l < "$f" 2>/dev/null || echo 0); exits: $(grep -c EXIT "$l")"
  done
  (cd "$out" && tar czf s30d.tgz --remove-files host_cpu.txt sdpa_shapes.json measured.jsonl calib_alloc_s30d.csv \
    calib_alloc_s30d.log rows_*_p1024.jsonl log_*_p1024.txt)
elif [ "$part" = s31 ]; then
  calib_setup
  for spec in "qwen3-8b 10 300" "qwen3-1.7b 2.5 150"; do
    set -- $spec
    timeout "$3" "$calib" --only oversubscribe_decoder --oversubscribe-leave "$2" \
      --gemv-shapes "experiments/um/layers/$1.txt" --out "$out/calib_decoder_$1.csv" > "$out/calib_decoder_$1.log" 2>&1
    echo "decoder $1 exit $? at $SECONDS s"
    grep -E "um_oversub_decoder" "$out/calib_decoder_$1.log" | awk '{print $2, $8, $9}'
  done
  (cd "$out" && tar czf s31.tgz --remove-files calib_decoder_*.csv calib_decoder_*.log)
elif [ "$part" = s31b ]; then
  calib_setup
  for spec in "qwen3-8b 10 150" "qwen3-1.7b 2.5 80"; do
    set -- $spec
    timeout "$3" "$calib" --only oversubscribe_decoder --oversubscribe-leave "$2" --decoder-advice prefer_cpu_read_mostly \
      --gemv-shapes "experiments/um/layers/$1.txt" --out "$out/calib_decoder_pcrm_$1.csv" > "$out/calib_decoder_pcrm_$1.log" 2>&1
    echo "decoder $1 exit $? at $SECONDS s"
    grep -E "um_oversub_decoder" "$out/calib_decoder_pcrm_$1.log" | awk '{print $2, $8, $9}'
  done
  # Held back (never used in development): Qwen3-32B, 61.03 GiB of bf16 weights. Not printed.
  f="$out/rows_qwen3_32b.jsonl" l="$out/log_qwen3_32b.txt"
  bounded 170 "$l" --model traces/models/qwen3-32b.json --mode 1 --leave-gib 40.69 --tokens 4 --out "$f"
  bounded 150 "$l" --model traces/models/qwen3-32b.json --mode 3 --leave-gib 40.69 --tokens 4 --out "$f"
  bounded 130 "$l" --model traces/models/qwen3-32b.json --mode 2 --leave-gib 55.48 --tokens 4 --out "$f"
  echo "qwen3-32b rows: $(wc -l < "$f" 2>/dev/null || echo 0); exits: $(grep -c EXIT "$l")"
  (cd "$out" && tar czf s31b.tgz --remove-files calib_decoder_pcrm_*.csv calib_decoder_pcrm_*.log rows_qwen3_32b.jsonl log_qwen3_32b.txt)
elif [ "$part" = s31c ]; then
  calib_setup
  timeout 90 "$calib" --only alloc_calls,advised_cycle --out "$out/calib_advised_s31c.csv" > "$out/calib_advised_s31c.log" 2>&1
  echo "calib exit $? at $SECONDS s"
  grep -E "um_advised_cycle.*_all|_call_live.*_all" "$out/calib_advised_s31c.log"
  host_calibration
  f=rows_8b_lease15.jsonl l="$out/log_8b_lease15.txt"
  bounded 90 "$l" --model traces/models/qwen3-8b.json --mode 3 --leave-gib 10.17 --out "$out/$f"
  bounded 90 "$l" --model traces/models/qwen3-8b.json --mode 1 --leave-gib 10.17 --out "$out/$f"
  grep -E "mode [0-9] leave|EXIT|SKIPPED" "$l"
  (cd "$out" && tar czf s31c.tgz --remove-files calib_advised_s31c.csv calib_advised_s31c.log host_cpu.txt sdpa_shapes.json \
    measured.jsonl "$f" log_8b_lease15.txt)
elif [ "$part" = s31d ]; then
  calib_setup
  host_calibration
  timeout 60 "$calib" --only alloc_calls --out "$out/calib_alloc_s31d.csv" > "$out/calib_alloc_s31d.log" 2>&1
  echo "calibration done at $SECONDS s"
  f="$out/rows_p512_x1_3.jsonl" l="$out/log_p512_x1_3.txt"
  for spec in "qwen3-14b 27.51" "qwen2.5-7b 14.18" "llama-2-7b 12.55"; do
    set -- $spec
    g=$(python3 -c "print(round($2 / 1.3, 2))")
    bounded 80 "$l" --model traces/models/$1.json --mode 1 --prompt 512 --leave-gib "$g" --out "$f"
    bounded 70 "$l" --model traces/models/$1.json --mode 3 --prompt 512 --leave-gib "$g" --out "$f"
    [ "$1" = qwen2.5-7b ] && bounded 60 "$l" --model traces/models/$1.json --mode 2 --prompt 512 --leave-gib "$g" --out "$f"
  done
  echo "rows: $(wc -l < "$f" 2>/dev/null || echo 0); exits: $(grep -c EXIT "$l")"
  (cd "$out" && tar czf s31d.tgz --remove-files host_cpu.txt sdpa_shapes.json measured.jsonl calib_alloc_s31d.csv \
    calib_alloc_s31d.log rows_p512_x1_3.jsonl log_p512_x1_3.txt)
elif [ "$part" = s32 ]; then
  # Session 32, a diagnosis (profiled runs are not timings, and none is a validation row): where a token's GPU time
  # goes (experiments/um/step_profile.py: kernel time per step by kind) under mode 3 against mode 1 (Qwen3-8B at
  # x1.5), with mode 3's advice on the weights alone and on the later allocations alone (--activation-advice), the
  # weights-only variant also unprofiled; Qwen3-4B mode 2 at x1.1 with prompts of 128 and 1024 on one host (lease 14's
  # alternating tokens); Qwen3-0.6B modes 3 and 1 at x1.5 (mode 3 slower than mode 1 there).
  { lscpu; grep MHz /proc/cpuinfo | sort | uniq -c | sort -rn | head -5; } > "$out/host_cpu.txt" 2>&1
  python3 - <<'PY' 2>&1 | grep -v -i warn | tail -3
import sys, torch
sys.path.insert(0, "experiments/um")
from step_profile import StepProfiler
r = StepProfiler(); x = torch.randn(256, 256, device="cuda")
r.start(3)
for _ in range(3):
    (x @ x).sum().item(); r.advance(1)
r.stop()
s = r.summary(); print("profiler self-test:", len(s), "steps", [(d["launches"], sorted(d["by_kind"])) for d in s])
PY
  f="$out/rows_profile_s32.jsonl" l="$out/log_profile_s32.txt" p="$out/profile_s32.jsonl"
  m8=traces/models/qwen3-8b.json
  bounded 90 "$l" --model $m8 --mode 1 --leave-gib 10.17 --tokens 3 --label s32 --profile "$p" --out "$f"
  bounded 90 "$l" --model $m8 --mode 3 --leave-gib 10.17 --tokens 3 --label s32 --profile "$p" --out "$f"
  bounded 90 "$l" --model $m8 --mode 3 --activation-advice 1 --leave-gib 10.17 --tokens 3 --label s32 --profile "$p" --out "$f"
  bounded 90 "$l" --model $m8 --mode 1 --activation-advice 3 --leave-gib 10.17 --tokens 3 --label s32 --profile "$p" --out "$f"
  bounded 90 "$l" --model $m8 --mode 3 --activation-advice 1 --leave-gib 10.17 --tokens 4 --label s32-timed --out "$f"
  for pr in 128 1024; do
    bounded 70 "$l" --model traces/models/qwen3-4b.json --mode 2 --prompt $pr --leave-gib 6.81 --tokens 5 --label s32 \
      --profile "$p" --out "$f"
  done
  for md in 3 1; do
    bounded 50 "$l" --model traces/models/qwen3-0.6b.json --mode $md --leave-gib 0.74 --tokens 4 --label s32 \
      --profile "$p" --out "$f"
  done
  echo "rows: $(wc -l < "$f" 2>/dev/null || echo 0); profiles: $(wc -l < "$p" 2>/dev/null || echo 0); exits: $(grep -c EXIT "$l")"
  grep -E "mode [0-9] leave|EXIT|SKIPPED|Error|Traceback" "$l" | tail -20
  (cd "$out" && tar czf s32.tgz --remove-files host_cpu.txt rows_profile_s32.jsonl log_profile_s32.txt profile_s32.jsonl)
elif [ "$part" = s32b ]; then
  # Session 32, after the advised-cycle change: a lease calibrated for its host (lease 17: lscpu, SDPA, the Qwen3-8B
  # resident calibration row, its allocator calls and advised cycles), then rows held back and scored once with that
  # model: two models never measured here (Qwen2.5-3B, whose k and v GEMVs no calibration has; Qwen2.5-14B), at ratios
  # no set had (x1.2 and x1.75) and a 256-token prompt, modes 1-4. Nothing of these rows is printed.
  calib_setup
  host_calibration
  timeout 60 "$calib" --only alloc_calls,advised_cycle --out "$out/calib_alloc_s32b.csv" > "$out/calib_alloc_s32b.log" 2>&1
  echo "calibration done at $SECONDS s"
  f="$out/rows_s32b.jsonl" l="$out/log_s32b.txt"
  wgib() { python3 -c "
import json; c = json.load(open('traces/models/$1.json'))
h, i, L, v = c['hidden_size'], c['intermediate_size'], c['num_hidden_layers'], c['vocab_size']
q, kv, d = c['num_attention_heads'], c['num_key_value_heads'], c['head_dim']
p = v * h * (1 if c['tie_word_embeddings'] else 2) + L * (h * (q + 2 * kv) * d + q * d * h + 3 * h * i)
print(round(p * 2 / 2**30 / $2, 2))"; }
  m=traces/models/qwen2.5-3b.json
  bounded 60 "$l" --model $m --mode 1 --prompt 256 --leave-gib "$(wgib qwen2.5-3b 1.2)" --out "$f"
  bounded 60 "$l" --model $m --mode 3 --prompt 256 --leave-gib "$(wgib qwen2.5-3b 1.2)" --out "$f"
  bounded 50 "$l" --model $m --mode 2 --prompt 256 --leave-gib "$(wgib qwen2.5-3b 1.2)" --out "$f"
  bounded 50 "$l" --model $m --mode 4 --prompt 256 --leave-gib "$(wgib qwen2.5-3b 1.75)" --out "$f"
  m=traces/models/qwen2.5-14b.json
  bounded 90 "$l" --model $m --mode 1 --prompt 256 --tokens 3 --leave-gib "$(wgib qwen2.5-14b 1.2)" --out "$f"
  bounded 90 "$l" --model $m --mode 2 --prompt 256 --tokens 3 --leave-gib "$(wgib qwen2.5-14b 1.75)" --out "$f"
  bounded 100 "$l" --model $m --mode 3 --prompt 256 --tokens 3 --leave-gib "$(wgib qwen2.5-14b 1.75)" --out "$f"
  echo "rows: $(wc -l < "$f" 2>/dev/null || echo 0); exits: $(grep -c EXIT "$l")"
  (cd "$out" && tar czf s32b.tgz --remove-files host_cpu.txt sdpa_shapes.json measured.jsonl calib_alloc_s32b.csv \
    calib_alloc_s32b.log rows_s32b.jsonl log_s32b.txt)
elif [ "$part" = s32c ]; then
  # Session 32, a diagnosis (not validation rows): are mode 2's fast tokens at long prompts (lease 14, diagnosis-s32)
  # GPU pages the weights' build left behind? The same runs with the weights built under the mode's own advice
  # (--build-advice 2: PreferredLocation=CPU while they are made, as a checkpoint loaded through the seed's allocator
  # is) beside the default build, on one host; and mode 3 so built.
  f="$out/rows_build_s32c.jsonl" l="$out/log_build_s32c.txt"
  m4=traces/models/qwen3-4b.json
  bounded 70 "$l" --model $m4 --mode 2 --prompt 1024 --leave-gib 6.81 --tokens 5 --label s32c --out "$f"
  bounded 80 "$l" --model $m4 --mode 2 --build-advice 2 --prompt 1024 --leave-gib 6.81 --tokens 5 --label s32c --out "$f"
  bounded 100 "$l" --model traces/models/qwen2.5-14b.json --mode 2 --build-advice 2 --prompt 256 --leave-gib 15.72 \
    --tokens 4 --label s32c --out "$f"
  bounded 90 "$l" --model traces/models/qwen3-8b.json --mode 3 --build-advice 2 --leave-gib 10.17 --tokens 4 --label s32c \
    --out "$f"
  echo "rows: $(wc -l < "$f" 2>/dev/null || echo 0); exits: $(grep -c EXIT "$l")"
  grep -E "mode [0-9] leave|EXIT|SKIPPED|Error|Traceback" "$l" | tail -20
  (cd "$out" && tar czf s32c.tgz --remove-files rows_build_s32c.jsonl log_build_s32c.txt)
elif [ "$part" = s32d ]; then
  # Session 32: PyTorch's Linear at batch 1 with a host-resident input, with and without a bias (Qwen2.5's q, k and v
  # shapes: experiments/calibrate/remote_linear.py), beside a GPU with room.
  timeout 120 python3 experiments/calibrate/remote_linear.py --allocator-so "$so" --out "$out/remote_linear.csv" 2>&1 \
    | grep -v -i warn | tail -30
elif [ "$part" = s33 ]; then
  # Prepared in session 32, for the next lease: the advised activation cycle past a ballooned GPU being evicted
  # (tiersim_calib --only advised_cycle_pressed), the decode GEMVs of Qwen2.5-3B and -14B no calibration has
  # (experiments/calibrate/gemv_shapes_qwen2.5.txt, from decoder_gemv_shapes.py), and a Linear on host-resident weights
  # against how much host-resident weight is read in all (remote_linear.py --footprint-gib), in one tar.
  calib_setup
  timeout 150 "$calib" --only advised_cycle_pressed --oversubscribe-leave 8 --out "$out/calib_pressed_s33.csv" \
    > "$out/calib_pressed_s33.log" 2>&1
  echo "advised_cycle_pressed exit $? at $SECONDS s"
  timeout 120 "$calib" --only remote_gemv --gemv-shapes experiments/calibrate/gemv_shapes_qwen2.5.txt \
    --out "$out/calib_gemv_s33.csv" > "$out/calib_gemv_s33.log" 2>&1
  echo "remote_gemv exit $? at $SECONDS s"
  timeout 200 python3 experiments/calibrate/remote_linear.py --allocator-so "$so" --footprint-gib 0.05,0.5,2,8 \
    --out "$out/remote_linear_footprint.csv" 2>&1 | grep -v -i warn | tail -6
  (cd "$out" && tar czf s33.tgz --remove-files calib_pressed_s33.csv calib_pressed_s33.log calib_gemv_s33.csv \
    calib_gemv_s33.log remote_linear_footprint.csv)
elif [ "$part" = s32e ]; then
  # Session 32, a diagnosis: the same Linears with a fresh input vector every call (advised PreferredLocation=CPU
  # alone, written just before, as mode 2's activations are), beside a GPU with room and past a balloon leaving 1 GiB.
  timeout 100 python3 experiments/calibrate/remote_linear.py --allocator-so "$so" --fresh --out "$out/remote_linear_fresh.csv" 2>&1 \
    | grep -v -i warn | grep nobias | tail -12
  timeout 100 python3 experiments/calibrate/remote_linear.py --allocator-so "$so" --fresh --leave-gib 1 \
    --out "$out/remote_linear_fresh_balloon.csv" 2>&1 | grep -v -i warn | grep nobias | tail -12
elif [ "$part" = qwen2 ]; then
  # Held back (never used in development): Qwen2.5-7B, 14.18 GiB of bf16 weights. Not printed.
  heldout_rows traces/models/qwen2.5-7b.json 14.18 "$out/rows_qwen2_5_7b.jsonl" "$out/log_qwen2_5_7b.txt"
  echo "qwen2.5-7b rows: $(wc -l < "$out/rows_qwen2_5_7b.jsonl" 2>/dev/null || echo 0); exits: $(grep -c EXIT "$out/log_qwen2_5_7b.txt")"
elif [ "$part" = llama2 ]; then
  # Session 26's second held-back model: Llama-2-7B (12.55 GiB of bf16 weights, multi-head attention). Not printed.
  heldout_rows traces/models/llama-2-7b.json 12.55 "$out/rows_llama2_7b.jsonl" "$out/log_llama2_7b.txt"
  echo "llama-2-7b rows: $(wc -l < "$out/rows_llama2_7b.jsonl" 2>/dev/null || echo 0); exits: $(grep -c EXIT "$out/log_llama2_7b.txt")"
elif [ "$part" = calib ]; then
  calib_setup
  timeout 200 "$calib" --only oversubscribe --oversubscribe-leave 4 --out "$out/calib_oversubscribe.csv" \
    > "$out/calib.log" 2>&1
  echo "calib exit $? at $SECONDS s"
  grep -E "um_oversub" "$out/calib.log" | awk '{printf "%s %s %.3f ms %s GB/s\n", $1, $2, $6/1000, $8}'
  rows traces/models/qwen3-8b.json 15.26 "$out/rows_8b.jsonl" "$out/log_8b.txt"
  grep -E "mode [0-9] leave|EXIT|SKIPPED|balloon" "$out/log_8b.txt"
elif [ "$part" = 8b ]; then
  rows traces/models/qwen3-8b.json 15.26 "$out/rows_8b.jsonl" "$out/log_8b.txt"
  grep -E "mode [0-9] leave|EXIT|SKIPPED|balloon|Error" "$out/log_8b.txt"
  left=$((deadline - SECONDS))
  if [ "$left" -gt 60 ]; then
    calib_setup
    timeout $((left - 10)) "$calib" --only zero_copy --out "$out/calib_zero_copy.csv" > "$out/calib_zero_copy.log" 2>&1
    echo "zero_copy exit $? at $SECONDS s"
  fi
elif [ "$part" = census ]; then
  # The allocator's calls per decode token with the model fitting the GPU (experiments/um/allocator_census.py).
  for m in qwen3-8b llama-3.1-8b qwen3-14b; do
    timeout 120 python3 experiments/um/allocator_census.py --model traces/models/$m.json --allocator-so "$so" \
      --out "$out/allocator_census.jsonl" 2>&1 | grep -v -E "[Ww]arn" | tail -2
  done
elif [ "$part" = llama ]; then
  # First the fault path by how much one kernel touches (tiersim_calib --only oversubscribe_chunks, balloon leaving
  # 4 GiB). Then session 25's held-back model, never used in development: Llama-3.1-8B (14.96 GiB of bf16 weights),
  # the same row set. Nothing of its rows is printed (they are read when scored, once).
  calib_setup
  timeout 120 "$calib" --only oversubscribe_chunks --oversubscribe-leave 4 --out "$out/calib_oversubscribe_chunks.csv" \
    > "$out/calib_chunks.log" 2>&1
  echo "chunks exit $? at $SECONDS s"
  grep -E "um_oversub_chunk" "$out/calib_chunks.log" | awk '{print $2, $6, $7, $8, $9}'
  rows traces/models/llama-3.1-8b.json 14.96 "$out/rows_llama8b.jsonl" "$out/log_llama8b.txt"
  echo "llama rows: $(wc -l < "$out/rows_llama8b.jsonl" 2>/dev/null || echo 0); exits: $(grep -c EXIT "$out/log_llama8b.txt")"
elif [ "$part" = modes24 ]; then
  # Session 25: the GEMV kernels of modes 2 and 4 per shape (tiersim_calib --only remote_gemv: input, weight or both
  # host-resident), then the Qwen3-14B rows of modes 2 and 4 the first 14B call ran out of time for (held back like
  # the others: not printed), then Qwen3-8B mode 4 at two more ratios (development set).
  calib_setup
  timeout 90 "$calib" --only remote_gemv --out "$out/calib_remote_gemv.csv" > "$out/calib_remote_gemv.log" 2>&1
  echo "remote_gemv exit $? at $SECONDS s"
  for r in 1.1 2.0; do bounded 130 "$out/log_14b_modes24.txt" --model traces/models/qwen3-14b.json --mode 2 \
    --leave-gib "$(python3 -c "print(round(27.51 / $r, 2))")" --out "$out/rows_14b_modes24.jsonl"; done
  bounded 100 "$out/log_14b_modes24.txt" --model traces/models/qwen3-14b.json --mode 4 --leave-gib 18.34 \
    --out "$out/rows_14b_modes24.jsonl"
  echo "14b rows: $(wc -l < "$out/rows_14b_modes24.jsonl" 2>/dev/null || echo 0); exits: $(grep -c EXIT "$out/log_14b_modes24.txt")"
  for r in 1.1 2.0; do bounded 70 "$out/log_8b_mode4.txt" --model traces/models/qwen3-8b.json --mode 4 \
    --leave-gib "$(python3 -c "print(round(15.26 / $r, 2))")" --out "$out/rows_8b_mode4.jsonl"; done
  grep -E "mode [0-9] leave|EXIT|SKIPPED|balloon|Error" "$out/log_8b_mode4.txt"
else
  # Held back: nothing of these rows is printed (the log and rows stay in $OUT, read only when they are scored).
  rows traces/models/qwen3-14b.json 27.51 "$out/rows_14b.jsonl" "$out/log_14b.txt"
  echo "14b rows: $(wc -l < "$out/rows_14b.jsonl" 2>/dev/null || echo 0); exits: $(grep -c EXIT "$out/log_14b.txt")"
fi
echo "done at $SECONDS s"
