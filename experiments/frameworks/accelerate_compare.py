"""tiersim's `accelerate` preset against accelerate's own offload, measured on a lent GPU.

Reads results/frameworks/accelerate/accelerate_decode.jsonl (experiments/validate/accelerate_decode.py)
and predicts each row with the shipped hardware and runtime of that GPU kind (h100-measured +
pytorch-hf-h100; nothing calibrated on these rows), the same model, prompt, max_memory and regime.
Writes results/frameworks/accelerate/table.md.
  /usr/bin/python3 experiments/frameworks/accelerate_compare.py   (after building)
"""
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.environ.get("TIERSIM_SIM", os.path.join(ROOT, "build", "bin", "sim"))
HERE = os.path.join(ROOT, "results", "frameworks", "accelerate")
MODELS = {"Qwen3-8B": "traces/models/qwen3-8b.json"}


def predict(row, regime):
    args = [SIM, "--model", MODELS[row["model"]], "--prompt", str(row["prompt"]),
            "--decode", str(row["warmup"] + row["tokens"]), "--hw", "h100-measured", "--runtime", "pytorch-hf-h100",
            "--lengths", regime, "--json"]
    if row["config"] == "resident":
        args += ["--policy", "resident"]
    else:
        mm = ";".join(f"{k}={v} B" if isinstance(v, int) else f"{k}={v}" for k, v in row["max_memory"].items())
        args += ["--policy", "accelerate", "--placement", f"accelerate.{row['config'].split(':')[1]}:max_memory={mm}"]
    out = json.loads(subprocess.run(args, capture_output=True, text=True, check=True, cwd=ROOT).stdout)
    return out["step_seconds"], out["memory_per_tier"]["cpu"]["weights_bytes"]


def main():
    rows = [json.loads(l) for l in open(os.path.join(HERE, "accelerate_decode.jsonl"))]
    lines = ["| configuration | regime | measured | predicted | error | offloaded bytes: accelerate / tiersim |",
             "|---|---|---|---|---|---|"]
    errors = []
    for r in rows:
        for regime, key in (("fresh", "decode_median_s"), ("warm", "warm_decode_median_s")):
            step, cpu_bytes = predict(r, regime)
            err = (step - r[key]) / r[key]
            errors.append(abs(err))
            off = r.get("offloaded_param_bytes", {}).get("offloaded", 0)
            lines.append(f"| {r['model']} {r['config']} | {regime} | {r[key] * 1e3:.1f} ms | {step * 1e3:.1f} ms | "
                         f"{100 * err:+.1f}% | {off} / {cpu_bytes} |")
    lines.append("")
    lines.append(f"{len(errors)} rows, mean absolute error {100 * sum(errors) / len(errors):.1f}%, "
                 f"worst {100 * max(errors):.1f}%.")
    open(os.path.join(HERE, "table.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
