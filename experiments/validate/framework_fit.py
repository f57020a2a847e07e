#!/usr/bin/python3
"""The framework's host cost per op kind, from a captured run: the structure of tiersim's framework
model (`framework.per_op` in a hardware profile).

A captured trace (capture_trace.py) holds, for every kernel-launching framework call of a real decode
step, the host time before it. Summed by op kind over a decode step, and divided by how many ops of
that kind the generated trace of the same model has per decode step, it gives the host cost of one
generated op of each kind: a generated `norm` op stands for a whole RMSNorm module (eight kernels in
eager PyTorch), a `gemv` for a Linear. Captured `elementwise` ops also cover the generated `rope`
ops (Hugging Face applies rotary embeddings with plain tensor ops), so the two share one cost. The
profiler's own host cost per op (measured in the capturing process) is removed first.

Profiled host times are not unprofiled ones (the profiler's cost is not the same for every op), so
these costs are shares: compare.py scales them all by one factor so that the event engine reproduces
a measured unprofiled run. The captured run sets how the host time divides between op kinds; a
measured run sets how fast the host is. A model never run can then differ in its op mix (Llama has
no q/k norms) and still be priced per op.

    /usr/bin/python3 experiments/validate/framework_fit.py --captured traces/captured/X-warm.trace \
        --model traces/models/qwen3-8b.json --profiler-cost-us 11.6
"""
import argparse
import collections
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SIM = os.path.join(ROOT, "build", "bin", "sim")
SHARED = {"rope": "elementwise"}  # generated kind -> the captured kind that carries its host time


def decode_steps(lines):
    """Per decode step: a list of (kind, host_us or None)."""
    steps, cur = [], None
    for line in lines:
        if line.startswith("step "):
            cur = [] if line.startswith("step decode") else None
            if cur is not None:
                steps.append(cur)
        elif line.startswith("op ") and cur is not None:
            kind = line.split()[1]
            m = re.search(r" host_us=([0-9.]+)", line)
            cur.append((kind, float(m.group(1)) if m else None))
    return steps


def captured_host_by_kind(path, profiler_cost_us):
    """Median over decode steps of the host microseconds per op kind, profiler cost removed."""
    with open(path) as f:
        steps = decode_steps(f)
    if not steps:
        sys.exit(f"{path}: no decode steps")
    per_step = []
    for step in steps:
        total = collections.defaultdict(float)
        for kind, host in step:
            if host is None:
                sys.exit(f"{path}: an op without host_us: not a captured trace")
            total[kind] += max(0.0, host - profiler_cost_us)
        per_step.append(total)
    kinds = set().union(*per_step)
    return {k: statistics.median(s.get(k, 0.0) for s in per_step) for k in kinds}


def generated_ops_by_kind(model_json):
    """Ops per decode step by kind in the trace tiersim generates for the model."""
    out = subprocess.run([SIM, "gen", "--model", model_json, "--prompt", "16", "--decode", "1", "-o", "/dev/stdout"],
                         capture_output=True, text=True, check=True).stdout
    steps = decode_steps(out.splitlines())
    return collections.Counter(kind for kind, _ in steps[0])


def per_op_shares(captured, generated):
    """Host microseconds per generated op, by kind (unscaled), and the captured host time that no
    generated kind carries."""
    shares, unmatched = {}, 0.0
    carriers = collections.defaultdict(list)  # captured kind -> generated kinds priced from it
    for kind in generated:
        carriers[SHARED.get(kind, kind)].append(kind)
    for ckind, host in captured.items():
        gkinds = carriers.get(ckind)
        if not gkinds:
            unmatched += host
            continue
        n = sum(generated[k] for k in gkinds)
        for k in gkinds:
            shares[k] = host / n
    return shares, unmatched


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--captured", required=True, help="a captured trace (warm lengths)")
    ap.add_argument("--model", required=True, help="the model description it was captured from")
    ap.add_argument("--profiler-cost-us", type=float, required=True)
    a = ap.parse_args()
    shares, unmatched = per_op_shares(captured_host_by_kind(a.captured, a.profiler_cost_us),
                                      generated_ops_by_kind(a.model))
    print("  per_op: {" + ", ".join(f'{k}: "{v:.2f} us"' for k, v in sorted(shares.items())) + "}")
    print(f"# captured host time no generated op kind carries: {unmatched:.1f} us per step; the costs are "
          f"shares: scale them to a measured unprofiled run")


if __name__ == "__main__":
    main()
