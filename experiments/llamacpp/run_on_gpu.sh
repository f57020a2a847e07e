#!/usr/bin/env bash
# The llama.cpp validation run on a GPU machine (the device tool), in phases that each pick up what an
# earlier call left (ignored folders under carry/ stay while the machine is warm) and redo what is missing.
#   run_on_gpu.sh PHASE...     phases: info build models calib validate-q4 validate-q8 diagnose build-tests calib-gpu ngl-fixtures
#          models-14b fit-fixtures graphs moe moe-diagnose moe-routing calib-gpu-moe moe-routing-long calib-gemv
#          profile-decode calib-gemm profile-prompt calib-nkvo calib-attention sched-offload calib-launch-gap
#          fit-fixtures-moe
#     info         the machine: lscpu, memory, GPU                         -> $OUT/machine.txt
#     build        llama.cpp (carried source, CUDA sm_90) + cpu_matmul_bench (build.sh --no-tests)
#     models       random-weight GGUFs: qwen3-4b and llama-3.1-8b in Q4_K_M and Q8_0 (validation), the
#                  two calibration models (models/calib-tiny-{2,16}.json) in Q8_0
#     calib        the host CPU's kernels (cpu_matmul_bench -> $OUT/cpu.csv) and llama.cpp's fixed costs
#                  (llama-bench on the calibration models -> $OUT/calib_bench.jsonl): calibration data,
#                  never compared with tiersim's predictions
#     validate-q4  llama-bench on the Q4_K_M models (-p 512 -n 128; -ngl all, half, 0; -t 16 and 4;
#                  --no-kv-offload; -ot on the FFN matrices)                -> $OUT/bench_q4.jsonl
#     validate-q8  the same rows on the Q8_0 models (no -t 4 row)           -> $OUT/bench_q8.jsonl
# Everything a phase prints also goes to $OUT/<phase>.log.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$here/carry/out}
mkdir -p "$OUT"
bin=$here/carry/build/bin
models=$here/carry/models
bench() { "$bin/llama-bench" -o jsonl "$@"; }

phase_info() {
  { date -u; nproc; lscpu; free -g; df -h /; nvidia-smi; cat "$here/carry/llama.cpp/COMMIT"; } 2>&1
}

# llama-quantize of the CUDA build aborts at start ("free(): invalid pointer") once a third tool is built
# beside it (llama-fit-params here; test-backend-ops before; seen on 2026-11-23, not investigated): the
# models are quantized by a CPU-only build's llama-quantize (carry/build-cpu; quantizing needs no GPU).
export LLAMA_QUANTIZE=$here/carry/build-cpu/bin/llama-quantize
phase_build() {
  if [ -x "$bin/llama-bench" ] && [ -x "$bin/cpu_matmul_bench" ] && [ -x "$bin/llama-fit-params" ] && [ -x "$bin/capture_routing" ] && [ -x "$LLAMA_QUANTIZE" ]; then
    echo "build: already built"
    return 0
  fi
  local t0=$SECONDS
  "$here/build.sh" --no-tests || return 1
  "$here/build.sh" --cpu --no-tests --build-dir "$here/carry/build-cpu" > "$OUT/build-cpu.log" 2>&1 || { tail "$OUT/build-cpu.log"; return 1; }
  echo "build: $((SECONDS - t0)) s"
}

phase_build-tests() {
  if [ -x "$bin/test-backend-ops" ] && [ -x "$bin/llama-bench" ]; then echo "build-tests: already built"; return 0; fi
  local t0=$SECONDS
  "$here/build.sh" || return 1
  echo "build-tests: $((SECONDS - t0)) s"
}

