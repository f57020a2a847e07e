#!/bin/sh
# A grid sweep split into shards run by GNU parallel (Debian's `parallel`), merged by `sim merge`: the bytes of the
# same sweep run in one process, in CSV and markdown. Skipped (77) where GNU parallel is not installed.
#   sh tests/cli/sweep_shards_parallel.sh SIM SOURCE_DIR
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
