#!/usr/bin/python3
"""Qwen3-14B (bf16, batch 1) on a hardware profile under every unified-memory policy and under the
split policies, one table. Usage (from the repository root, after building):
    /usr/bin/python3 experiments/um/compare_policies.py [--hw rtx4090] > results/um/qwen3-14b-rtx4090.md
"""
import argparse
import json
import subprocess
import sys

SIM = "./build/bin/sim"
TRACE = "traces/qwen.trace"

ROWS = [
    ("um", ["--policy", "um"]),
    ("um, per-tensor cudaMallocManaged", ["--policy", "um", "--allocator", "per-tensor"]),
    ("um-readmostly", ["--policy", "um-readmostly"]),
    ("um-prefetch (1 layer ahead)", ["--policy", "um-prefetch", "--prefetch", "1"]),
    ("um-prefetch (4 layers ahead)", ["--policy", "um-prefetch", "--prefetch", "4"]),
    ("um-cpu", ["--policy", "um-cpu"]),
    ("um-accessedby", ["--policy", "um-accessedby"]),
    ("um-cpu, weights only managed", ["--policy", "um-cpu", "--um-scope", "weights"]),
    ("ratio, default split (least that fits)", ["--policy", "ratio"]),
    ("ratio, GB off = um's oversubscription", ["--policy", "ratio", "--offload-gb", "OVERSUB"]),
    ("ratio, 2 GB more off than um's oversubscription", ["--policy", "ratio", "--offload-gb", "OVERSUB+2"]),
    ("ratio, default split, prefetch 1", ["--policy", "ratio", "--prefetch", "1"]),
    ("layers, offloaded layers on the CPU", ["--policy", "layers", "--offload-exec", "cpu"]),
]


def run(args, hw):
    cmd = [SIM, "--trace", TRACE, "--hw", hw, "--json"] + args
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip().replace("error: ", "")
    return json.loads(p.stdout), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hw", default="rtx4090")
    a = ap.parse_args()
    um, err = run(["--policy", "um"], a.hw)
    if err:
        sys.exit(err)
    # Bytes the managed footprint exceeds the GPU memory left for it, in GB (1e9).
    m = um["managed_memory"]
    oversub_gb = max(0.0, m["footprint_bytes"] - m["gpu_capacity_bytes"]) / 1e9
    print(f"# Qwen3-14B bf16, batch 1, on `{a.hw}`: unified memory against splits\n")
    print(f"Made by `/usr/bin/python3 experiments/um/compare_policies.py --hw {a.hw}` from `{TRACE}` "
          f"(512-token prompt, 64 decode tokens), tiersim {um['git_sha']}. Event engine; every number is a prediction.\n")
    print("| policy | tokens/s | decode step | peak VRAM | host->GPU per step | GPU->host per step | read remotely per step | blocks faulted / evicted per step |")
    print("|---|---|---|---|---|---|---|---|")
    for name, args in ROWS:
        # "OVERSUB" and "OVERSUB+2" stand for um's oversubscription in GB (plus 2).
        args = [f"{oversub_gb + float(x[len('OVERSUB'):] or 0):.2f}" if x.startswith("OVERSUB") else x for x in args]
        j, err = run(args, a.hw)
        label = name.replace("um's oversubscription", f"um's oversubscription ({oversub_gb:.2f} GB)")
        if "--offload-gb" in args:
            label += f" [--offload-gb {args[args.index('--offload-gb') + 1]}]"
        if err:
            print(f"| {label} | does not fit: {err} | | | | | | |")
            continue
        gib = 2 ** 30
        um_stats = j.get("managed_memory")
        faults = f"{um_stats['faulted_blocks_per_step']} / {um_stats['evicted_blocks_per_step']}" if um_stats else "-"
        print(f"| {label} | {j['tps']:.3f} | {j['step_seconds'] * 1e3:.0f} ms | {j['vram_peak_bytes'] / gib:.2f} GiB | "
              f"{j['h2d_bytes_per_step'] / gib:.2f} GiB | {j['d2h_bytes_per_step'] / gib:.2f} GiB | "
              f"{j['remote_read_bytes_per_step'] / gib:.2f} GiB | {faults} |")


if __name__ == "__main__":
    main()
