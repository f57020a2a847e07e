"""tiersim's `accelerate` preset on a mixture of experts against accelerate's own offload, measured on a lent H100.

Reads results/validation/moe-accelerate/accelerate_moe.jsonl (experiments/validate/run_moe_accelerate_lease.sh:
Qwen3-30B-A3B's first 24 layers, random bf16 weights, from_pretrained(device_map="auto", max_memory={0: CAP})) and
predicts each row with the shipped h100-measured + pytorch-hf-h100 (nothing calibrated on these rows): the same
model, prompt, max_memory and regime, transformers' default experts implementation (grouped_mm). Writes
results/validation/moe-accelerate/table.md.
  /usr/bin/python3 experiments/validate/moe_accelerate_compare.py   (after building)
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "frameworks"))
from accelerate_compare import strategy  # noqa: E402
from compare_runs import ROOT, write_table  # noqa: E402

if __name__ == "__main__":
    write_table(os.path.join(ROOT, "results", "validation", "moe-accelerate"), "accelerate_moe.jsonl",
                lambda r: f"{r['model']} {r['config']}", strategy,
                lambda r: r.get("offloaded_param_bytes", {}).get("offloaded", 0))
