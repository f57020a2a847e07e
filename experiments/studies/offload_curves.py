#!/usr/bin/python3
"""Study (issue 15 a, first part): Qwen3-14B in bf16 (traces/qwen.trace: 512-token prompt, 64 decoded) on an
RTX 4090 and on two RTX 3090s (NVLink bridge, or PCIe only): decode tokens/s against GB of weights off the
GPU that computes, for four strategies people use:
  - DisTorch (ComfyUI-MultiGPU) `bytes`: N GB moved to the CPU, copied back per use (pageable);
  - the same with the second GPU as donor (two-GPU machines only);
  - `layers --offload-exec cpu`: the first layers kept on the GPU, the rest run by the CPU;
  - llama.cpp `-ngl N` (the last N layers and the output on the GPU, the rest run by the CPU).
One command writes results/studies/qwen14-offload/: points.csv (every point, with the sim command that
reproduces it), commands.txt (the sweeps run) and offload.png.

  /usr/bin/python3 experiments/studies/offload_curves.py          (from the repository root, after building)
"""
import csv
import io
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.path.join(ROOT, "build", "bin", "sim")
OUT = os.path.join(ROOT, "results", "studies", "qwen14-offload")
TRACE = ["--trace", "traces/qwen.trace"]
MACHINES = [("rtx4090", "RTX 4090 (24 GB)"), ("rtx3090x2-nvlink", "2x RTX 3090, NVLink"),
            ("rtx3090x2-pcie", "2x RTX 3090, PCIe")]
commands = []


def sim(args):
    commands.append("sim " + " ".join(args))
    out = subprocess.run([SIM] + args, cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("offload_curves.py: sim " + " ".join(args) + "\n" + out.stderr)
    return out.stdout


def grid(label, hw, args):
    rows = []
    for line in sim(["sweep"] + TRACE + ["--hw", hw, "--format", "jsonl"] + args).splitlines():
        r = json.loads(line)
        if r["status"] == "ok":
            rows.append({"strategy": label, "hw": hw, "offloaded_gb": r["offloaded_bytes"] / 1e9, "tps": r["tps"],
                         "command": r["command"]})
    return rows


def offload_sweep(label, hw, args):
    rows = []
    for r in csv.DictReader(io.StringIO(sim(["sweep"] + TRACE + ["--hw", hw, "--gb", "2:28:2"] + args))):
        if r["status"] == "ok":
            cmd = "sim run " + " ".join(TRACE + ["--hw", hw] + args + ["--offload-gb", r["offload_gb"]])
            rows.append({"strategy": label, "hw": hw, "offloaded_gb": float(r["offloaded_bytes"]) / 1e9,
                         "tps": float(r["tps"]), "command": cmd})
    return rows


def main():
    points = []
    for hw, _ in MACHINES:
        points += offload_sweep("DisTorch bytes, donor cpu (pageable copies)", hw, ["--policy", "bytes"])
        if "x2" in hw:
            points += offload_sweep("DisTorch bytes, donor cuda:1", hw, ["--policy", "bytes", "--donor", "cuda:1"])
        points += grid("layers, the rest run by the CPU", hw, ["--policy", "layers", "--offload-exec", "cpu", "--layers", "0:40:4"])
        points += grid("llama.cpp -ngl (bf16)", hw, ["--policy", "llamacpp", "--fit", "off", "--ngl", "1:41:4"])
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "points.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["strategy", "hw", "offloaded_gb", "tps", "command"])
        w.writeheader()
        for p in points:
            w.writerow({**p, "offloaded_gb": f"{p['offloaded_gb']:.3f}", "tps": f"{p['tps']:.4g}"})
    with open(os.path.join(OUT, "commands.txt"), "w") as f:
        f.write("# made by: /usr/bin/python3 experiments/studies/offload_curves.py\n" + "\n".join(commands) + "\n")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams["svg.hashsalt"] = "tiersim"
    fig, axes = plt.subplots(1, len(MACHINES), figsize=(15, 4.8), sharey=True)
    styles = {"DisTorch bytes, donor cpu (pageable copies)": ("tab:blue", "o"),
              "DisTorch bytes, donor cuda:1": ("tab:green", "s"),
              "layers, the rest run by the CPU": ("tab:orange", "^"),
              "llama.cpp -ngl (bf16)": ("tab:red", "v")}
    for ax, (hw, title) in zip(axes, MACHINES):
        for label, (color, marker) in styles.items():
            pts = sorted((p["offloaded_gb"], p["tps"]) for p in points if p["hw"] == hw and p["strategy"] == label)
            if pts:
                ax.plot([x for x, _ in pts], [y for _, y in pts], marker=marker, color=color, label=label, markersize=4)
        ax.set_title(f"{title}  [--hw {hw}]", fontsize=10)
        ax.set_xlabel("weights off the computing GPU (GB, 1e9 bytes)")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("decode tokens/s (log scale)")
    handles, labels = axes[-1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=9, frameon=False)
    fig.suptitle("Qwen3-14B bf16, 512-token prompt, batch 1: decode speed against weights offloaded (tiersim, event engine)",
                 fontsize=11)
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    fig.savefig(os.path.join(OUT, "offload.png"), dpi=110, metadata={"Software": None})
    print(f"wrote {os.path.relpath(OUT, ROOT)}: {len(points)} points")


if __name__ == "__main__":
    main()
