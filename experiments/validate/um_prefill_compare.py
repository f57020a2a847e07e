"""tiersim against prompts read from host memory: Qwen3-8B through the per-tensor cudaMallocManaged allocator,
weights PreferredLocation=CPU + AccessedBy (results/validation/um-prefill/run.sh: decode_latency.py --managed
accessed-by, prompts 512, 2048, 4096, one process each). The warm prefill (the second decode of the process:
its one-time costs paid) against `sim --policy um-accessedby --allocator per-tensor --um-filled gpu --lengths warm`
on h100-measured + pytorch-hf-h100, nothing fitted; and the same with the profile as it was before
managed_memory.remote_gemm_reads and fresh_touch (every product reading a host-resident weight once, no first touch
of the allocator's fresh ranges), from git.

Writes results/validation/um-prefill/table.md and prints it.
  /usr/bin/python3 experiments/validate/um_prefill_compare.py   (after building; TIERSIM_SIM=path/to/sim)
"""
import json
import os
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.environ.get("TIERSIM_SIM", os.path.join(ROOT, "build", "bin", "sim"))
HERE = os.path.join(ROOT, "results", "validation", "um-prefill")
BEFORE = "6b18649"  # the last commit whose h100-measured had neither remote_gemm_reads nor fresh_touch


def predict(prompt, hw):
    args = [SIM, "--json", "--model", "traces/models/qwen3-8b.json", "--prompt", str(prompt), "--decode", "3",
            "--hw", hw, "--runtime", "pytorch-hf-h100", "--lengths", "warm", "--policy", "um-accessedby",
            "--allocator", "per-tensor", "--um-filled", "gpu"]
    out = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        raise SystemExit(f"sim failed: {out.stderr}")
    return json.loads(out.stdout)


def pct(p, m):
    return f"{100 * (p - m) / m:+.1f}%"


def main():
    rows = [json.loads(line) for line in open(os.path.join(HERE, "um_prefill.jsonl"))]
    with tempfile.TemporaryDirectory() as tmp:
        old = os.path.join(tmp, "h100-before.yaml")
        with open(old, "w") as f:
            f.write(subprocess.run(["git", "show", f"{BEFORE}:calib/profiles/h100-measured.yaml"], cwd=ROOT,
                                   capture_output=True, text=True, check=True).stdout)
        lines = ["| prompt | measured warm prefill | predicted | error | predicted before (6b18649) | error | "
                 "measured decode (warm) | predicted | error |", "|---|---|---|---|---|---|---|---|---|"]
        errors, before = [], []
        for r in rows:
            now, then = predict(r["prompt"], "h100-measured"), predict(r["prompt"], old)
            m = r["warm_prefill_s"]
            errors.append(abs(now["prefill_seconds"] - m) / m)
            before.append(abs(then["prefill_seconds"] - m) / m)
            lines.append(f"| {r['prompt']} | {m:.3f} s | {now['prefill_seconds']:.3f} s | {pct(now['prefill_seconds'], m)} | "
                         f"{then['prefill_seconds']:.3f} s | {pct(then['prefill_seconds'], m)} | "
                         f"{r['warm_decode_median_s'] * 1e3:.0f} ms | {now['step_seconds'] * 1e3:.0f} ms | "
                         f"{pct(now['step_seconds'], r['warm_decode_median_s'])} |")
    r0 = rows[0]
    lines += ["", f"Prefill: mean |error| {100 * sum(errors) / len(errors):.1f}% (6b18649's profile: "
              f"{100 * sum(before) / len(before):.1f}%). {r0['gpu']}, torch {r0['torch']}, transformers "
              f"{r0['transformers']}; fresh prefills (each process's first forward): "
              + ", ".join(f"{r['prompt']}: {r['prefill_s']:.3f} s" for r in rows) + "."]
    open(os.path.join(HERE, "table.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
