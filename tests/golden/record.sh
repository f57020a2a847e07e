#!/usr/bin/env bash
# Writes expected/NNN.json (stdout of --json, or the exit code and message of a refusal) for every line
# of cases.txt, from the binary given (default build/bin/sim). Run from anywhere; commands run from the
# repository root. Only for freezing outputs: the golden test reads what this wrote.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
sim="${1:-$root/build/bin/sim}"
rm -rf "$here/expected"
mkdir -p "$here/expected"
n=0
while IFS= read -r line; do
  case "$line" in ''|'#'*) continue ;; esac
  n=$((n + 1))
  out="$here/expected/$(printf '%03d' "$n").json"
  set +e
  (cd "$root" && eval "\"$sim\" $line --json" > "$out.tmp" 2> "$out.err")
  code=$?
  set -e
  if [ "$code" -eq 0 ]; then
    mv "$out.tmp" "$out"
  else
    /usr/bin/python3 -c 'import json,sys; print(json.dumps({"exit_code": int(sys.argv[1]), "stderr": open(sys.argv[2]).read()}, indent=2))' "$code" "$out.err" > "$out"
    rm -f "$out.tmp"
  fi
  rm -f "$out.err"
done < "$here/cases.txt"
echo "recorded $n cases"
