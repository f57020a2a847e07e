#!/usr/bin/python3
"""Study (issue 15, "tokens/s against layers on GPU"): llama.cpp's -ngl for Qwen3-14B and Qwen3-32B as
Q4_K_M files (generated from traces/models/*.json: llama.cpp's per-tensor type mix) on four consumer
cards, decode tokens/s and 512-token prompt time against the layers on the GPU, llama.cpp's default
runtime and op offload, --fit off (the -ngl as given; points that do not fit the card are left out and
listed). One command writes results/studies/llamacpp-ngl/: points.csv (with each point's sim command),
commands.txt and ngl.png.

  /usr/bin/python3 experiments/studies/ngl_curves.py          (from the repository root, after building)
"""
import csv
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.path.join(ROOT, "build", "bin", "sim")
OUT = os.path.join(ROOT, "results", "studies", "llamacpp-ngl")
MODELS = [("qwen3-14b", "Qwen3-14B", 40), ("qwen3-32b", "Qwen3-32B", 64)]
CARDS = ["rtx4070", "rtx3090", "rtx4090", "rtx5090"]
commands = []


def sweep(model, layers):
    args = ["sweep", "--model", f"traces/models/{model}.json", "--dtype", "Q4_K_M", "--policy", "llamacpp",
            "--fit", "off", "--ctx-size", "4096", "--hw", ",".join(CARDS),
            "--ngl", ",".join(str(n) for n in list(range(0, layers + 1, 4)) + [layers + 1]),
            "--format", "jsonl"]
    commands.append("sim " + " ".join(args))
    out = subprocess.run([SIM] + args, cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("ngl_curves.py: sim " + " ".join(args) + "\n" + out.stderr)
    return [json.loads(line) for line in out.stdout.splitlines()]


def main():
    points = []
    for model, title, layers in MODELS:
        for r in sweep(model, layers):
            points.append({"model": title, "hw": r["hw"], "ngl": int(r["ngl"]), "status": r["status"],
                           "tps": r.get("tps"), "prefill_seconds": r.get("prefill_seconds"), "command": r["command"]})
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "points.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["model", "hw", "ngl", "status", "tps", "prefill_seconds", "command"])
        w.writeheader()
        for p in points:
            w.writerow({**p, "tps": "" if p["tps"] is None else f"{p['tps']:.4g}",
                        "prefill_seconds": "" if p["prefill_seconds"] is None else f"{p['prefill_seconds']:.4g}"})
    with open(os.path.join(OUT, "commands.txt"), "w") as f:
        f.write("# made by: /usr/bin/python3 experiments/studies/ngl_curves.py\n" + "\n".join(commands) + "\n")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, len(MODELS), figsize=(12, 7.5), sharex="col")
    # Cards with the same host preset draw the same CPU-bound curve: distinct markers and dashes keep both seen.
    styles = {"rtx4070": ("tab:purple", "o", "-"), "rtx3090": ("tab:green", "s", "--"),
              "rtx4090": ("tab:blue", "^", ":"), "rtx5090": ("tab:red", "v", "-")}
    for col, (_, title, layers) in enumerate(MODELS):
        for hw in CARDS:
            pts = sorted((p["ngl"], p["tps"], p["prefill_seconds"]) for p in points
                         if p["model"] == title and p["hw"] == hw and p["status"] == "ok")
            if not pts:
                continue
            color, marker, dash = styles[hw]
            for row, ys in ((0, [t for _, t, _ in pts]), (1, [s for _, _, s in pts])):
                axes[row][col].plot([x for x, _, _ in pts], ys, marker=marker, markersize=4, linestyle=dash,
                                    color=color, label=f"--hw {hw}", markerfacecolor="none" if hw == "rtx3090" else color)
        axes[0][col].set_title(f"{title} Q4_K_M, -c 4096: decode", fontsize=10)
        axes[1][col].set_title(f"{title} Q4_K_M: 512-token prompt", fontsize=10)
        axes[0][col].set_ylabel("decode tokens/s (log scale)")
        axes[0][col].set_yscale("log")
        axes[1][col].set_ylabel("prompt time (s)")
        axes[1][col].set_xlabel(f"-ngl: slots on the GPU (of {layers} layers + output)")
        for ax in (axes[0][col], axes[1][col]):
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8, loc="upper left")
    fig.suptitle("llama.cpp -ngl on consumer cards (tiersim predictions; a line ends where the model no longer fits)",
                 fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(os.path.join(OUT, "ngl.png"), dpi=110, metadata={"Software": None})
    missing = sum(p["status"] != "ok" for p in points)
    print(f"wrote {os.path.relpath(OUT, ROOT)}: {len(points)} points, {missing} that do not fit")


if __name__ == "__main__":
    main()