phase_models() {
  local t0=$SECONDS
  "$here/make_models.sh" --models "qwen3-4b llama-3.1-8b" --quants "Q4_K_M Q8_0" || return 1
  for m in calib-tiny-2 calib-tiny-16; do
    if [ ! -s "$models/$m-Q8_0.gguf" ]; then
      python3 "$here/make_random_gguf.py" "$here/models/$m.json" -o "$models/$m-f16.gguf" || return 1
      "$LLAMA_QUANTIZE" "$models/$m-f16.gguf" "$models/$m-Q8_0.gguf" Q8_0 > "$models/$m-Q8_0.log" 2>&1 || return 1
    fi
  done
  # The F16 sources are not measured: free the disk.
  rm -f "$models"/*-f16.gguf
  ls -la "$models"
  echo "models: $((SECONDS - t0)) s"
}

phase_calib() {
  # The types the validation files hold (Q4_K_M: q4_k with q6_k for some attn_v, ffn_down and the output;
  # Q8_0: q8_0), in the layout a CUDA build keeps CPU weights in (plain rows, pinned), by threads.
  "$bin/cpu_matmul_bench" --types q4_K,q6_K,q8_0 --batch 1 --layouts plain --threads 1,2,4,8,12,16 \
    --shapes 4096x4096,14336x4096,4096x14336,9728x2560,2560x9728 > "$OUT/cpu.csv" || return 1
  : > "$OUT/calib_bench.jsonl"
  for m in calib-tiny-2 calib-tiny-16; do
    for t in 16 4; do
      bench -m "$models/$m-Q8_0.gguf" -p 512 -n 128 -r 5 -ngl 99 -t "$t" >> "$OUT/calib_bench.jsonl" || return 1
      bench -m "$models/$m-Q8_0.gguf" -p 512 -n 128 -r 5 -ngl 0 -t "$t" >> "$OUT/calib_bench.jsonl" || return 1
    done
  done
}

# The validation rows of one quantization; $2: also the 4-thread row.
validate() {
  local q=$1 four=$2 out=$OUT/bench_$3.jsonl
  : > "$out"
  for m in qwen3-4b:36 llama-3.1-8b:32; do
    local name=${m%%:*} layers=${m##*:} file=$models/${m%%:*}-$q.gguf
    [ -s "$file" ] || { echo "validate: no $file"; return 1; }
    bench -m "$file" -p 512 -n 128 -r 3 -ngl 99 -t 16 >> "$out" || return 1
    bench -m "$file" -p 512 -n 128 -r 3 -ngl 99 -t 16 -nkvo 1 >> "$out" || return 1
    bench -m "$file" -p 512 -n 128 -r 2 -ngl 99 -t 16 -ot 'ffn_(up|down|gate)=CPU' >> "$out" || return 1
    bench -m "$file" -p 512 -n 128 -r 2 -ngl $((layers / 2)) -t 16 >> "$out" || return 1
    bench -m "$file" -p 512 -n 128 -r 2 -ngl 0 -t 16 >> "$out" || return 1
    if [ "$four" = yes ]; then bench -m "$file" -p 512 -n 128 -r 2 -ngl 0 -t 4 >> "$out" || return 1; fi
    echo "validate: $name $q done at $SECONDS s"
  done
}
# llama.cpp's GPU kernels by weight type (ggml's own test-backend-ops perf: MUL_MAT 4096 x 14336 at batch 1
# and 512 on CUDA0 -> $OUT/gpu_mul_mat.txt), and the cost of a CPU/GPU crossing per layer (the calibration
# models with --no-kv-offload -> $OUT/calib_nkvo.jsonl): calibration data, apart from the validation rows.
# The calibration models' F16 files, made if missing (F16: llama-quantize aborted in the build with test-backend-ops,
# run 2026-11-23, and what they calibrate does not depend on the weight type).
ensure_calib_f16() {
  mkdir -p "$models"
  for m in calib-tiny-2 calib-tiny-16; do
    [ -s "$models/$m-f16.gguf" ] || python3 "$here/make_random_gguf.py" "$here/models/$m.json" -o "$models/$m-f16.gguf" > /dev/null || return 1
  done
}

# The cost of --no-kv-offload per layer: both calibration models with and without it -> $1.
nkvo_pair() {
  ensure_calib_f16 || return 1
  : > "$1"
  for m in calib-tiny-2 calib-tiny-16; do
    bench -m "$models/$m-f16.gguf" -p 512 -n 128 -r 5 -ngl 99 -t 16 -nkvo 0,1 >> "$1" || return 1
  done
}

# ggml_backend_sched's own assignment (GGML_SCHED_DEBUG=2: every node's backend, every split's inputs) of the graphs
# of llama-bench ARGS... on calib-tiny-2 (F16) -> $OUT/NAME_sched.log (the split and node lines, at most 3000).
sched_debug() {
  local name=$1; shift
  ensure_calib_f16 || return 1
  GGML_SCHED_DEBUG=2 "$bin/llama-bench" -m "$models/calib-tiny-2-f16.gguf" -t 16 -v "$@" > /dev/null 2> "$OUT/${name}_sched_full.log"
  grep -E "^## SPLIT|^node #" "$OUT/${name}_sched_full.log" | head -n 3000 > "$OUT/${name}_sched.log"
  rm -f "$OUT/${name}_sched_full.log"
}

phase_calib-gpu() {
  [ -x "$bin/test-backend-ops" ] || { echo "no test-backend-ops: build without --no-tests"; return 1; }
  # Console output: each case's "N runs - T us/run" line (fit_runtime.py reads it).
  "$bin/test-backend-ops" perf -o MUL_MAT -b CUDA0 \
    -p 'type_a=(q4_K|q6_K|q8_0|f16),type_b=f32,m=4096,n=(1|512),k=14336,' > "$OUT/gpu_mul_mat.txt" 2>&1 || return 1
  nkvo_pair "$OUT/calib_nkvo.jsonl"
}

# llama.cpp's MUL_MAT_ID kernels on the GPU: ggml's own test-backend-ops perf cases for Qwen3-30B-A3B's experts
# (128 experts, 8 used, 768 x 2048, ids drawn uniformly per token) at 1 and 512 tokens -> $OUT/gpu_mul_mat_id.txt.
# Calibration data, apart from the validation rows.
phase_calib-gpu-moe() {
  [ -x "$bin/test-backend-ops" ] || { echo "no test-backend-ops: build without --no-tests"; return 1; }
  "$bin/test-backend-ops" perf -o MUL_MAT_ID -b CUDA0 \
    -p 'type_a=(q4_K|q6_K|q8_0|f16),type_b=f32,n_mats=128,n_used=8,b=0,m=768,n=(1|512),k=2048' > "$OUT/gpu_mul_mat_id.txt" 2>&1 || return 1
  grep "us/run" "$OUT/gpu_mul_mat_id.txt" | sed 's/ggml_backend_cuda_graph_compute: CUDA graph warmup complete//'
}

# llama.cpp's own -ngl layer assignment, from its loader's log (-v: "layer N assigned to device D",
# "offloading output layer to GPU") for made-up models of 16, 32 and 36 layers (hidden 256, F16) at several
# -ngl -> $OUT/llamacpp_ngl.jsonl, the fixture tests/policies/llamacpp_test.cpp checks tiersim against.
phase_ngl-fixtures() {
  mkdir -p "$models"
  : > "$OUT/llamacpp_ngl.jsonl"
  for L in 16 32 36; do
    local json=$models/fixture-$L.json file=$models/fixture-$L-f16.gguf
    python3 -c "import json,sys; c=json.load(open('$here/models/calib-tiny-16.json')); c['name']='fixture-$L'; c['num_hidden_layers']=$L; json.dump(c, open('$json','w'))"
    [ -s "$file" ] || python3 "$here/make_random_gguf.py" "$json" -o "$file" > /dev/null || return 1
    for ngl in 0 1 2 5 $((L / 2)) $((L - 1)) $L $((L + 1)) 99; do
      "$bin/llama-bench" -v -m "$file" -ngl "$ngl" -p 0 -n 1 -r 1 -o jsonl > /dev/null 2> "$OUT/ngl.log" || return 1
      python3 - "$L" "$ngl" "$OUT/ngl.log" >> "$OUT/llamacpp_ngl.jsonl" <<'PY'
import json, re, sys
L, ngl, log = int(sys.argv[1]), int(sys.argv[2]), open(sys.argv[3]).read()
layers = {}
for m in re.finditer(r"layer +(\d+) assigned to device (\S+),", log):
    layers.setdefault(int(m.group(1)), m.group(2))
devices = [layers.get(i, "?") for i in range(L + 1)]
print(json.dumps({"n_layer": L, "ngl": ngl, "layer_devices": devices,
                  "output_on_gpu": "offloading output layer to GPU" in log,
                  "source": "llama.cpp 34af94cd9 llama-bench -v load_tensors log"}))
PY
    done
  done
  rm -f "$OUT/ngl.log"
  cat "$OUT/llamacpp_ngl.jsonl" | cut -c1-160
}

# llama.cpp's own memory projection and --fit (common/fit.cpp, through tools/fit-params) for the validation
# models, and Qwen3-14B Q4_K_M when models/ has it -> $OUT/fit_print.jsonl (--fit-print: MiB of model,
# context and compute per device at -ngl x -c x -ub) and $OUT/fit.jsonl (the -c and -ngl that --fit
# chooses when the device may use BUDGET MiB: the margin -fitt is this run's free memory less BUDGET).
# FIT_MODELS="FILE-STEM:LAYERS ..." picks the models, FIT_TAG a suffix for the two files.
phase_fit-fixtures() {
  [ -x "$bin/llama-fit-params" ] || { echo "no llama-fit-params: run build"; return 1; }
  local tag=${FIT_TAG:-}
  : > "$OUT/fit_print$tag.jsonl"; : > "$OUT/fit$tag.jsonl"
  local fp=$bin/llama-fit-params
  for spec in ${FIT_MODELS:-qwen3-4b-Q4_K_M:36 qwen3-4b-Q8_0:36 llama-3.1-8b-Q4_K_M:32 llama-3.1-8b-Q8_0:32 qwen3-14b-Q4_K_M:40}; do
    local name=${spec%%:*} L=${spec##*:} file=$models/${spec%%:*}.gguf
    [ -s "$file" ] || { echo "fit-fixtures: no $file, skipped"; continue; }
    for ngl in 0 1 $((L / 2)) $L $((L + 1)); do
      for c in 4096 16384; do
        for ub in 512 256; do
          [ "$ub" = 256 ] && [ "$c" != 4096 ] && continue
          "$fp" -m "$file" --fit-print on -ngl "$ngl" -c "$c" -ub "$ub" 2> "$OUT/fp.err" > "$OUT/fp.out" || { cat "$OUT/fp.err" | tail; return 1; }
          python3 - "$name" "$ngl" "$c" "$ub" "$OUT/fp.out" >> "$OUT/fit_print$tag.jsonl" <<'PY'
import json, sys
name, ngl, c, ub, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
mib = {}
for line in open(path):
    f = line.split()
    if len(f) == 4 and all(x.isdigit() for x in f[1:]):
        mib[f[0]] = dict(zip(("model", "context", "compute"), map(int, f[1:])))
print(json.dumps({"model": name, "ngl": ngl, "ctx": c, "ubatch": ub, "mib": mib,
                  "source": "llama.cpp 34af94cd9 llama-fit-params --fit-print on (MiB, floored)"}))
PY
        done
      done
    done
    # The free memory llama.cpp sees (its fit log), then fits for budgets from 1.5 GiB up.
    "$fp" -m "$file" -lv 4 > /dev/null 2> "$OUT/fp.err"
    local free; free=$(grep -oE 'vs\. [0-9]+ MiB of free device memory' "$OUT/fp.err" | head -1 | grep -oE '[0-9]+')
    [ -n "$free" ] || { tail "$OUT/fp.err"; return 1; }
    for budget in 1536 2048 3072 4096 5120 6144 8192 10240 11264 12288 16384 24576; do
      local margin=$((free - budget))
      [ "$margin" -gt 0 ] || continue
      "$fp" -m "$file" -lv 4 -fitt "$margin" 2> "$OUT/fp.err" > "$OUT/fp.out"
      local rc=$?
      python3 - "$name" "$budget" "$margin" "$rc" "$OUT/fp.out" "$OUT/fp.err" >> "$OUT/fit$tag.jsonl" <<'PY'
import json, re, sys
name, budget, margin, rc, out, err = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), open(sys.argv[5]).read(), open(sys.argv[6]).read()
free = [int(x) for x in re.findall(r"vs\. (\d+) MiB of free device memory", err)]
args = out.strip().splitlines()[-1] if rc == 0 and out.strip() else ""
m_c, m_ngl = re.search(r"-c (\d+)", args), re.search(r"-ngl (-?\d+)", args)
trace = [l.split(": ", 1)[1] for l in err.splitlines() if l.startswith(("llama_params_fit", "common_params_fit_impl", "common_fit_params")) and ": " in l]
print(json.dumps({"model": name, "budget_mib": budget, "margin_mib": margin, "free_mib": free[0] if free else None,
                  "status": rc, "ctx": int(m_c.group(1)) if m_c else None, "ngl": int(m_ngl.group(1)) if m_ngl else None,
                  "args": args, "log": trace[:40],
                  "source": "llama.cpp 34af94cd9 llama-fit-params -fitt MARGIN (margin = free - budget)"}))
PY
    done
    echo "fit-fixtures: $name done at $SECONDS s"
  done
  rm -f "$OUT/fp.err" "$OUT/fp.out"
  wc -l "$OUT/fit_print$tag.jsonl" "$OUT/fit$tag.jsonl"
  python3 -c "
import json
for l in open('$OUT/fit$tag.jsonl'):
    r = json.loads(l); print(r['model'], r['budget_mib'], r['status'], r['args'])"
}

# CUDA graphs on and off (GGML_CUDA_DISABLE_GRAPHS, read by ggml-cuda's common.cuh is_enabled): the two
# calibration models at -ngl 99 (the runtime without graphs is calibrated from these alone) and the
# validation models' Q4_K_M files at -ngl 99 and half (validation rows) -> $OUT/graphs.jsonl, each llama-bench
# line with "cuda_graphs": true|false added.
phase_graphs() {
  "$here/make_models.sh" --models "qwen3-4b llama-3.1-8b" --quants Q4_K_M > "$OUT/graphs_models.log" 2>&1 || { tail "$OUT/graphs_models.log"; return 1; }
  for m in calib-tiny-2 calib-tiny-16; do
    if [ ! -s "$models/$m-Q8_0.gguf" ]; then
      python3 "$here/make_random_gguf.py" "$here/models/$m.json" -o "$models/$m-f16.gguf" > /dev/null || return 1
      "$LLAMA_QUANTIZE" "$models/$m-f16.gguf" "$models/$m-Q8_0.gguf" Q8_0 > "$models/$m-Q8_0.log" 2>&1 || return 1
    fi
  done
  rm -f "$models"/*-f16.gguf
  : > "$OUT/graphs.jsonl"
  tag() { python3 -c "import json,sys; [print(json.dumps(dict(json.loads(l), cuda_graphs=sys.argv[1]=='on'))) for l in sys.stdin if l.strip()]" "$1"; }
  for g in on off; do
    local env=()
    [ "$g" = off ] && env=(env GGML_CUDA_DISABLE_GRAPHS=1)
    for m in calib-tiny-2 calib-tiny-16; do
      "${env[@]}" "$bin/llama-bench" -o jsonl -m "$models/$m-Q8_0.gguf" -p 512 -n 128 -r 5 -ngl 99 -t 16 | tag $g >> "$OUT/graphs.jsonl" || return 1
    done
    for spec in qwen3-4b:36 llama-3.1-8b:32; do
      local file=$models/${spec%%:*}-Q4_K_M.gguf L=${spec##*:}
      for ngl in 99 $((L / 2)); do
        "${env[@]}" "$bin/llama-bench" -o jsonl -m "$file" -p 512 -n 128 -r 3 -ngl "$ngl" -t 16 | tag $g >> "$OUT/graphs.jsonl" || return 1
      done
    done
    echo "graphs: $g done at $SECONDS s"
  done
  python3 -c "
import json
for l in open('$OUT/graphs.jsonl'):
    r = json.loads(l); print(r['model_filename'].split('/')[-1], r['n_gpu_layers'], r['n_prompt'], r['n_gen'], 'graphs' if r['cuda_graphs'] else 'no graphs', round(r['avg_ts'], 1))"
}

# Mixture of experts: Qwen3-30B-A3B's first 24 of 48 layers (the whole model's F16 source would not fit the
# disk beside its Q4_K_M), random weights, Q4_K_M; llama-bench -p 512 -n 128 with every layer on the GPU,
# with the experts of the first 12 and of all 24 layers on the CPU (--n-cpu-moe), and with -ngl 13 ->
# $OUT/bench_moe.jsonl, the quantize log -> $OUT/moe_quantize.log.
phase_moe() {
  local t0=$SECONDS
  "$here/make_models.sh" --models qwen3-30b-a3b --layers 24 --quants Q4_K_M > "$OUT/moe_models.log" 2>&1 || { tail "$OUT/moe_models.log"; return 1; }
  rm -f "$models"/*-f16.gguf
  cp "$models/qwen3-30b-a3b-L24-Q4_K_M.gguf.log" "$OUT/moe_quantize.log"
  echo "moe: model ready at $((SECONDS - t0)) s"
  local file=$models/qwen3-30b-a3b-L24-Q4_K_M.gguf
  : > "$OUT/bench_moe.jsonl"
  for opt in "-ngl 99" "-ngl 99 -ncmoe 12" "-ngl 99 -ncmoe 24" "-ngl 13"; do
    bench -m "$file" -p 512 -n 128 -r 2 -t 16 $opt >> "$OUT/bench_moe.jsonl" || return 1
    echo "moe: $opt done at $((SECONDS - t0)) s"
  done
  python3 -c "
import json
for l in open('$OUT/bench_moe.jsonl'):
    r = json.loads(l); print(r['n_gpu_layers'], r.get('n_cpu_moe'), r['n_prompt'], r['n_gen'], round(r['avg_ts'], 1))"
}

# The MoE validation file (Qwen3-30B-A3B's first 24 layers, Q4_K_M), made when this machine does not have it yet
# (the make log -> $OUT/moe_models.log, the quantize log -> $OUT/moe_quantize.log; the F16 source removed).
ensure_moe_model() {
  [ -s "$models/qwen3-30b-a3b-L24-Q4_K_M.gguf" ] && return 0
  "$here/make_models.sh" --models qwen3-30b-a3b --layers 24 --quants Q4_K_M > "$OUT/moe_models.log" 2>&1 || { tail "$OUT/moe_models.log"; return 1; }
  rm -f "$models"/*-f16.gguf
  cp "$models/qwen3-30b-a3b-L24-Q4_K_M.gguf.log" "$OUT/moe_quantize.log"
}

# llama-fit-params on the MoE file (Qwen3-30B-A3B's first 24 layers, Q4_K_M): --fit-print rows and fits for the
# budgets of fit-fixtures -> $OUT/fit_print_moe.jsonl, fit_moe.jsonl (tests/fixtures/llamacpp_fit*_moe.jsonl).
phase_fit-fixtures-moe() {
  ensure_moe_model || return 1
  FIT_MODELS="qwen3-30b-a3b-L24-Q4_K_M:24" FIT_TAG=_moe phase_fit-fixtures
}

# Why a MoE prompt with CPU experts runs faster than pageable copies allow: llama.cpp's own log (-v: the
# buffer types the expert tensors went to, what the scheduler offloads), then the same prompt with load
# mode none (no mmap), without op offload, and with CPU weight repacking off -> $OUT/moe_diagnose.log.
phase_moe-diagnose() {
  local file=$models/qwen3-30b-a3b-L24-Q4_K_M.gguf
  ensure_moe_model || return 1
  bench -m "$file" -p 512 -n 0 -r 2 -t 16 -ngl 99 -ncmoe 24 -v > "$OUT/moe_verbose.jsonl" 2> "$OUT/moe_verbose.log"
  grep -iE "buffer size|buffer type|CPU_Mapped|CPU_REPACK|AMX|CUDA_Host|repack|extra|offload|mmap|load_mode" "$OUT/moe_verbose.log" | sort | uniq -c | sort -rn | head -40
  for opt in "-lm none" "-lm mmap" "--no-host 1"; do
    echo "== $opt"; bench -m "$file" -p 512 -n 0 -r 2 -t 16 -ngl 99 -ncmoe 24 $opt 2>/dev/null | cut -c1-400
  done
  echo "== GGML_OP_OFFLOAD_MIN_BATCH=100000"
  GGML_OP_OFFLOAD_MIN_BATCH=100000 bench -m "$file" -p 512 -n 0 -r 2 -t 16 -ngl 99 -ncmoe 24 2>/dev/null | cut -c1-400
}

# The routing the moe rows ran with: the same file (make_random_gguf.py is seeded, llama-quantize deterministic),
# llama.cpp's own expert selection captured by capture_routing for 512-token prompts and 128-token decodes from an
# empty cache, as llama-bench runs them (2 sequences each) -> $OUT/routing_pp512.json, routing_tg128.json; then the
# moe rows again, 3 repetitions, on this machine -> $OUT/bench_moe_routing.jsonl.
phase_moe-routing() {
  local t0=$SECONDS file=$models/qwen3-30b-a3b-L24-Q4_K_M.gguf
  ensure_moe_model || return 1
  echo "moe-routing: model ready at $((SECONDS - t0)) s"
  "$bin/capture_routing" -m "$file" -o "$OUT/routing_pp512.json" --prompt 512 --sequences 2 2> "$OUT/capture_pp512.log" || { tail "$OUT/capture_pp512.log"; return 1; }
  "$bin/capture_routing" -m "$file" -o "$OUT/routing_tg128.json" --gen 128 --sequences 2 2> "$OUT/capture_tg128.log" || { tail "$OUT/capture_tg128.log"; return 1; }
  echo "moe-routing: captured at $((SECONDS - t0)) s"
  : > "$OUT/bench_moe_routing.jsonl"
  for opt in "-ngl 99" "-ngl 99 -ncmoe 12" "-ngl 99 -ncmoe 24" "-ngl 13"; do
    bench -m "$file" -p 512 -n 128 -r 3 -t 16 $opt >> "$OUT/bench_moe_routing.jsonl" || return 1
  done
  echo "moe-routing: benched at $((SECONDS - t0)) s"
  python3 -c "
import json
for l in open('$OUT/bench_moe_routing.jsonl'):
    r = json.loads(l); print(r['n_gpu_layers'], r.get('n_cpu_moe'), r['n_prompt'], r['n_gen'], round(r['avg_ts'], 1), r['samples_ts'])"
}

# A long prompt through the same MoE file: 2048 tokens, four micro-batches of 512 (llama-bench's -b 2048 -ub 512),
# each copying the CPU layers' used experts again; the routing llama.cpp chose for one such prompt
# -> $OUT/routing_pp2048.json, and the rows -> $OUT/bench_moe_long.jsonl.
phase_moe-routing-long() {
  local t0=$SECONDS file=$models/qwen3-30b-a3b-L24-Q4_K_M.gguf
  ensure_moe_model || return 1
  echo "moe-routing-long: model ready at $((SECONDS - t0)) s"
  "$bin/capture_routing" -m "$file" -o "$OUT/routing_pp2048.json" --prompt 2048 --sequences 1 2> "$OUT/capture_pp2048.log" || { tail "$OUT/capture_pp2048.log"; return 1; }
  : > "$OUT/bench_moe_long.jsonl"
  for opt in "-ngl 99" "-ngl 99 -ncmoe 12" "-ngl 99 -ncmoe 24"; do
    bench -m "$file" -p 2048 -n 0 -r 3 -t 16 $opt >> "$OUT/bench_moe_long.jsonl" || return 1
  done
  echo "moe-routing-long: benched at $((SECONDS - t0)) s"
  python3 -c "
import json
for l in open('$OUT/bench_moe_long.jsonl'):
    r = json.loads(l); print(r['n_gpu_layers'], r.get('n_cpu_moe'), r['n_prompt'], r['n_batch'], r['n_ubatch'], round(r['avg_ts'], 1), r['samples_ts'])"
}

# The Qwen3-4B Q4_K_M validation file, made if missing (the log -> $OUT/profile_models.log; the F16 source removed).
ensure_qwen3_4b_q4() {
  "$here/make_models.sh" --models qwen3-4b --quants Q4_K_M > "$OUT/profile_models.log" 2>&1 || { tail "$OUT/profile_models.log"; return 1; }
  rm -f "$models"/*-f16.gguf
}

# Every kernel of llama-bench ARGS... on that file (up to LAUNCHES) timed by Nsight Compute (gpu__time_duration,
# clocks and caches left alone) -> $OUT/ncu_NAME.csv and .log, then summed by kernel name.
ncu_profile() {
  local name=$1 launches=$2; shift 2
  local ncu; ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  [ -n "$ncu" ] || { echo "profile-$name: no ncu"; return 1; }
  "$ncu" --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --launch-count "$launches" \
    "$bin/llama-bench" -m "$models/qwen3-4b-Q4_K_M.gguf" "$@" > "$OUT/ncu_$name.csv" 2> "$OUT/ncu_$name.log" \
    || { tail "$OUT/ncu_$name.log"; return 1; }
  echo "profile-$name: profiled at $SECONDS s"
  ncu_summary "$OUT/ncu_$name.csv"
}

# Nsight Compute's CSV (one gpu__time_duration row per kernel) summed by kernel name.
ncu_summary() {
  python3 - "$1" <<'PY'
import csv, sys, collections
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))]
t = collections.defaultdict(lambda: [0, 0.0])
for r in rows:
    name = r["Kernel Name"].split("(")[0].split("<")[0]
    v = float(r["Metric Value"].replace(",", ""))
    t[name][0] += 1; t[name][1] += v * {"ns": 1e-3, "us": 1.0, "ms": 1e3, "nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3}[r["Metric Unit"]]
print(len(rows), "kernels")
for k, (n, us) in sorted(t.items(), key=lambda kv: -kv[1][1])[:30]:
    print(f"{n:6d} {us:10.1f} us  {k}")
PY
}

# ggml's own matrix-vector products at the validation models' decode shapes (Qwen3-4B, Llama-3.1-8B, the MoE file's
# attention and output, the calibration models), on the GPU: cpu_matmul_bench --backend gpu (MMVQ and the kernel
# that quantizes its input to q8_1; the weights streamed from HBM past the L2; graphs replayed as CUDA graphs, as
# llama.cpp's decode is) -> $OUT/gpu_gemv.csv, with the MoE router's F32 product. And the CPU's MUL_MAT_ID over
# Qwen3-30B-A3B's experts (128, 8 used; gate/up 768 x 2048, down 2048 x 768) by threads -> $OUT/cpu_moe.csv,
# beside dense products of the same shapes on this host -> $OUT/cpu_dense_same_host.csv. Calibration data,
# apart from the validation rows.
# The matrices of the validation models (Qwen3-4B; Llama-3.1-8B; the MoE file's attention and output) and of the
# calibration models, ROWSxCOLS.
decode_shapes=4096x2560,1024x2560,2560x4096,9728x2560,2560x9728,151936x2560
decode_shapes+=,4096x4096,1024x4096,14336x4096,4096x14336,128256x4096
decode_shapes+=,4096x2048,512x2048,2048x4096,151936x2048
decode_shapes+=,256x256,128x256,768x256,256x768,4096x256
phase_calib-gemv() {
  "$bin/cpu_matmul_bench" --backend gpu --types q4_K,q6_K,q8_0,f16 --batch 1 --warmup 3 --shapes "$decode_shapes" \
    > "$OUT/gpu_gemv.csv" 2> "$OUT/gpu_gemv.log" || { tail "$OUT/gpu_gemv.log"; return 1; }
  "$bin/cpu_matmul_bench" --backend gpu --types f32 --batch 1 --warmup 3 --shapes 128x2048 2>> "$OUT/gpu_gemv.log" \
    | tail -n +2 >> "$OUT/gpu_gemv.csv" || return 1
  echo "calib-gemv: GPU done at $SECONDS s"
  "$bin/cpu_matmul_bench" --experts 128:8 --types q4_K,q6_K,q8_0 --batch 1 --threads 1,2,4,8,12,16 \
    --shapes 768x2048,2048x768 --bw-bytes 0 > "$OUT/cpu_moe.csv" 2> "$OUT/cpu_moe.log" || { tail "$OUT/cpu_moe.log"; return 1; }
  "$bin/cpu_matmul_bench" --types q4_K,q6_K,q8_0 --batch 1 --layouts plain --threads 1,2,4,8,12,16 \
    --shapes 768x2048,2048x768,4096x14336 > "$OUT/cpu_dense_same_host.csv" 2>> "$OUT/cpu_moe.log" || return 1
  echo "calib-gemv: CPU done at $SECONDS s"
  grep -hE "^(gpu_gemv|gemv_id)" "$OUT/gpu_gemv.csv" "$OUT/cpu_moe.csv" | cut -d, -f1-7,9 | head -150
}

# The same products at a prompt micro-batch's 512 tokens (MMQ, or cuBLAS for F16), on the GPU -> $OUT/gpu_gemm.csv.
# Calibration data, apart from the validation rows.
phase_calib-gemm() {
  "$bin/cpu_matmul_bench" --backend gpu --types q4_K,q6_K,q8_0,f16 --batch 512 --warmup 3 --shapes "$decode_shapes" \
    > "$OUT/gpu_gemm.csv" 2> "$OUT/gpu_gemm.log" || { tail "$OUT/gpu_gemm.log"; return 1; }
  cut -d, -f1-7,10 "$OUT/gpu_gemm.csv"
}

# Where a GPU-only prompt's time goes: Qwen3-4B Q4_K_M, every kernel of llama-bench -p 512 -n 0 (a warm-up prompt
# and one timed) under Nsight Compute -> $OUT/ncu_prompt.csv. Diagnosis, not calibration.
phase_profile-prompt() {
  ensure_qwen3_4b_q4 || return 1
  bench -m "$models/qwen3-4b-Q4_K_M.gguf" -p 512 -n 0 -r 3 -ngl 99 -t 16 > "$OUT/profile_prompt_bench.jsonl" || return 1
  ncu_profile prompt 4000 -p 512 -n 0 -r 1 -ngl 99 -t 16
}

# Where a GPU-only decode's time goes: Qwen3-4B Q4_K_M, llama-bench -ngl 99 as the validation rows run it
# (-> $OUT/profile_bench.jsonl), then every kernel of a warm-up token and 4 decode tokens timed by Nsight Compute
# (gpu__time_duration, clocks and caches left alone) -> $OUT/ncu_decode.csv. Diagnosis, not calibration.
phase_profile-decode() {
  ensure_qwen3_4b_q4 || return 1
  bench -m "$models/qwen3-4b-Q4_K_M.gguf" -p 512 -n 128 -r 3 -ngl 99 -t 16 > "$OUT/profile_bench.jsonl" || return 1
  echo "profile-decode: benched at $SECONDS s"
  ncu_profile decode 6000 -p 0 -n 4 -r 1 -ngl 99 -t 16
}

# --no-kv-offload as llama.cpp runs it, calibration data and a fixture, apart from the validation rows:
# calib-nkvo: the crossing cost again on the calibration models (-nkvo 0,1, the same day as the attention below) ->
#   $OUT/calib_nkvo2.jsonl, and ggml_backend_sched's own assignment of calib-tiny-2's graphs with -nkvo 1
#   (GGML_SCHED_DEBUG=2: every node's backend, every split's inputs) -> $OUT/nkvo_sched.log.
# calib-attention: the CPU's part of each layer (attention without flash attention: the KV stores, both products,
#   the softmax; cpu_matmul_bench --attention) at the attention shapes of the calibration and validation models and
#   of larger ones, by threads -> $OUT/cpu_attention.csv.
phase_calib-nkvo() {
  nkvo_pair "$OUT/calib_nkvo2.jsonl" || return 1
  echo "calib-nkvo: crossings done at $SECONDS s"
  sched_debug nkvo -p 0 -n 1 -r 1 -ngl 99 -nkvo 1 || return 1
  wc -l < "$OUT/nkvo_sched.log"
  python3 -c "
import json
for l in open('$OUT/calib_nkvo2.jsonl'):
    r = json.loads(l); print(r['model_filename'].split('/')[-1], r['no_kv_offload'], r['n_prompt'], r['n_gen'], round(r['avg_ts'], 1))"
}
phase_calib-attention() {
  "$bin/cpu_matmul_bench" --attention 4:2:64,8:8:64,16:4:128,32:8:128,64:8:128 --kv 256,512,1024 --batch 1,512 \
    --threads 4,16 --layers 16 --reps 5 --max-seconds 0.5 > "$OUT/cpu_attention.csv" 2> "$OUT/cpu_attention.log" \
    || { tail "$OUT/cpu_attention.log"; return 1; }
  cat "$OUT/cpu_attention.csv"
}

# ggml_backend_sched's own assignment of a prompt micro-batch under op offload: calib-tiny-2 (F16) at -ngl 0, 64
# tokens (op offload from 32), GGML_SCHED_DEBUG=2 -> $OUT/offload_sched.log: where a CPU layer's attention and KV
# store run when its weights are copied in. A fixture, apart from the validation rows.
phase_sched-offload() {
  sched_debug offload -p 64 -n 0 -r 1 -ngl 0 || return 1
  awk 'NR > 1 && /^## SPLIT #0:/ {exit} {print}' "$OUT/offload_sched.log" | cut -c1-200
}

# The GPU's own cost of a kernel launched by the host rather than replayed in a CUDA graph: ggml's matrix-vector
# products at the decode shapes with graphs (as llama.cpp's decode runs) and with GGML_CUDA_DISABLE_GRAPHS=1, the
# same process build, one after the other -> $OUT/gpu_gemv_graphs.csv and gpu_gemv_nographs.csv. Where the GPU
# is the bottleneck (large matrices) the difference is the gap per launch. Calibration data.
phase_calib-launch-gap() {
  "$bin/cpu_matmul_bench" --backend gpu --types q4_K,q8_0,f16 --batch 1 --warmup 3 --shapes "$decode_shapes" \
    > "$OUT/gpu_gemv_graphs.csv" 2> "$OUT/gpu_gemv_graphs.log" || { tail "$OUT/gpu_gemv_graphs.log"; return 1; }
  GGML_CUDA_DISABLE_GRAPHS=1 "$bin/cpu_matmul_bench" --backend gpu --types q4_K,q8_0,f16 --batch 1 --warmup 3 \
    --shapes "$decode_shapes" > "$OUT/gpu_gemv_nographs.csv" 2> "$OUT/gpu_gemv_nographs.log" || { tail "$OUT/gpu_gemv_nographs.log"; return 1; }
  paste -d, "$OUT/gpu_gemv_graphs.csv" "$OUT/gpu_gemv_nographs.csv" | cut -d, -f2-4,7,17
}

# A 14B model for the 12 GB example (Q4_K_M only; its F16 source is removed once quantized).
phase_models-14b() {
  local t0=$SECONDS
  "$here/make_models.sh" --models qwen3-14b --quants Q4_K_M || return 1
  rm -f "$models"/*-f16.gguf
  echo "models-14b: $((SECONDS - t0)) s"
}

# Why a prompt through op offload runs at the pageable copy rate: where llama.cpp put the CPU weights (its
# own log, -v), the same prompt with --no-host, with load mode none, without op offload, and whether this
# machine pins multi-GiB host buffers at all (PyTorch).
phase_diagnose() {
  local f=$models/qwen3-4b-Q4_K_M.gguf
  "$here/make_models.sh" --models qwen3-4b --quants Q4_K_M > /dev/null || return 1
  rm -f "$models"/*-f16.gguf
  bench -m "$f" -p 512 -n 0 -r 3 -ngl 0 -t 16 -v > "$OUT/diagnose_verbose.jsonl" 2> "$OUT/diagnose_verbose.log"
  grep -iE "buffer size|pinned|load_mode|CUDA_Host|CPU_Mapped|CPU_REPACK|offload" "$OUT/diagnose_verbose.log" | sort | uniq -c | head -40
  for opt in "--no-host 1" "-lm none" "-lm mmap" "-ub 2048 -b 2048"; do
    echo "== $opt"; bench -m "$f" -p 512 -n 0 -r 3 -ngl 0 -t 16 $opt 2>/dev/null
  done
  echo "== GGML_OP_OFFLOAD_MIN_BATCH=100000"; GGML_OP_OFFLOAD_MIN_BATCH=100000 bench -m "$f" -p 512 -n 0 -r 2 -ngl 0 -t 16 2>/dev/null
  python3 - <<'PY'
import time, torch
for gib in (1, 2.5, 4.5, 9):
    n = int(gib * 2**30)
    try:
        h = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    except Exception as e:
        print(f"pinned {gib} GiB: failed: {e}"); continue
    d = torch.empty(n, dtype=torch.uint8, device="cuda")
    d.copy_(h, non_blocking=True); torch.cuda.synchronize()
    t = time.perf_counter(); d.copy_(h, non_blocking=True); torch.cuda.synchronize(); dt = time.perf_counter() - t
    print(f"pinned {gib} GiB: {n / dt / 1e9:.1f} GB/s H2D")
    del h, d
PY
}
phase_validate-q4() { validate Q4_K_M yes q4; }
phase_validate-q8() { validate Q8_0 no q8; }

status=0
for p in "$@"; do
  echo "== $p ($(date -u +%H:%M:%S))"
  if ! "phase_$p" 2>&1 | tee "$OUT/$p.log"; then status=1; echo "== $p FAILED"; break; fi
done
exit $status
