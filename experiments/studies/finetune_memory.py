#!/usr/bin/python3
"""Fine-tuning memory of Llama-3.1-8B and Qwen3-14B under common set-ups (`sim train`), next to what
`accelerate estimate-memory` prints for the same model ("Training using Adam").

accelerate's number (src/accelerate/commands/estimate.py, estimate_training_usage, read at 16cb6eb8): the model's
fp32 size S, and for dtype float32 the largest of model S, gradients S, optimizer 2S, "step" 4S; for float16 /
bfloat16 (mixed precision: fp32 weights) the largest of model S, gradients 1.5S, optimizer 2S, step 2S. It is the
largest single term, not their sum, and counts no activations, logits or temporaries.

Writes results/studies/finetune-memory/table.md and commands.txt. Predictions, not measurements; sim train's own
validation is results/validation/training (74 rows on an H100, Llama-3.1-8B with bf16 AdamW among them; the 8-bit
AdamW rows are not validated: bitsandbytes was not on the GPU machine).

  /usr/bin/python3 experiments/studies/finetune_memory.py          (from the repository root, after building)
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.environ.get("SIM", os.path.join(ROOT, "build", "bin", "sim"))
OUT = os.path.join(ROOT, "results", "studies", "finetune-memory")
MODELS = [("Llama-3.1-8B", "traces/models/llama-3.1-8b.json"), ("Qwen3-14B", "traces/models/qwen3-14b.json")]
# (label, sim train options, accelerate's dtype row that describes the same weights)
SETUPS = [
    ("fp32 weights, bf16 autocast, AdamW", ["--precision", "fp32-autocast"], "bfloat16"),
    ("same, gradient checkpointing", ["--precision", "fp32-autocast", "--checkpointing"], "bfloat16"),
    ("bf16 weights, AdamW", ["--precision", "bf16"], None),
    ("bf16 weights, AdamW, checkpointing", ["--precision", "bf16", "--checkpointing"], None),
    ("bf16 weights, SGD, checkpointing", ["--precision", "bf16", "--optimizer", "sgd", "--checkpointing"], None),
    ("bf16 weights, 8-bit AdamW (bitsandbytes), checkpointing",
     ["--precision", "bf16", "--optimizer", "adamw8bit", "--checkpointing"], None),
    ("bf16 weights, AdamW on the CPU (torchao CPUOffloadOptimizer), checkpointing",
     ["--precision", "bf16", "--optimizer-offload", "cpu", "--checkpointing"], None),
    ("same, offload_gradients=True", ["--precision", "bf16", "--optimizer-offload", "cpu-gradients", "--checkpointing"], None),
    ("fp32 weights, AdamW", ["--precision", "fp32"], "float32"),
]
SHAPE = ["--batch", "1", "--seq", "2048"]
GIB = 1024 ** 3
HOST = {}  # the offload rows' host memory by model (the same with offload_gradients), for the note under the table


def accelerate_training(params, dtype):
    fp32 = params * 4
    if dtype == "float32":
        return max(fp32, fp32, 2 * fp32, 4 * fp32)
    return max(fp32, 1.5 * fp32, 2 * fp32, 2 * fp32)


def main():
    os.makedirs(OUT, exist_ok=True)
    commands = ["# made by: /usr/bin/python3 experiments/studies/finetune_memory.py"]
    lines = ["# Fine-tuning memory: tiersim's peak allocated against accelerate estimate-memory", "",
             "One training step at batch 1 x 2048 tokens (`sim train --hw b200`, Hugging Face transformers + "
             "PyTorch semantics: sim/model/training/training_memory.hpp; reserved: PyTorch's caching allocator "
             "replaying the loop's allocations for three steps). Predictions, not measurements; the 8-bit AdamW rows "
             "(bitsandbytes' AdamW8bit, read from its source) are not validated.", "",
             "| model | set-up | weights | optimizer | gradients | activations | logits (peak) | peak allocated | "
             "peak at | reserved (caching allocator) | accelerate's \"Training using Adam\" |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, path in MODELS:
        for label, opts, acc_dtype in SETUPS:
            cmd = [SIM, "train", "--model", path, "--hw", "b200", "--json"] + SHAPE + opts
            commands.append("sim " + " ".join(cmd[1:]))
            r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
            if r.returncode not in (0, 3):
                sys.exit("finetune_memory.py: " + " ".join(cmd) + "\n" + r.stdout + r.stderr)
            j = json.loads(r.stdout)
            m, p = j["memory_bytes"], j["peak_bytes"]
            act = m["saved_activations"] + m["recompute"]
            logits = m["logits"] + max(m["loss_transient"], m["logits_grad"])
            reserved = (f"{j['allocator_peak_reserved_bytes'] / GIB:.1f}" if "allocator_peak_reserved_bytes" in j
                        else "more than a B200 holds")
            if "host_memory_bytes" in j:
                h = j["host_memory_bytes"]
                HOST[name] = f"{name} {(h['pinned'] + h['optimizer_state']) / GIB:.0f} GiB"
            acc = f"{accelerate_training(j['parameters'], acc_dtype) / GIB:.1f} GiB ({acc_dtype})" if acc_dtype else "no row (it assumes fp32 weights)"
            lines.append(f"| {name} | {label} | {m['weights'] / GIB:.1f} | {m['optimizer_state'] / GIB:.1f} | "
                         f"{m['gradients'] / GIB:.1f} | {act / GIB:.1f} | {logits / GIB:.1f} | "
                         f"**{p['step'] / GIB:.1f} GiB** | {j['peak_phase']} | {reserved} | {acc} |")
    lines += ["", "GiB throughout. Why they differ: accelerate's column is the largest single term (the optimizer "
              "states, or its \"step\" of four model copies in fp32), not the sum that is alive at once; it leaves out "
              "the activations, the logits (Qwen3's 151,936-token vocabulary makes them several GiB at 2048 tokens), "
              "AdamW's foreach temporary (one more copy of the parameters during the step) and autocast's bf16 weight "
              "copies; and it has no row for bf16 weights with bf16 optimizer states, the cheapest full fine-tune here. "
              "The optimizer-offload rows keep AdamW's states (and pinned copies of the parameters and gradients) in "
              "host memory instead (with or without offload_gradients): " + ", ".join(HOST.values()) + "."]
    with open(os.path.join(OUT, "table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(OUT, "commands.txt"), "w") as f:
        f.write("\n".join(commands) + "\n")
    print("wrote results/studies/finetune-memory/table.md")


if __name__ == "__main__":
    main()
