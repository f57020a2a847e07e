#!/usr/bin/python3
"""Study (issue 15 e, MoE expert offload): llama.cpp with Qwen3-30B-A3B as a Q4_K_M file (generated from
traces/models/qwen3-30b-a3b.json), every layer on the GPU (--ngl 99) and the experts of the first N layers
in host memory (--n-cpu-moe N, N = 0..48), -c 8192, on four cards: decode tokens/s and 512-token prompt time
against N, and the GPU memory each setting needs (a point that does not fit the card is left out and
listed). One command writes results/studies/moe-offload/: points.csv (each point's sim command),
commands.txt and moe.png. Routing is tiersim's uniform model (not measured for real routers).

  /usr/bin/python3 experiments/studies/moe_offload.py          (from the repository root, after building)
"""
import csv
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.path.join(ROOT, "build", "bin", "sim")
OUT = os.path.join(ROOT, "results", "studies", "moe-offload")
CARDS = ["rtx4070", "rtx3090", "rtx4090", "rtx5090"]
commands = []


def main():
    args = ["sweep", "--model", "traces/models/qwen3-30b-a3b.json", "--dtype", "Q4_K_M", "--policy", "llamacpp",
            "--ngl", "99", "--ctx-size", "8192", "--hw", ",".join(CARDS), "--n-cpu-moe", "0:48:6", "--format", "jsonl"]
    commands.append("sim " + " ".join(args))
    out = subprocess.run([SIM] + args, cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("moe_offload.py: sim " + " ".join(args) + "\n" + out.stderr)
    points = []
    for line in out.stdout.splitlines():
        r = json.loads(line)
        points.append({"hw": r["hw"], "n_cpu_moe": int(r["n-cpu-moe"]), "status": r["status"], "tps": r.get("tps"),
                       "prefill_seconds": r.get("prefill_seconds"), "vram_peak_gib": r.get("vram_peak_bytes", 0) / 2**30,
                       "command": r["command"]})
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "points.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(points[0].keys()))
        w.writeheader()
        for p in points:
            w.writerow({**p, "tps": "" if p["tps"] is None else f"{p['tps']:.4g}",
                        "prefill_seconds": "" if p["prefill_seconds"] is None else f"{p['prefill_seconds']:.4g}",
                        "vram_peak_gib": f"{p['vram_peak_gib']:.3f}" if p["status"] == "ok" else ""})
    with open(os.path.join(OUT, "commands.txt"), "w") as f:
        f.write("# made by: /usr/bin/python3 experiments/studies/moe_offload.py\n" + "\n".join(commands) + "\n")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    styles = {"rtx4070": ("tab:purple", "o", "-"), "rtx3090": ("tab:green", "s", "--"),
              "rtx4090": ("tab:blue", "^", ":"), "rtx5090": ("tab:red", "v", "-")}
    # Each card's memory (its preset's gpu.memory), drawn as a level: the peak is the same on every card.
    capacity = {}
    for hw in CARDS:
        shown = subprocess.run([SIM, "profiles", "show", hw], cwd=ROOT, capture_output=True, text=True).stdout
        line = next(l for l in shown.splitlines() if l.strip().startswith("memory:"))
        capacity[hw] = float(line.split('"')[1].split()[0]) / 2**30
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    for hw in CARDS:
        pts = sorted((p["n_cpu_moe"], p["tps"], p["prefill_seconds"], p["vram_peak_gib"]) for p in points
                     if p["hw"] == hw and p["status"] == "ok")
        if not pts:
            continue
        color, marker, dash = styles[hw]
        kw = dict(color=color, marker=marker, linestyle=dash, markersize=4, label=f"--hw {hw}",
                  markerfacecolor="none" if hw == "rtx3090" else color)
        xs = [x for x, _, _, _ in pts]
        axes[0].plot(xs, [t for _, t, _, _ in pts], **kw)
        axes[1].plot(xs, [s for _, _, s, _ in pts], **kw)
    every = sorted({(p["n_cpu_moe"], p["vram_peak_gib"]) for p in points if p["status"] == "ok"})
    axes[2].plot([x for x, _ in every], [m for _, m in every], color="black", marker="o", markersize=4,
                 label="peak on the GPU (the same on every card)")
    for hw in CARDS:
        color, _, dash = styles[hw]
        axes[2].axhline(capacity[hw], color=color, linestyle=dash, linewidth=1.2,
                        label=f"{hw}: {capacity[hw]:.0f} GiB")
    axes[0].set_ylabel("decode tokens/s (log scale)")
    axes[0].set_yscale("log")
    axes[1].set_ylabel("512-token prompt time (s)")
    axes[2].set_ylabel("GPU memory at peak (GiB)")
    for ax, title in zip(axes, ("decode", "prompt (op offload copies the used experts)", "memory on the GPU")):
        ax.set_xlabel("--n-cpu-moe: layers whose experts stay in host memory (of 48)")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Qwen3-30B-A3B Q4_K_M under llama.cpp, --ngl 99 -c 8192: expert offload with --n-cpu-moe "
                 "(tiersim predictions, uniform routing; a line starts where the setting fits the card)", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    fig.savefig(os.path.join(OUT, "moe.png"), dpi=110, metadata={"Software": None})
    missing = [f"{p['hw']} --n-cpu-moe {p['n_cpu_moe']}" for p in points if p["status"] != "ok"]
    print(f"wrote {os.path.relpath(OUT, ROOT)}: {len(points)} points; not fitting: {len(missing)}")


if __name__ == "__main__":
    main()
