"""tiersim against transformers' Qwen3Moe decode measured on an H100 (experiments/validate/decode_latency.py
with --experts-impl grouped_mm,batched_mm,eager): Qwen3-30B-A3B's first 24 layers, random bf16 weights,
resident, batch 1, 16 decoded tokens after 128/192/256-token prompts, each at fresh and warm lengths.
tiersim predicts `--model experiments/llamacpp/models/qwen3-30b-a3b-L24.json --policy resident` on the shipped
h100-measured + pytorch-hf-h100 profiles, nothing fitted, with `--experts-impl` the row's experts implementation
(grouped_mm or eager: their kernels and eager's host syncs as experiments/validate/moe_experts_kernels.py counted
them, results/validation/moe-hf/kernels); tiersim has no batched_mm, whose row is predicted as grouped_mm and
shown for what it is. Writes results/validation/moe-hf/table.md.

  /usr/bin/python3 experiments/validate/moe_hf_compare.py   (after building)
"""
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.environ.get("TIERSIM_SIM", os.path.join(ROOT, "build", "bin", "sim"))
HERE = os.path.join(ROOT, "results", "validation", "moe-hf")
MODEL = "experiments/llamacpp/models/qwen3-30b-a3b-L24.json"


def predict(r, regime):
    args = [SIM, "--json", "--model", MODEL, "--prompt", str(r["prompt"]), "--decode", str(r["warmup"] + r["tokens"]),
            "--hw", "h100-measured", "--runtime", "pytorch-hf-h100", "--lengths", regime, "--policy", "resident",
            "--experts-impl", r["experts_implementation"] if r["experts_implementation"] != "batched_mm" else "grouped_mm"]
    out = json.loads(subprocess.run(args, capture_output=True, text=True, check=True, cwd=ROOT).stdout)
    return out["step_seconds"], args[1:]


def main():
    rows = [json.loads(line) for line in open(os.path.join(HERE, "moe_hf.jsonl"))]
    lines = ["| experts implementation | kernels / step | regime | measured | predicted | error |", "|---|---|---|---|---|---|"]
    for r in rows:
        for regime, key in (("fresh", "decode_median_s"), ("warm", "warm_decode_median_s")):
            t, args = predict(r, regime)
            impl = r["experts_implementation"] + (" (as grouped_mm)" if r["experts_implementation"] == "batched_mm" else "")
            lines.append(f"| {impl} | {r['kernels_per_step']} | {regime} | {r[key] * 1e3:.1f} ms | "
                         f"{t * 1e3:.1f} ms | {100 * (t - r[key]) / r[key]:+.1f}% |")
    used = rows[0]["experts_used_decode_union_random_inputs_per_layer"]
    lines += ["", f"transformers {rows[0]['transformers']}, torch {rows[0]['torch']}, {rows[0]['gpu']}. The random-weight "
              f"router, 16 decode steps fed random tokens: {used[0]} distinct experts in layer 0 (uniform: "
              f"{rows[0]['experts_uniform_expected']['decode_union']:.0f}), {min(used)}-{max(used[8:])} in layers 8-23.", "",
              "Each row: `sim " + " ".join(args) + "` (its prompt, regime and experts implementation)."]
    open(os.path.join(HERE, "table.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
