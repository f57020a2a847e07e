"""What the framework comparisons share: run tiersim on one measured row and write the error table."""
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.environ.get("TIERSIM_SIM", os.path.join(ROOT, "build", "bin", "sim"))
MODELS = {"Qwen3-8B": "traces/models/qwen3-8b.json", "Qwen3-14B": "traces/models/qwen3-14b.json",
          "Qwen3-30B-A3B, first 24 layers": "experiments/llamacpp/models/qwen3-30b-a3b-L24.json"}


def predict(row, regime, strategy_args):
    """tiersim's median decode step and cpu-resident weight bytes for a measured row (decode_latency's
    fields), on the shipped H100 hardware and runtime profiles (nothing calibrated on these rows)."""
    args = [SIM, "--model", MODELS[row["model"]], "--prompt", str(row["prompt"]),
            "--decode", str(row["warmup"] + row["tokens"]), "--hw", "h100-measured", "--runtime", "pytorch-hf-h100",
            "--lengths", regime, "--json"] + strategy_args
    out = json.loads(subprocess.run(args, capture_output=True, text=True, check=True, cwd=ROOT).stdout)
    return out["step_seconds"], out["memory_per_tier"]["cpu"]["weights_bytes"]


def write_table(folder, results_file, label, strategy_args, offloaded, table="table.md"):
    """Both regimes of every row of FOLDER/RESULTS_FILE against tiersim; writes FOLDER/TABLE."""
    rows = [json.loads(line) for line in open(os.path.join(folder, results_file))]
    lines = ["| configuration | regime | measured | predicted | error | offloaded bytes: run / tiersim |",
             "|---|---|---|---|---|---|"]
    errors = []
    for r in rows:
        for regime, key in (("fresh", "decode_median_s"), ("warm", "warm_decode_median_s")):
            step, cpu_bytes = predict(r, regime, strategy_args(r))
            err = (step - r[key]) / r[key]
            errors.append(abs(err))
            lines.append(f"| {label(r)} | {regime} | {r[key] * 1e3:.1f} ms | {step * 1e3:.1f} ms | {100 * err:+.1f}% | "
                         f"{offloaded(r)} / {cpu_bytes} |")
    lines.append("")
    lines.append(f"{len(errors)} rows, mean absolute error {100 * sum(errors) / len(errors):.1f}%, "
                 f"worst {100 * max(errors):.1f}%.")
    open(os.path.join(folder, table), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))
