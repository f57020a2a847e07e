#!/usr/bin/env bash
# Runs the real decode measurements on a GPU machine, writing JSON lines and logs into $OUT (default
# results/validation/new/). Each part stays well under the 10-minute limit of one call.
#   lease-8b, lease-14b   (2 GPUs; the current procedure, results/validation/lease5) calib's CUDA
#                         microbenchmarks, the framework microbenchmarks (SDPA at new lengths, copy issue),
#                         the calibration models, then every configuration of one model in both regimes
#   fresh-8b, fresh-14b, fresh-peer   the same without calib, with trace capture (lease3, lease4-peer)
#   hosttime              where the host time of a step goes (lease2-hosttime)
#   gpu-side, read-mostly calib with a cold pageable footprint, host copy rates, the GPU timeline of
#                         offloaded steps; the ReadMostly diagnosis (lease9)
#   capture-8b, llama     (2 GPUs, two calls back to back: one lease) Qwen3-8B captured and measured
#                         under every strategy; Llama-3.1-8B, an architecture no calibration used (lease10)
#   h100-a, h100-b        (1 H100) another GPU kind calibrated and validated (lease12)
#   part1..3, capture, gemv   the first validation lease (lease1: regimes not yet separated) and the
#                         framework-free GEMV chain
set -euo pipefail
cd "$(dirname "$0")/../.."
part=${1:?usage: run_on_gpu.sh part1|part2|part3|capture|gemv|hosttime|fresh-8b|fresh-14b|fresh-peer|lease-8b|lease-14b|pageable-ahead|gpu-side|read-mostly|capture-8b|llama|peer-overlap|h100-a|h100-b}
out=${OUT:-results/validation/new}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
source experiments/calibrate/cublas_path.sh
so=/tmp/tiersim_managed_alloc.so
nvcc -shared -Xcompiler -fPIC -cudart shared -o "$so" experiments/validate/managed_allocator.cu
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv | tee -a "$out/nvidia_smi_$part.txt"
run() { python3 experiments/validate/decode_latency.py "$@" 2>&1 | { grep -v -E "Warning|warn\(" || true; }; }
offload_set() {  # placements for one model: resident, then K layers off in each variant
  local s="resident"
  for k in 4 12 24; do s="$s,offload:$k:0:pinned,offload:$k:1:pinned,offload:$k:0:pageable"; done
  echo "$s,offload:24:0:cuda:1,offload:24:1:cuda:1"
}
pinned_set() {  # resident, then the last 4/12/24 layers from pinned memory, on demand and one ahead
  local s="resident"
  for k in 4 12 24; do s="$s,offload:$k:0:pinned,offload:$k:1:pinned"; done
  echo "$s"
}
peer_set() {  # the last 12/24 layers + head on cuda:1, on demand and one ahead
  echo "offload:12:0:cuda:1,offload:12:1:cuda:1,offload:24:0:cuda:1,offload:24:1:cuda:1"
}
framework_runs() {  # TAG: the framework microbenchmarks (SDPA at new lengths, copy issue) and a captured
  # Qwen3-8B run in both regimes, into $out/qwen3-8b-TAG{,-warm}.trace
  python3 experiments/validate/sdpa_shapes.py --out "$out/sdpa_shapes.json" 2>&1 | grep -v -E "warn|Warn" || true
  python3 experiments/validate/copy_issue.py --out "$out/copy_issue.json" 2>&1 | grep -v -E "warn" || true
  python3 experiments/validate/capture_trace.py --model traces/models/qwen3-8b.json \
      --header experiments/validate/headers/qwen3-8b.header --steps 3 --out "$out/qwen3-8b-$1.trace" \
      --out-warm "$out/qwen3-8b-$1-warm.trace" --summary "$out/qwen3-8b-capture.json" 2>&1 | grep -v -E "warn" || true
}
host_cpu() {  # FILE: this host's CPU and its clock
  { lscpu; grep MHz /proc/cpuinfo | sort | uniq -c | sort -rn | head -5; } > "$1" 2>&1 || true
}
calibration_models() {  # FILE: the framework calibration models (never validation rows), both regimes
  for c in tiny-4 tiny-24; do
    run --model experiments/validate/calibration_models/$c.json --placements resident --count-kernels \
        --tokens 24 --warmup 4 --out "$1"
  done
}
managed_unbounded() {  # MODEL: the four advices, unbounded in time (the first lease's parts; ReadMostly
  # at allocation never finished there, hence bounded_managed below)
  local adv
  for adv in none read-mostly prefer-cpu accessed-by; do
    run --model traces/models/$1.json --managed $adv --allocator-so "$so" --tokens 8 --out "$out/measured.jsonl"
  done
}
bounded_managed() {  # SECONDS MODEL ADVICE [decode_latency options]: a managed run that may not finish
  local seconds=$1 m=$2 adv=$3
  shift 3
  timeout "$seconds" python3 experiments/validate/decode_latency.py --model traces/models/$m.json --managed $adv \
      --allocator-so "$so" --out "$out/measured.jsonl" "$@" 2>&1 | grep -v -E "warn" \
    || echo "managed:$adv on $m did not finish within $seconds s" | tee -a "$out/unfinished.txt"
}
case "$part" in
  part1)
    find_cublas
    if [ -x build/bin/tiersim_calib ] && ! ldd build/bin/tiersim_calib | grep -q "not found"; then
      build/bin/tiersim_calib --out "$out/calib_check.csv" > "$out/calib_check.log" 2>&1 || echo "calib check failed"
    fi
    for m in tiny-4 tiny-24; do
      run --model experiments/validate/calibration_models/$m.json --placements resident --count-kernels \
          --tokens 48 --warmup 8 --out "$out/calibration.jsonl"
    done
    run --model traces/models/qwen3-8b.json --placements "$(offload_set)" --count-kernels --out "$out/measured.jsonl"
    managed_unbounded qwen3-8b
    ;;
  part2)
    run --model traces/models/qwen3-8b.json --placements "offload:24:0:cuda:1,offload:24:1:cuda:1" --out "$out/measured.jsonl"
    managed_unbounded qwen3-8b
    run --model traces/models/qwen3-14b.json --placements "$(offload_set)" --count-kernels --out "$out/measured.jsonl"
    managed_unbounded qwen3-14b
    ;;
  capture)
    # Real decode steps captured into the trace format (headers from `sim gen`, made where sim runs).
    for m in qwen3-8b qwen3-14b; do
      python3 experiments/validate/capture_trace.py --model traces/models/$m.json \
          --header experiments/validate/headers/$m.header --steps 3 --out "$out/$m-h200.trace" \
          --summary "$out/$m-capture.json" 2>&1 | grep -v -E "warn" || true
    done
    ;;
  gemv)
    # The framework-free harness: a chain of cuBLAS GEMVs shaped like Qwen3-8B, then calib's link and
    # HBM figures on the same lease.
    nvcc -O2 -std=c++17 -gencode=arch=compute_90,code=sm_90 experiments/validate/gemv_chain.cu -lcublas -o /tmp/gemv_chain
    shape="--layers 36 --hidden 4096 --inter 12288 --heads 32 --kv-heads 8 --head-dim 128 --steps 8"
    cfgs="resident"
    for k in 4 12 24; do cfgs="$cfgs,copy:$k:0:pinned,copy:$k:1:pinned,copy:$k:0:pageable"; done
    timeout 240 /tmp/gemv_chain $shape --config "$cfgs" | tee -a "$out/gemv_chain.jsonl"
    for adv in none prefer-cpu accessed-by read-mostly; do
      timeout 45 /tmp/gemv_chain $shape --managed $adv | tee -a "$out/gemv_chain.jsonl" \
        || echo "managed:$adv did not finish within 45 s" | tee -a "$out/unfinished_gemv.txt"
    done
    if [ -x build/bin/tiersim_calib ]; then
      find_cublas
      build/bin/tiersim_calib --only host_link,device --out "$out/calib_check_gemv.csv" > /dev/null 2>&1 || echo "calib check failed"
    fi
    ;;
  hosttime)
    # Where an eager decode step's host time goes (module hooks, no profiler), and this host's CPU.
    host_cpu "$out/host_cpu.txt"
    python3 experiments/validate/host_timeline.py --model experiments/validate/calibration_models/tiny-4.json \
        --steps 3 --out "$out/host_timeline_tiny-4.json" 2>&1 | grep -v -E "warn" || true
    python3 experiments/validate/host_timeline.py --model traces/models/qwen3-8b.json \
        --placements resident,offload:4:0:pinned,offload:12:0:pinned,offload:24:0:pinned --steps 5 \
        --out "$out/host_timeline_qwen3-8b.json" --cprofile "$out/cprofile_qwen3-8b.txt" 2>&1 | grep -v -E "warn" || true
    ;;
  fresh-8b|fresh-14b)
    # Every configuration in both regimes (fresh sequence lengths, then warm: see decode_latency.py),
    # the framework calibration models, the trace capture and the managed rows, on one lease.
    m=${part#fresh-}; model=traces/models/qwen3-$m.json
    host_cpu "$out/host_cpu_$part.txt"
    if [ "$m" = 8b ]; then
      calibration_models "$out/calibration.jsonl"
      python3 experiments/validate/sdpa_shapes.py --out "$out/sdpa_shapes.json" 2>&1 | grep -v -E "warn" || true
    fi
    run --model $model --placements "$(pinned_set),offload:4:0:pageable,offload:12:0:pageable,offload:24:0:pageable" \
        --count-kernels --slow-tokens 6 --out "$out/measured.jsonl"
    python3 experiments/validate/capture_trace.py --model $model --header experiments/validate/headers/qwen3-$m.header \
        --steps 3 --out "$out/qwen3-$m-h200.trace" --out-warm "$out/qwen3-$m-h200-warm.trace" \
        --summary "$out/qwen3-$m-capture.json" 2>&1 | grep -v -E "warn" || true
    for adv in none prefer-cpu accessed-by; do bounded_managed 120 qwen3-$m $adv --tokens 8; done
    if [ "$m" = 14b ] && [ -x build/bin/tiersim_calib ]; then
      find_cublas
      timeout 100 build/bin/tiersim_calib --only managed --out "$out/calib_managed.csv" > "$out/calib_managed.log" 2>&1 \
        || echo "calib managed re-run failed"
    fi
    ;;
  fresh-peer)
    # The donor-GPU rows (2 GPUs), both regimes, with this lease's framework calibration models.
    calibration_models "$out/calibration_peer.jsonl"
    for m in 8b 14b; do
      run --model traces/models/qwen3-$m.json --count-kernels --out "$out/measured_peer.jsonl" \
          --placements "resident,offload:12:0:cuda:1,offload:12:1:cuda:1,offload:24:0:cuda:1,offload:24:1:cuda:1"
    done
    ;;
  lease-8b|lease-14b)
    # One machine calibrated and validated in two calls (2 GPUs): calib's CUDA microbenchmarks, the
    # framework microbenchmarks (SDPA at new lengths, copy issue) and calibration models in the first,
    # then every configuration of the model, both regimes, peer and managed rows included.
    m=${part#lease-}; model=traces/models/qwen3-$m.json
    host_cpu "$out/host_cpu_$part.txt"
    if [ "$m" = 8b ]; then
      if [ -x build/bin/tiersim_calib ]; then
        find_cublas
        timeout 150 build/bin/tiersim_calib --out "$out/calib_raw.csv" > "$out/calib.log" 2>&1 || echo "calib failed"
      fi
      python3 experiments/validate/sdpa_shapes.py --out "$out/sdpa_shapes.json" 2>&1 | grep -v -E "warn|Warn" || true
      python3 experiments/validate/copy_issue.py --out "$out/copy_issue.json" 2>&1 | grep -v -E "warn" || true
      calibration_models "$out/calibration.jsonl"
    fi
    all="$(pinned_set),offload:12:0:cuda:1,offload:12:1:cuda:1,offload:24:0:cuda:1,offload:24:1:cuda:1"
    run --model $model --placements "$all,offload:4:0:pageable,offload:12:0:pageable,offload:24:0:pageable" \
        --count-kernels --slow-tokens 6 --out "$out/measured.jsonl"
    for adv in none prefer-cpu accessed-by; do bounded_managed 100 qwen3-$m $adv --tokens 8; done
    ;;
  pageable-ahead)
    # Pageable host memory one layer ahead (not in the other leases), with each model's resident row
    # (the lease's calibration row), then a time-bounded retry of ReadMostly through the allocator.
    for m in 8b 14b; do
      run --model traces/models/qwen3-$m.json --count-kernels --slow-tokens 6 --out "$out/measured.jsonl" \
          --placements "resident,offload:4:1:pageable,offload:12:1:pageable,offload:24:1:pageable"
    done
    bounded_managed 150 qwen3-8b read-mostly --tokens 4 --warmup 1
    ;;
  gpu-side)
    # (2 GPUs, build/bin carried) calib with the cold pageable footprint; the framework's own host
    # copies hot and cold; what the GPU does in offloaded steps (copy durations), Qwen3-8B, warm.
    find_cublas
    host_cpu "$out/host_cpu_$part.txt"
    timeout 260 build/bin/tiersim_calib --out "$out/calib_raw.csv" > "$out/calib.log" 2>&1 || echo "calib failed"
    python3 experiments/validate/host_copy_rate.py --out "$out/host_copy_rate.json" 2>&1 | grep -v -E "warn" || true
    python3 experiments/validate/gpu_timeline.py --model traces/models/qwen3-8b.json --steps 3 \
        --placements "offload:24:0:cuda:1,offload:24:1:cuda:1,offload:12:0:cuda:1,offload:24:0:pinned,offload:24:1:pinned,offload:4:0:pinned,offload:24:0:pageable,resident" \
        --out "$out/gpu_timeline_qwen3-8b.json" 2>&1 | grep -v -E "warn" || true
    ;;
  read-mostly)
    # Why ReadMostly through the allocator never finished: the advice given after the weights are
    # loaded (only their ranges), then at allocation as before, both bounded, with per-token progress
    # and Python stacks every 20 s.
    bounded_managed 120 qwen3-8b read-mostly --advise-after-load --progress --tokens 6 --warmup 1
    bounded_managed 75 qwen3-8b read-mostly --progress --stack-every 20 --tokens 6 --warmup 1
    ;;
  capture-8b)
    # (2 GPUs) A lease whose framework calibration comes from a captured run (lease10): the framework
    # microbenchmarks, Qwen3-8B captured in both regimes, then every configuration of Qwen3-8B in both
    # regimes, peer and managed rows included (ReadMostly advised after the weights are loaded: advised
    # at allocation, building the model does not finish, see read-mostly).
    host_cpu "$out/host_cpu_$part.txt"
    framework_runs h200
    run --model traces/models/qwen3-8b.json --count-kernels --slow-tokens 6 --out "$out/measured.jsonl" \
        --placements "$(pinned_set),$(peer_set),offload:4:0:pageable,offload:12:0:pageable,offload:24:0:pageable"
    for adv in none prefer-cpu accessed-by; do bounded_managed 100 qwen3-8b $adv --tokens 8; done
    bounded_managed 100 qwen3-8b read-mostly --advise-after-load --tokens 8
    ;;
  llama)
    # (2 GPUs) An architecture no calibration used (lease10, the call after capture-8b): Llama-3.1-8B (no
    # q/k norms, 32 layers) under every strategy; Qwen3-8B's resident row first (the calibration row,
    # should this call land on another machine); Qwen3-14B ReadMostly; the GPU timeline of offloaded steps.
    host_cpu "$out/host_cpu_$part.txt"
    run --model traces/models/qwen3-8b.json --placements resident --count-kernels --out "$out/measured.jsonl"
    run --model traces/models/llama-3.1-8b.json --count-kernels --slow-tokens 6 --out "$out/measured.jsonl" \
        --placements "$(pinned_set),$(peer_set),offload:12:0:pageable"
    bounded_managed 90 llama-3.1-8b none --tokens 8
    bounded_managed 90 llama-3.1-8b read-mostly --advise-after-load --tokens 8
    bounded_managed 100 qwen3-14b read-mostly --advise-after-load --tokens 8
    timeout 120 python3 experiments/validate/gpu_timeline.py --model traces/models/qwen3-8b.json --steps 2 \
        --placements "offload:24:0:cuda:1,offload:12:0:cuda:1,offload:24:0:pinned" \
        --out "$out/gpu_timeline_qwen3-8b.json" 2>&1 | grep -v -E "warn" || true
    ;;
  peer-overlap)
    # (2 GPUs) Whether a copy from cuda:1 issued on a side stream overlaps cuda:0's compute (lease11).
    host_cpu "$out/host_cpu_$part.txt"
    python3 experiments/validate/peer_overlap.py --out "$out/peer_overlap.json" 2>&1 | grep -v -E "warn" || true
    ;;
  h100-a|h100-b)
    # Another GPU kind, calibrated and validated on one machine in two calls (lease12, nvidia-h100-x1,
    # build/bin carried): calib, the framework microbenchmarks, Qwen3-8B captured and under every
    # single-GPU strategy (a); the managed rows, Llama-3.1-8B and Qwen3-14B, with Qwen3-8B's resident
    # row again should the call land on another machine (b).
    host_cpu "$out/host_cpu_$part.txt"
    if [ "$part" = h100-a ]; then
      find_cublas
      timeout 220 build/bin/tiersim_calib --out "$out/calib_raw.csv" > "$out/calib.log" 2>&1 || echo "calib failed"
      framework_runs h100
      run --model traces/models/qwen3-8b.json --count-kernels --slow-tokens 6 --out "$out/measured.jsonl" \
          --placements "$(pinned_set),offload:4:0:pageable,offload:12:0:pageable,offload:24:0:pageable"
    else
      run --model traces/models/qwen3-8b.json --placements resident --count-kernels --out "$out/measured_b.jsonl"
      for adv in none prefer-cpu accessed-by; do bounded_managed 90 qwen3-8b $adv --tokens 8; done
      bounded_managed 90 qwen3-8b read-mostly --advise-after-load --tokens 8
      run --model traces/models/llama-3.1-8b.json --count-kernels --slow-tokens 6 --out "$out/measured_b.jsonl" \
          --placements "resident,offload:12:0:pinned,offload:12:1:pinned,offload:24:0:pinned,offload:12:0:pageable"
      run --model traces/models/qwen3-14b.json --count-kernels --slow-tokens 6 --out "$out/measured_b.jsonl" \
          --placements "resident,offload:12:0:pinned,offload:24:1:pinned,offload:12:0:pageable"
    fi
    ;;
  regimes)
    # (1 GPU) The compute-bound and batched regimes of a resident model (results/validation/regimes):
    # prefill at 512..8192 tokens (batch 1) and decode at batch 1..64 from a 128-token prompt, warm and
    # fresh, with each point's kernel time by kind (profiler); each model in its own bounded process.
    host_cpu "$out/host_cpu_$part.txt"
    nvidia-smi -q -d CLOCK,PERFORMANCE,POWER > "$out/nvidia_smi_clocks_$part.txt" 2>&1 || true
    for job in "qwen3-8b 170" "llama-3.1-8b 150" "qwen3-14b 150"; do
      set -- $job
      timeout "$2" python3 experiments/validate/regimes.py --model traces/models/$1.json --out "$out/regimes.jsonl" 2>&1 \
        | { grep -v -E "Warning|warn\(" || true; } || echo "regimes on $1 failed or ran past $2 s" | tee -a "$out/unfinished.txt"
    done
    ;;
  part3)
    # What part 2 did not reach (its ReadMostly run did not finish): each managed run bounded in time.
    run --model traces/models/qwen3-14b.json --placements "$(offload_set)" --count-kernels --out "$out/measured.jsonl"
    for job in "qwen3-14b none 100" "qwen3-8b prefer-cpu 60" "qwen3-8b accessed-by 60" "qwen3-8b read-mostly 45"; do
      set -- $job
      bounded_managed "$3" "$1" "$2" --tokens 8
    done
    ;;
esac
