"""`sim train` against training steps measured on an H100 (results/validation/training/train_memory.jsonl,
made by experiments/validate/run_train_memory.sh: transformers' Qwen3ForCausalLM with random weights, SDPA,
the model's own loss, torch.optim.AdamW or SGD, 2 warm-up + 5 measured steps, PyTorch's caching allocator as
found). Nothing in sim train was fitted to these rows: its tensors come from reading transformers' and torch's
code (sim/model/training), its allocator from c10/cuda/CUDACachingAllocator.cpp, its step time from the shipped
h100-measured + pytorch-hf-h100 profiles.

For each row: peak allocated (torch.cuda.max_memory_allocated over the warm-up and measured steps), peak
reserved (max_memory_reserved), reserved - allocated (what the allocator model adds), the peak of each phase
(forward with the loss, backward, optimizer step), and the step time (median of the measured steps).

Writes results/validation/training/compare.md and prints it.
  /usr/bin/python3 experiments/validate/train_compare.py   (after building; TIERSIM_SIM=path/to/sim)
"""
import json
import os
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.environ.get("TIERSIM_SIM", os.path.join(ROOT, "build", "bin", "sim"))
HERE = os.path.join(ROOT, "results", "validation", "training")
MODELS = {"Qwen3-0.6B": "traces/models/qwen3-0.6b.json", "Qwen3-1.7B": "traces/models/qwen3-1.7b.json",
          "Qwen3-4B": "traces/models/qwen3-4b.json", "Qwen3-8B": "traces/models/qwen3-8b.json",
          "Llama-3.1-8B": "traces/models/llama-3.1-8b.json"}
PRECISION = {("float32", "bf16"): "fp32-autocast", ("bfloat16", "none"): "bf16", ("float32", "none"): "fp32"}
GIB = 1024.0 ** 3
FILES = ["train_memory.jsonl", "train_memory_2.jsonl", "train_lora.jsonl"]  # by lease; LoRA rows last


def sim_args(row):
    args = ["train", "--json", "--model", MODELS[row["model"]], "--hw", "h100-measured",
            "--runtime", "pytorch-hf-h100", "--precision", PRECISION[(row["weights_dtype"], row["autocast"])],
            "--optimizer", row["optimizer"], "--batch", str(row["batch"]), "--seq", str(row["seq"])]
    if row.get("PYTORCH_CUDA_ALLOC_CONF"):
        args += ["--alloc-conf", row["PYTORCH_CUDA_ALLOC_CONF"]]
    if row.get("lora_rank"):
        args += ["--lora", str(row["lora_rank"]), "--lora-targets", row["lora_targets"]]
    if row.get("optimizer_offload"):
        args += ["--optimizer-offload", row["optimizer_offload"]]
    return args + (["--checkpointing"] if row["gradient_checkpointing"] else [])


def predict(row):
    out = subprocess.run([SIM] + sim_args(row), capture_output=True, text=True, cwd=ROOT)
    if out.returncode not in (0, 3):  # 3: does not fit, still a prediction
        raise SystemExit(f"sim failed for {row['model']} {row['setup']}: {out.stderr}")
    return json.loads(out.stdout)


def err(pred, meas):
    return 100.0 * (pred - meas) / meas


def write_table(lines, errors, path, label="{}"):
    """Appends each error list's mean absolute and worst value (label formats its key), writes and prints."""
    for k, v in errors.items():
        lines.append(f"- {label.format(*k) if isinstance(k, tuple) else label.format(k)}: "
                     f"{statistics.mean(abs(x) for x in v):.1f}% ({max(v, key=abs):+.1f}%)")
    text = "\n".join(lines) + "\n"
    with open(path, "w") as f:
        f.write(text)
    print(text, end="")


def main():
    rows = [json.loads(line) for name in FILES if os.path.exists(os.path.join(HERE, name))
            for line in open(os.path.join(HERE, name))]
    rows = [r for r in rows if not r.get("oom") and not r.get("skipped") and not r.get("error")]
    lines = ["| model | set-up | ckpt | shape | PYTORCH_CUDA_ALLOC_CONF | alloc GiB meas / pred | err | reserved GiB meas / pred | err |"
             " reserved-alloc GiB meas / pred | fwd peak err | bwd peak err | opt peak err |"
             " step ms meas / pred | err |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    errors = {"alloc": [], "reserved": [], "step": [], "forward": [], "backward": [], "optimizer": []}
    for r in rows:
        p = predict(r)
        m_alloc, m_res = r["max_memory_allocated"], r["max_memory_reserved"]
        p_alloc, p_res = p["allocator_peak_allocated_bytes"], p["allocator_peak_reserved_bytes"]
        phase = {"forward": p["peak_bytes"]["forward"],
                 "backward": max(p["peak_bytes"]["backward_start"], p["peak_bytes"]["backward_end"]),
                 "optimizer": p["peak_bytes"]["optimizer"]}
        phase_err = {k: err(phase[k], r["memory"][k]["peak_allocated"]) for k in phase}
        e = {"alloc": err(p_alloc, m_alloc), "reserved": err(p_res, m_res),
             "step": err(1000 * p["step_seconds"], r["step_ms"]), **phase_err}
        for k in errors:
            errors[k].append(e[k])
        lines.append(
            f"| {r['model']} | {r['setup'] + (' + LoRA r' + str(r['lora_rank']) + ' ' + r['lora_targets'] if r.get('lora_rank') else '')} | {'on' if r['gradient_checkpointing'] else 'off'} | "
            f"{r['batch']}x{r['seq']} | {r.get('PYTORCH_CUDA_ALLOC_CONF') or ''} | {m_alloc / GIB:.2f} / {p_alloc / GIB:.2f} | {e['alloc']:+.1f}% | "
            f"{m_res / GIB:.2f} / {p_res / GIB:.2f} | {e['reserved']:+.1f}% | "
            f"{(m_res - m_alloc) / GIB:.2f} / {(p_res - p_alloc) / GIB:.2f} | {e['forward']:+.1f}% | "
            f"{e['backward']:+.1f}% | {e['optimizer']:+.1f}% | {r['step_ms']:.1f} / {1000 * p['step_seconds']:.1f} | "
            f"{e['step']:+.1f}% |")
    lines += ["", f"{len(rows)} rows. Mean absolute error (worst):"]
    write_table(lines, errors, os.path.join(HERE, "compare.md"))


if __name__ == "__main__":
    main()
