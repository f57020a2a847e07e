#!/bin/sh
# A grid sweep and a plan, each split into shards run by GNU parallel (Debian's `parallel`) and merged by `sim merge`:
# the bytes of the same sweep (CSV, markdown) and plan (markdown, JSON lines) run in one process. Skipped (77) where
# GNU parallel is not installed.
#   sh tests/cli/shards_parallel.sh SIM SOURCE_DIR
set -eu
sim=$1
root=$2
command -v parallel > /dev/null 2>&1 || { echo "GNU parallel is not installed (apt-get install parallel)"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$root"
set -- sweep --trace traces/qwen.trace --policy ratio --hw rtx4090,rtx5090,h100-sxm --split "cuda:0,60%;cpu,40%" \
  --prefetch 0,1 --engine event,analytic
"$sim" "$@" -o "$dir/whole.csv"
"$sim" "$@" --format md -o "$dir/whole.md"
parallel --will-cite -q --halt now,fail=1 -j 2 "$sim" "$@" --shard {}/4 -o "$dir/part{}.jsonl" ::: 1 2 3 4
"$sim" merge "$dir"/part4.jsonl "$dir"/part2.jsonl "$dir"/part1.jsonl "$dir"/part3.jsonl -o "$dir/merged.csv"
"$sim" merge "$dir"/part*.jsonl --format md -o "$dir/merged.md"
cmp "$dir/whole.csv" "$dir/merged.csv"
cmp "$dir/whole.md" "$dir/merged.md"
# Three of the four: refused, and nothing written.
if "$sim" merge "$dir"/part1.jsonl "$dir"/part2.jsonl "$dir"/part3.jsonl -o "$dir/partial.csv" 2> "$dir/err.txt"; then
  echo "a merge without shard 4 succeeded"; exit 1
fi
grep -q "shard 4/4 is missing" "$dir/err.txt"
test ! -e "$dir/partial.csv"
echo "sharded sweep: 4 shards through GNU parallel merge to the single-process CSV and markdown"
set -- plan --model traces/models/qwen3-8b.json --hw rtx4090,rtx3090,h100-sxm,rtx5090 \
  --strategies resident,llamacpp,layers-cpu,distorch-cpu --min-tps 20 --jobs 1
"$sim" "$@" -o "$dir/plan.md" 2> /dev/null
"$sim" "$@" --format jsonl -o "$dir/plan.jsonl" 2> /dev/null
parallel --will-cite -q --halt now,fail=1 -j 2 "$sim" "$@" --shard {}/3 -o "$dir/plan{}.shard" ::: 1 2 3 2> /dev/null
"$sim" merge "$dir"/plan3.shard "$dir"/plan1.shard "$dir"/plan2.shard -o "$dir/plan_merged.md" 2> /dev/null
"$sim" merge "$dir"/plan*.shard --format jsonl -o "$dir/plan_merged.jsonl" 2> /dev/null
cmp "$dir/plan.md" "$dir/plan_merged.md"
cmp "$dir/plan.jsonl" "$dir/plan_merged.jsonl"
echo "sharded plan: 3 shards through GNU parallel merge to the single-process markdown and JSON lines"
