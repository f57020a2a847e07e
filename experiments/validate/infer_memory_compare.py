"""tiersim's PyTorch allocator replay for inference against the H100 measurements of
results/validation/inference-memory/infer_memory.jsonl (experiments/validate/infer_memory.py, run by
experiments/validate/run_memory_lease.sh: transformers' Qwen3ForCausalLM with random bf16 weights built on the GPU,
SDPA, a DynamicCache, prefill of 4k/16k/32k tokens with logits_to_keep=1, then 32 decode steps; the peaks reset
before each phase). tiersim: `sim run --model traces/models/MODEL.json --policy resident --hw h100-measured
--runtime pytorch-hf-h100 --prompt P --decode 32 --json`, its "pytorch_memory" (sim/model/inference/
inference_allocations.hpp replayed through the caching allocator model); nothing fitted to these rows.

Writes results/validation/inference-memory/compare.md and prints it. Then accelerate's own offload
(accelerate/infer_memory_accelerate*.jsonl: infer_memory.py --accelerate CAP, from_pretrained(device_map="auto",
max_memory={0: CAP}) with its hooks copying each offloaded module's weights in for its forward), each row predicted
with `--policy accelerate --placement accelerate.auto:max_memory=0=CAP;cpu=100GiB`: accelerate/compare.md. Then a
mixture of experts (moe/infer_memory_moe.jsonl and infer_memory_mixtral.jsonl: Qwen3-30B-A3B's first 24 layers and
Mixtral-8x7B's first 4, grouped_mm experts): moe/compare.md.
  /usr/bin/python3 experiments/validate/infer_memory_compare.py   (after building; TIERSIM_SIM=path/to/sim)
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_compare  # noqa: E402  (its table writer)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.environ.get("TIERSIM_SIM", os.path.join(ROOT, "build", "bin", "sim"))
HERE = os.path.join(ROOT, "results", "validation", "inference-memory")
MODELS = {"Qwen3-0.6B": "traces/models/qwen3-0.6b.json", "Qwen3-4B": "traces/models/qwen3-4b.json",
          "Qwen3-8B": "traces/models/qwen3-8b.json", "Llama-3.1-8B": "traces/models/llama-3.1-8b.json",
          "Qwen3-30B-A3B, first 24 layers": "experiments/llamacpp/models/qwen3-30b-a3b-L24.json",
          "Mixtral-8x7B, first 4 layers": "experiments/validate/calibration_models/mixtral-8x7b-L4.json"}
GIB = 1024.0 ** 3
FILES = ["infer_memory.jsonl", "infer_memory_2.jsonl"]  # the first lease's rows, then the second's
KEYS = [("prefill", "allocated"), ("prefill", "reserved"), ("decode", "allocated"), ("decode", "reserved")]


def predict(row):
    policy = ["--policy", "resident"]
    if row.get("accelerate_cap"):
        cap = row["accelerate_cap"]
        policy = ["--policy", "accelerate", "--placement", f"accelerate.auto:max_memory=0={cap};cpu=100GiB"]
    args = [SIM, "run", "--json", "--model", MODELS[row["model"]]] + policy + ["--hw", "h100-measured",
            "--runtime", "pytorch-hf-h100", "--prompt", str(row["prompt"]), "--decode", str(row["decode"]),
            "--batch", str(row.get("batch", 1))]
    if row.get("PYTORCH_CUDA_ALLOC_CONF"):
        args += ["--alloc-conf", row["PYTORCH_CUDA_ALLOC_CONF"]]
    out = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        raise SystemExit(f"sim failed: {' '.join(args)}\n{out.stderr}{out.stdout[-500:]}")
    return json.loads(out.stdout)["pytorch_memory"]


def table(rows, columns, cells_of, footer, path):
    """One row per measurement: its own columns, then each peak measured / predicted with the error; the mean
    absolute (worst) errors below."""
    lines = ["| " + " | ".join(columns) + " | " + " | ".join(f"{p} peak {k} GiB meas / pred | err" for p, k in KEYS) + " |",
             "|" + "---|" * len(columns) + "---|---|" * len(KEYS)]
    errors = {k: [] for k in KEYS}
    for r in rows:
        p = predict(r)
        cells = []
        for phase, kind in KEYS:
            m, q = r[f"{phase}_peak_{kind}"], p[f"{phase}_peak_{kind}_bytes"]
            e = 100.0 * (q - m) / m
            errors[(phase, kind)].append(e)
            cells.append(f"{m / GIB:.2f} / {q / GIB:.2f} | {e:+.1f}%")
        lines.append("| " + " | ".join(str(c) for c in cells_of(r)) + " | " + " | ".join(cells) + " |")
    lines += ["", footer]
    train_compare.write_table(lines, errors, path, "{} peak {}")


def measured(folder, names):
    rows = [json.loads(line) for name in names if os.path.exists(os.path.join(folder, name))
            for line in open(os.path.join(folder, name))]
    return [r for r in rows if "error" not in r and not r.get("skipped")]


def main():
    rows = measured(HERE, FILES)
    table(rows, ["model", "batch", "prompt", "PYTORCH_CUDA_ALLOC_CONF"],
          lambda r: [r["model"], r.get("batch", 1), r["prompt"], r.get("PYTORCH_CUDA_ALLOC_CONF") or ""],
          f"{len(rows)} rows, each with 32 decode steps after the prefill. Mean absolute error (worst):",
          os.path.join(HERE, "compare.md"))
    acc = os.path.join(HERE, "accelerate")
    rows = measured(acc, sorted(n for n in os.listdir(acc) if n.endswith(".jsonl")))
    table(rows, ["model", "cap", "offloaded GB", "prompt"],
          lambda r: [r["model"], r["accelerate_cap"], f"{r['offloaded_bytes'] / 1e9:.2f}", r["prompt"]],
          f"{len(rows)} rows, each with {rows[0]['decode']} decode steps after the prefill (accelerate "
          f"{rows[0]['accelerate']}, transformers {rows[0]['transformers']}). Mean absolute error (worst):",
          os.path.join(acc, "compare.md"))
    moe = os.path.join(HERE, "moe")
    rows = measured(moe, ["infer_memory_moe.jsonl", "infer_memory_mixtral.jsonl"])
    table(rows, ["model", "prompt"], lambda r: [r["model"], r["prompt"]],
          f"{len(rows)} rows, each with {rows[0]['decode']} decode steps after the prefill (transformers "
          f"{rows[0]['transformers']}, grouped_mm experts). Mean absolute error (worst):",
          os.path.join(moe, "compare.md"))
    rows = measured(moe, ["infer_memory_moe_accelerate_20gib.jsonl", "infer_memory_moe_accelerate_12gib.jsonl"])
    table(rows, ["model", "cap", "offloaded GB", "prompt"],
          lambda r: [r["model"], r["accelerate_cap"], f"{r['offloaded_bytes'] / 1e9:.2f}", r["prompt"]],
          f"{len(rows)} rows under accelerate's offload, each with {rows[0]['decode']} decode steps after the prefill "
          f"(accelerate {rows[0]['accelerate']}, transformers {rows[0]['transformers']}). Mean absolute error (worst):",
          os.path.join(moe, "compare_accelerate.md"))


if __name__ == "__main__":
    main()
