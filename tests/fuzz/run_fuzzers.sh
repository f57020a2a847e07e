#!/usr/bin/env bash
# Runs each libFuzzer harness of tests/fuzz for a bounded time.
#   tests/fuzz/run_fuzzers.sh SECONDS [FUZZER...]      (default: every fuzzer)
# Environment: FUZZ_BUILD (default build-fuzz, configured with -DTIERSIM_FUZZ=ON and clang),
# FUZZ_JOBS (fuzzers run side by side, default 1), FUZZ_LOG (default $FUZZ_BUILD/fuzz-logs).
# Seeds come from the project's own files (traces, model configs, profiles, raw calibration CSVs, golden results)
# plus tests/fuzz/corpus/<fuzzer>/ and earlier findings; the growing corpus stays in
# $FUZZ_BUILD/corpus/<fuzzer>/. A crash, leak, timeout or out-of-memory input is written to
# tests/fuzz/regressions/<fuzzer>/ (the normal test suite replays that folder) and the script exits 1.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
SECONDS_EACH=${1:?usage: tests/fuzz/run_fuzzers.sh SECONDS [FUZZER...]}
shift
FUZZERS=("$@")
[ ${#FUZZERS[@]} -gt 0 ] || FUZZERS=(trace_reader model_config units raw_csv profile split_string gguf_header device_map
  composition grid_spec ot_pattern run_config routing_file safetensors_header grid_shard plan_shard)
BUILD=${FUZZ_BUILD:-build-fuzz}
JOBS=${FUZZ_JOBS:-1}
LOGS=${FUZZ_LOG:-$BUILD/fuzz-logs}
mkdir -p "$LOGS"

# Project files as seeds, cut to a size the fuzzer mutates quickly (a trace's head keeps its format).
seed() {  # seed FUZZER: fills $BUILD/seeds/FUZZER
  local dir=$BUILD/seeds/$1
  rm -rf "$dir" && mkdir -p "$dir"
  case $1 in
    trace_reader)
      for t in traces/*.trace traces/captured/*.trace; do
        [ -f "$t" ] && { head -n 120 "$t"; echo end; } > "$dir/$(basename "$t").head"
      done ;;
    model_config) cp traces/models/*.json "$dir/" 2>/dev/null ;;
    run_config)  # the golden results (sim run --json) that generate from a model: their "inputs" re-run them (those
      # naming a traces/ file, megabytes digested at every run, are left out: the corpus's tiny trace stands in)
      grep -l '"hardware_origin"' tests/golden/expected/*.json | xargs grep -L '"path": "traces/' |
        while read -r r; do cp "$r" "$dir/golden-$(basename "$r")"; done ;;
    profile) cp calib/profiles/*.yaml "$dir/" 2>/dev/null ;;
    raw_csv)
      for c in results/calib/*.csv; do [ -f "$c" ] && head -n 60 "$c" > "$dir/$(basename "$c")"; done
      # the later runs' files too (their facts, then rows: the decoder passes' layer line is a fact)
      for c in results/calib/*/*.csv; do [ -f "$c" ] && head -n 90 "$c" > "$dir/$(basename "$(dirname "$c")")_$(basename "$c")"; done ;;
    composition)  # the presets as compositions (calib/catalogue/presets.yaml), one per file
      local i=0
      grep -o '"[^"]*"' calib/catalogue/presets.yaml | tr -d '"' | while read -r c; do
        i=$((i + 1))
        printf '%s' "$c" > "$dir/preset$i"
      done ;;
  esac
  [ -d tests/fuzz/corpus/$1 ] && cp tests/fuzz/corpus/$1/* "$dir/" 2>/dev/null
  [ -d tests/fuzz/regressions/$1 ] && cp tests/fuzz/regressions/$1/* "$dir/" 2>/dev/null
  true
}

max_len() {
  case $1 in
    trace_reader | run_config) echo 32768 ;; profile | model_config | raw_csv | device_map | routing_file) echo 16384 ;;
    gguf_header | safetensors_header) echo 4096 ;;
    *) echo 1024 ;;
  esac
}

run_one() {  # run_one FUZZER: 0 when it ran clean
  local f=$1 bin=$BUILD/fuzz/fuzz_$1
  if [ ! -x "$bin" ]; then
    echo "run_fuzzers: $bin is missing (build with -DTIERSIM_FUZZ=ON, target tiersim_fuzzers)" >&2
    return 2
  fi
  seed "$f"
  mkdir -p "$BUILD/corpus/$f" "tests/fuzz/regressions/$f"
  local dict=()
  [ -f tests/fuzz/dict/$f.dict ] && dict=(-dict=tests/fuzz/dict/$f.dict)
  "$bin" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -max_len="$(max_len "$f")" \
    -print_final_stats=1 -artifact_prefix="tests/fuzz/regressions/$f/" "${dict[@]}" \
    "$BUILD/corpus/$f" "$BUILD/seeds/$f" > "$LOGS/$f.log" 2>&1
  local rc=$?
  local execs
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$LOGS/$f.log" | grep -o '[0-9]*$' | tail -1)
  printf 'fuzz %-18s %12s executions in %ss, exit %d%s\n' "$f" "${execs:-?}" "$SECONDS_EACH" "$rc" \
    "$([ $rc -ne 0 ] && echo ", FINDING (input in tests/fuzz/regressions/$f/, log $LOGS/$f.log)")"
  if [ $rc -ne 0 ]; then
    grep -m 5 -E 'ERROR|runtime error|SUMMARY|deadly|Test unit written' "$LOGS/$f.log" | sed 's/^/    /'
  fi
  return $rc
}

status=0
running=0
pids=()
for f in "${FUZZERS[@]}"; do
  run_one "$f" &
  pids+=($!)
  running=$((running + 1))
  if [ "$running" -ge "$JOBS" ]; then
    wait -n || status=1
    running=$((running - 1))
  fi
done
while [ "$running" -gt 0 ]; do
  wait -n || status=1
  running=$((running - 1))
done
[ $status -eq 0 ] && echo "run_fuzzers: ${#FUZZERS[@]} fuzzers, ${SECONDS_EACH}s each, no findings" \
  || echo "run_fuzzers: FINDINGS: see above; the inputs are in tests/fuzz/regressions/" >&2
exit $status
