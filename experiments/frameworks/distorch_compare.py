"""tiersim against DisTorch-style offload measured on a lent GPU (experiments/validate/distorch_decode.py).

Each measured row ran the device map DisTorch's own allocation code produced on that machine (written
beside the results); tiersim predicts that placement (--placement device_map:file=...) with per-module
casts from pageable memory on the compute stream (--offload copy:pageable: the casts the harness does),
on the shipped h100-measured + pytorch-hf-h100 (nothing calibrated on these rows). Writes table.md.
  /usr/bin/python3 experiments/frameworks/distorch_compare.py   (after building)
"""
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.environ.get("TIERSIM_SIM", os.path.join(ROOT, "build", "bin", "sim"))
HERE = os.path.join(ROOT, "results", "frameworks", "distorch")
MODELS = {"Qwen3-8B": "traces/models/qwen3-8b.json"}


def predict(row, regime):
    args = [SIM, "--model", MODELS[row["model"]], "--prompt", str(row["prompt"]),
            "--decode", str(row["warmup"] + row["tokens"]), "--hw", "h100-measured", "--runtime", "pytorch-hf-h100",
            "--placement", "device_map:file=" + os.path.join(HERE, row["device_map_file"]), "--offload", "copy:pageable",
            "--lengths", regime, "--json"]
    out = json.loads(subprocess.run(args, capture_output=True, text=True, check=True, cwd=ROOT).stdout)
    return out["step_seconds"], out["memory_per_tier"]["cpu"]["weights_bytes"]


def main():
    rows = [json.loads(l) for l in open(os.path.join(HERE, "distorch_decode.jsonl"))]
    lines = ["| allocation (DisTorch string) | regime | measured | predicted | error | offloaded bytes: run / tiersim |",
             "|---|---|---|---|---|---|"]
    errors = []
    for r in rows:
        for regime, key in (("fresh", "decode_median_s"), ("warm", "warm_decode_median_s")):
            step, cpu_bytes = predict(r, regime)
            err = (step - r[key]) / r[key]
            errors.append(abs(err))
            lines.append(f"| `{r['allocation']}` | {regime} | {r[key] * 1e3:.1f} ms | {step * 1e3:.1f} ms | "
                         f"{100 * err:+.1f}% | {r['offloaded_bytes']} / {cpu_bytes} |")
    lines.append("")
    lines.append(f"{len(errors)} rows, mean absolute error {100 * sum(errors) / len(errors):.1f}%, "
                 f"worst {100 * max(errors):.1f}%.")
    open(os.path.join(HERE, "table.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
