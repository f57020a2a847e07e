"""tiersim against seed 000's allocator measured on an H100 (results/validation/seed-allocator): every
tensor from cudaMallocManaged through the per-tensor pluggable allocator, the advice on the weights or
on every allocation, resident or under a layer split. Predicted with the shipped h100-measured +
pytorch-hf-h100, nothing fitted to these rows; writes results/validation/seed-allocator/table.md.
  /usr/bin/python3 experiments/validate/seed_allocator_compare.py   (after building)
"""
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.environ.get("TIERSIM_SIM", os.path.join(ROOT, "build", "bin", "sim"))
HERE = os.path.join(ROOT, "results", "validation", "seed-allocator")
ADVICE = {"none": "", "prefer-cpu": "prefer-cpu,", "accessed-by": "prefer-cpu,accessed-by,"}


def strategy(config, layers):
    """config: managed:ADVICE[:everything][+offload:K:0:pinned]"""
    head, _, split = config.partition("+")
    parts = head.split(":")
    memory = f"managed:{ADVICE[parts[1]]}allocator=per-tensor" + (",advise=all" if "everything" in parts else "")
    if not split:
        return ["--placement", "all-gpu", "--memory", memory]
    k = int(split.split(":")[1])
    return ["--placement", f"layers:layers={layers - k}", "--memory", memory, "--offload", "copy:pinned"]


def predict(row, regime):
    args = [SIM, "--model", "traces/models/qwen3-8b.json", "--prompt", str(row["prompt"]),
            "--decode", str(row["warmup"] + row["tokens"]), "--hw", "h100-measured", "--runtime", "pytorch-hf-h100",
            "--lengths", regime, "--json"] + strategy(row["config"], row["layers"])
    out = subprocess.run(args, capture_output=True, text=True, check=True, cwd=ROOT).stdout
    return json.loads(out)["step_seconds"]


def main():
    lines = ["| configuration | regime | measured | predicted | error |", "|---|---|---|---|---|"]
    errors = []
    for name in ("seed_allocator.jsonl", "seed_allocator_split.jsonl"):
        for line in open(os.path.join(HERE, name)):
            r = json.loads(line)
            for regime, key in (("fresh", "decode_median_s"), ("warm", "warm_decode_median_s")):
                p = predict(r, regime)
                err = (p - r[key]) / r[key]
                errors.append(abs(err))
                lines.append(f"| {r['config']} | {regime} | {r[key] * 1e3:.1f} ms | {p * 1e3:.1f} ms | {100 * err:+.1f}% |")
    lines += ["", f"{len(errors)} rows, mean absolute error {100 * sum(errors) / len(errors):.1f}%, "
              f"worst {100 * max(errors):.1f}%."]
    open(os.path.join(HERE, "table.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
