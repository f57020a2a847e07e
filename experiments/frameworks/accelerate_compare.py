"""tiersim's `accelerate` preset against accelerate's own offload, measured on a lent GPU.

Reads results/frameworks/accelerate/accelerate_decode.jsonl (experiments/validate/accelerate_decode.py)
and predicts each row with the shipped hardware and runtime of that GPU kind (h100-measured +
pytorch-hf-h100; nothing calibrated on these rows), the same model, prompt, max_memory and regime.
Writes results/frameworks/accelerate/table.md.
  /usr/bin/python3 experiments/frameworks/accelerate_compare.py   (after building)
"""
import os

from compare_runs import ROOT, write_table


def strategy(row):
    if row["config"] == "resident":
        return ["--policy", "resident"]
    mm = ";".join(f"{k}={v} B" if isinstance(v, int) else f"{k}={v}" for k, v in row["max_memory"].items())
    return ["--policy", "accelerate", "--placement", f"accelerate.{row['config'].split(':')[1]}:max_memory={mm}"]


if __name__ == "__main__":
    write_table(os.path.join(ROOT, "results", "frameworks", "accelerate"), "accelerate_decode.jsonl",
                lambda r: f"{r['model']} {r['config']}", strategy,
                lambda r: r.get("offloaded_param_bytes", {}).get("offloaded", 0))
