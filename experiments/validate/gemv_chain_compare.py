#!/usr/bin/python3
"""The GEMV-chain harness (gemv_chain.cu) against tiersim: link and driver modelling with no framework.

    /usr/bin/python3 experiments/validate/gemv_chain_compare.py     (after results/validation/lease1/gemv_chain.jsonl)

The trace is the harness's step exactly: per layer seven bf16 GEMVs (q, k, v, o, gate, up, down of
Qwen3-8B), each reading its weight, then a sync. The hardware is h200-measured; the runtime, written beside the trace,
has the host costs calib measured (an empty kernel launch, `facts.launch_issue_host`) for launches and copy issues and
no per-step cost: nothing is fitted to these rows.
"""
import json
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SIM = os.path.join(ROOT, "build", "bin", "sim")
RAW = os.path.join(ROOT, "results", "validation", "lease1", "gemv_chain.jsonl")
OUT = os.path.join(ROOT, "results", "validation")
TRACE = "/tmp/tiersim_gemv_chain.trace"
RUNTIME = "/tmp/tiersim_gemv_chain_runtime.yaml"


def write_trace(layers, hidden, inter, q, kv, steps):
    shapes = [(q, hidden), (kv, hidden), (kv, hidden), (hidden, q), (inter, hidden), (inter, hidden), (hidden, inter)]
    names = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    lines = ["tiersim-trace 1", "meta model gemv-chain", "meta batch 1",
             "meta source experiments/validate/gemv_chain_compare.py: the gemv_chain harness's step"]
    tid = 0
    for layer in range(layers):
        for (out, inn), name in zip(shapes, names):
            lines.append(f"tensor {tid} weight {out * inn * 2} {layer} layers.{layer}.{name}")
            tid += 1
    act = tid
    lines.append(f"tensor {act} act {max(hidden, inter, q) * 4} -1 activations")
    for _ in range(steps):
        lines.append("step decode tokens=1")
        w = 0
        for layer in range(layers):
            for out, inn in shapes:
                lines.append(f"op gemv layer={layer} flops={2 * out * inn} read={w},{act}:{inn * 2} write={act}:{out * 2}")
                w += 1
    lines.append("end")
    with open(TRACE, "w") as f:
        f.write("\n".join(lines) + "\n")


def write_runtime():
    """A bare C++ loop's host costs: calib's measured empty-kernel launch for every launch and copy issue, nothing per
    step (calib/runtimes/SCHEMA.md)."""
    text = open(os.path.join(ROOT, "calib", "profiles", "h200-measured.yaml")).read()
    launch_us = float(re.search(r'launch_issue_host: "([0-9.]+) us', text).group(1))
    with open(RUNTIME, "w") as f:
        f.write("tiersim_runtime: 1\nname: gemv-chain\ndescription: \"the gemv_chain harness: a bare C++ loop\"\n"
                "source: \"calib's measured empty-kernel launch cost (h200-measured facts.launch_issue_host) for every "
                "launch and copy issue; no per-step cost\"\n"
                f"per_launch: \"{launch_us} us\"\nper_copy: \"{launch_us} us\"\nper_prefetch: \"{launch_us} us\"\n"
                "per_step: \"0 us\"\nnew_length_attention: \"0 us\"\npeer_copy_sync: \"0 us\"\n"
                "peer_copy_overlaps_compute: true\n")
    return launch_us


def policy_args(config, layers):
    if config == "resident":
        return ["--policy", "resident"]
    if config.startswith("copy:"):
        _, k, pf, mem = config.split(":")
        return ["--policy", "layers", "--layers", str(layers - int(k)), "--prefetch", pf, "--host-memory", mem]
    advice = config.split(":")[1]
    policy = {"none": "um", "prefer-cpu": "um-cpu", "accessed-by": "um-accessedby", "read-mostly": "um-readmostly"}[advice]
    return ["--policy", policy, "--um-scope", "weights"]


def main():
    rows = [json.loads(l) for l in open(RAW) if l.startswith("{")]
    r0 = rows[0]
    layers, hidden, inter = r0["layers"], r0["hidden"], r0["inter"]
    write_trace(layers, hidden, inter, 4096, 1024, r0["steps"] + 1)
    launch_us = write_runtime()
    lines = [f"Host cost per launch and per copy issue: {launch_us} us (calib's empty-kernel launch); nothing fitted.", "",
             "| configuration | measured step | predicted | error | measured first step | predicted first step |",
             "|---|---|---|---|---|---|"]
    errs = []
    for r in rows:
        p = subprocess.run([SIM, "--trace", TRACE, "--hw", "h200-measured", "--runtime", RUNTIME, "--json"] +
                           policy_args(r["config"], layers),
                           capture_output=True, text=True)
        if p.returncode != 0:
            lines.append(f"| {r['config']} | {r['decode_median_s'] * 1e3:.2f} ms | refused: {p.stderr.strip()} | | | |")
            continue
        j = json.loads(p.stdout)
        err = (j["step_seconds"] - r["decode_median_s"]) / r["decode_median_s"]
        errs.append(abs(err))
        lines.append(f"| {r['config']} | {r['decode_median_s'] * 1e3:.2f} ms | {j['step_seconds'] * 1e3:.2f} ms | {100 * err:+.1f}% | "
                     f"{r['first_step_s'] * 1e3:.1f} ms | {j['first_step_seconds'] * 1e3:.1f} ms |")
    lines.insert(1, f"Mean absolute error over {len(errs)} rows: {100 * statistics.mean(errs):.1f}%; worst {100 * max(errs):.1f}%.")
    with open(os.path.join(OUT, "gemv_chain_table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
