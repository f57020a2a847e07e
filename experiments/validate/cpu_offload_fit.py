#!/usr/bin/env python3
"""Calibrates the CPU side of torchao's CPUOffloadOptimizer (the `cpu_offload:` block of a runtime profile,
calib/runtimes/SCHEMA.md) from experiments/validate/cpu_offload_calib.py's steps on synthetic parameters
(results/training-calibration/cpu-offload/*.jsonl; never the validation models).

A configuration is K parameters of one size and dtype. Its opt.step() runs, parameter after parameter, a fused
CPU AdamW step (torch.optim.AdamW(fused=True) on the pinned host copy) and queues the parameter's H2D copy on the
side stream; the last copy is waited for at the end. So
    step = K x (per_tensor + size x per_element[dtype]) + h2d(size x element bytes)
with h2d the pinned host-to-device time of the h100-measured profile (bandwidth and latency). per_tensor (the
Python loop's event wait, the optimizer call, the copy's issue) and per_element for fp32 and bf16 are fitted by
least squares on the relative error, over every configuration. Writes the block into
calib/runtimes/pytorch-hf-h100.yaml (replacing one there) and the residuals to
results/training-calibration/cpu-offload/fit.md.
  /usr/bin/python3 experiments/validate/cpu_offload_fit.py
"""
import glob
import json
import os

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "results", "training-calibration", "cpu-offload")
RUNTIME = os.path.join(ROOT, "calib", "runtimes", "pytorch-hf-h100.yaml")
PROFILE = os.path.join(ROOT, "calib", "profiles", "h100-measured.yaml")
BYTES = {"float32": 4, "bfloat16": 2}
KEY = {"float32": "fp32", "bfloat16": "bf16"}


def quantity(text, units):
    value, unit = text.split()
    return float(value) * units[unit]


def h2d_model():
    link = yaml.safe_load(open(PROFILE))["host_link"]["h2d_pinned"]
    bw = quantity(link["bandwidth"], {"GB/s": 1e9})
    lat = quantity(link["latency"], {"us": 1e-6, "ns": 1e-9, "ms": 1e-3})
    return lambda b: lat + b / bw


def solve(a, b):
    """Gaussian elimination with partial pivoting (3 x 3)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] for i in range(n)]


def main():
    rows = [json.loads(line) for p in sorted(glob.glob(os.path.join(DATA, "*.jsonl"))) for line in open(p)]
    h2d = h2d_model()
    dtypes = sorted({r["dtype"] for r in rows})
    names = ["per_tensor"] + [f"per_element_{KEY[d]}" for d in dtypes]
    # step - h2d(last) = K per_tensor + K size per_element[dtype]; weight 1/y for the relative error
    xs, ys = [], []
    for r in rows:
        y = r["step_ms"] * 1e-3 - h2d(r["size"] * BYTES[r["dtype"]])
        x = [r["k"]] + [r["k"] * r["size"] if d == r["dtype"] else 0 for d in dtypes]
        w = 1.0 / (r["step_ms"] * 1e-3)
        xs.append([v * w for v in x])
        ys.append(y * w)
    ata = [[sum(x[i] * x[j] for x in xs) for j in range(len(names))] for i in range(len(names))]
    aty = [sum(x[i] * y for x, y in zip(xs, ys)) for i in range(len(names))]
    fit = dict(zip(names, solve(ata, aty)))
    lines = ["# CPU side of torchao's CPUOffloadOptimizer, fitted (experiments/validate/cpu_offload_fit.py)", "",
             "Fitted (written to calib/runtimes/pytorch-hf-h100.yaml, `cpu_offload:`): "
             + ", ".join(f"{k} {v * 1e6:.2f} us" if k == "per_tensor" else f"{k} {v * 1e9:.4f} ns" for k, v in fit.items()), "",
             "| dtype | size | K | step ms measured | fitted | err |", "|---|---|---|---|---|---|"]
    errs = []
    for r in rows:
        pred = (r["k"] * (fit["per_tensor"] + r["size"] * fit[f"per_element_{KEY[r['dtype']]}"])
                + h2d(r["size"] * BYTES[r["dtype"]])) * 1e3
        e = 100 * (pred - r["step_ms"]) / r["step_ms"]
        errs.append(abs(e))
        lines.append(f"| {r['dtype']} | {r['size']} | {r['k']} | {r['step_ms']:.2f} | {pred:.2f} | {e:+.1f}% |")
    lines += ["", f"Mean absolute error {sum(errs) / len(errs):.1f}%, worst {max(errs):.1f}% ({len(rows)} configurations)."]
    with open(os.path.join(DATA, "fit.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    block = ("cpu_offload:\n"
             "  source: \"experiments/validate/cpu_offload_fit.py on results/training-calibration/cpu-offload (torchao "
             "CPUOffloadOptimizer steps over synthetic parameters, fp32 and bf16, 4 Ki-256 Mi elements, two H100 hosts, "
             "16 threads)\"\n"
             f"  per_tensor: \"{fit['per_tensor'] * 1e6:.2f} us\"\n"
             + "".join(f"  per_element_{KEY[d]}: \"{fit['per_element_' + KEY[d]] * 1e9:.4f} ns\"\n" for d in dtypes))
    text = open(RUNTIME).read()
    at = text.find("\ncpu_offload:")
    if at >= 0:  # replace the block, keep what follows it
        end = at + 1
        lines_after = text[end:].split("\n")
        i = 1
        while i < len(lines_after) and (lines_after[i].startswith(" ") or lines_after[i] == ""):
            i += 1
        text = text[:end] + "\n".join(lines_after[i:])
    text = text.rstrip("\n") + "\n" + block
    with open(RUNTIME, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
