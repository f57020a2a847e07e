#!/usr/bin/python3
"""Study (issue 15 c): CUDA managed memory against static splits as a bf16 model outgrows one RTX 4090's memory.
Decode tokens/s (512-token prompt, 64 decoded, batch 1) under
  - `um`: everything in managed memory, oversubscribed when it must be (demand paging, LRU eviction);
  - `um-prefetch` (cudaMemPrefetchAsync of the next layer) and `um-accessedby` (weights preferred on the CPU, read
    over PCIe in place), managed memory with hints;
  - `layers --offload-exec cpu`: the most layers that fit on the GPU, the rest run by the CPU;
  - `bytes --donor cpu` (DisTorch): the least offload that fits, copied back per use;
  - `resident`, where it fits.
`sim plan --strategies um,layers-cpu,distorch-cpu,resident` searches the knobs (layers, GB offloaded); where the
model fits, the plan lists only `resident` and `um`, so the static splits are run with nothing offloaded (all
layers, --offload-gb 0). Two panels: (a) Qwen3-4B, 8B, 14B and 32B on an RTX 4090 (24 GiB); (b) Qwen3-14B on an
RTX 4090 whose memory is set from 12 to 40 GiB (--set gpu.memory), for a finer axis of weights / GPU memory.
One command writes results/studies/um-vs-splits/: points.csv (every point, with the sim command that reproduces
it), commands.txt (the sim commands run), um-vs-splits.png and README.md.

  /usr/bin/python3 experiments/studies/um_vs_splits.py          (from the repository root; SIM=path overrides
                                                                 ./build/bin/sim)
"""
import csv
import json
import os
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.environ.get("SIM", os.path.join(ROOT, "build", "bin", "sim"))
OUT = os.path.join(ROOT, "results", "studies", "um-vs-splits")
HW = "rtx4090"
HW_GIB = 24.0
COMMON = ["--hw", HW, "--decode", "64"]
MODELS = ["qwen3-4b", "qwen3-8b", "qwen3-14b", "qwen3-32b"]
MEMORIES = list(range(12, 41, 2))
STRATEGIES = {"resident": "resident (everything on the GPU)",
              "um": "um: managed memory, demand paging",
              "um-prefetch": "um-prefetch: managed + prefetch of the next layer",
              "um-accessedby": "um-accessedby: weights in host memory, read over PCIe",
              "layers-cpu": "layers --offload-exec cpu: most layers that fit",
              "distorch-cpu": "bytes --donor cpu (DisTorch): least offload that fits"}
commands = []


def sim(args):
    """Run sim, record the command, return its standard output; exit on failure."""
    commands.append("sim " + " ".join(shlex.quote(a) for a in args))
    out = subprocess.run([SIM] + args, cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("um_vs_splits.py: sim " + " ".join(args) + "\n" + out.stderr)
    return out.stdout


def model_args(model):
    return ["--model", f"traces/models/{model}.json"]


def layers_of(model):
    with open(os.path.join(ROOT, "traces", "models", f"{model}.json")) as f:
        return json.load(f)["num_hidden_layers"]


def point(panel, model, memory_gib, strategy, setting, tps, bottleneck, command):
    return {"panel": panel, "model": model, "gpu_memory_gib": memory_gib, "strategy": strategy, "setting": setting,
            "tokens_per_s": tps, "bottleneck": bottleneck, "command": command}


def one_machine(panel, model, memory_gib):
    """Every strategy's point for a model on the RTX 4090 with memory_gib of GPU memory; and the weights' GB."""
    extra = [] if memory_gib == HW_GIB else ["--set", f"gpu.memory={memory_gib:g} GiB"]
    base = model_args(model) + COMMON + extra
    pts, weights_gb = [], None
    plan = [json.loads(l) for l in sim(["plan"] + base + ["--strategies", "um,layers-cpu,distorch-cpu,resident",
                                                          "--format", "jsonl", "--jobs", "2"]).splitlines()]
    for r in plan:
        if r.get("error") or r.get("tokens_per_s") is None:
            continue
        if r["strategy"] == "um":
            weights_gb = r["offloaded_bytes"] / 1e9      # under um every weight is managed ("offloaded")
        pts.append(point(panel, model, memory_gib, r["strategy"], r["setting"], r["tokens_per_s"], r["bottleneck"],
                         r["command"]))
    if any(r["strategy"] == "resident" and not r.get("error") for r in plan):
        fits = {"layers-cpu": ["--policy", "layers", "--offload-exec", "cpu", "--layers", str(layers_of(model))],
                "distorch-cpu": ["--policy", "bytes", "--donor", "cpu", "--offload-gb", "0"]}
        for strategy, args in fits.items():
            r = json.loads(sim(["sweep"] + base + args + ["--format", "jsonl"]).splitlines()[0])
            pts.append(point(panel, model, memory_gib, strategy, " ".join(args[2:]) + " (fits)", r["tps"], "",
                             r["command"]))
    for line in sim(["sweep"] + base + ["--policy", "um-prefetch,um-accessedby", "--format", "jsonl"]).splitlines():
        r = json.loads(line)
        if r["status"] == "ok":
            pts.append(point(panel, model, memory_gib, r["policy"], "", r["tps"], "", r["command"]))
    for p in pts:
        p["weights_gb"] = weights_gb
        p["weights_per_gpu_memory"] = weights_gb / (memory_gib * 2**30 / 1e9)
    return pts


def draw(points, path):
    """Two panels of tokens/s (log) against the weights: across models, and across GPU memory for Qwen3-14B."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator
    fig, axes = plt.subplots(1, 2, figsize=(15, 5.6), sharey=True)
    styles = {"resident": ("black", "o", "-", 7), "um": ("tab:red", "s", "-", 5),
              "um-prefetch": ("tab:pink", "v", "--", 5), "um-accessedby": ("tab:purple", "^", ":", 5),
              "layers-cpu": ("tab:orange", "D", "-", 5), "distorch-cpu": ("tab:blue", "o", "-", 5)}
    panels = [("a", "weights_gb", "bf16 weights (GB, 1e9 bytes); RTX 4090, 24 GiB", "(a) Qwen3-4B, 8B, 14B, 32B on one RTX 4090"),
              ("b", "weights_per_gpu_memory", "weights / GPU memory (Qwen3-14B, 29.5 GB, on an RTX 4090 set to 40 ... 12 GiB)",
               "(b) Qwen3-14B, the RTX 4090's memory set from 40 to 12 GiB")]
    for ax, (panel, x, xlabel, title) in zip(axes, panels):
        for s, (color, marker, ls, ms) in styles.items():
            pts = sorted((p[x], p["tokens_per_s"]) for p in points if p["panel"] == panel and p["strategy"] == s)
            if pts:
                ax.plot(*zip(*pts), color=color, marker=marker, linestyle=ls, markersize=ms, label=STRATEGIES[s],
                        linewidth=2.2 if s == "resident" else 1.4, zorder=3 if s == "resident" else 4)
        limit = HW_GIB * 2**30 / 1e9 if panel == "a" else 1.0
        ax.axvline(limit, color="grey", linestyle="--", linewidth=1)
        ax.annotate("GPU memory" if panel == "a" else "weights = GPU memory", (limit, 0.02),
                    xytext=(4, 0), textcoords="offset points", fontsize=8, color="grey")
        if panel == "a":
            for p in points:
                if p["panel"] == "a" and p["strategy"] == "um":
                    ax.annotate(p["model"].replace("qwen3-", "Qwen3-").upper().replace("QWEN3", "Qwen3"),
                                (p["weights_gb"], 120), ha="center", fontsize=8)
        ax.set_xlabel(xlabel)
        ax.set_title(title, fontsize=10)
        ax.set_yscale("log")
        ax.set_ylim(0.015, 200)
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("decode tokens/s (log scale)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=9, frameon=False)
    fig.suptitle("Managed memory against static splits as a bf16 model outgrows the GPU (tiersim predictions, "
                 "512-token prompt, 64 decoded, batch 1)", fontsize=11)
    fig.tight_layout(rect=(0, 0.1, 1, 0.95))
    fig.savefig(path, dpi=110, metadata={"Software": None})


def find(points, panel, model, memory, strategy):
    for p in points:
        if (p["panel"], p["model"], p["gpu_memory_gib"], p["strategy"]) == (panel, model, memory, strategy):
            return p
    return None


def readme(points):
    """README.md: what the plot shows, with the numbers read from the points."""
    r14 = {s: find(points, "a", "qwen3-14b", HW_GIB, s) for s in STRATEGIES}
    r32 = {s: find(points, "a", "qwen3-32b", HW_GIB, s) for s in STRATEGIES}
    r8 = find(points, "a", "qwen3-8b", HW_GIB, "um")
    b = sorted((p for p in points if p["panel"] == "b" and p["strategy"] == "um"), key=lambda p: -p["gpu_memory_gib"])
    um_fit = [p for p in b if p["tokens_per_s"] > 1]
    smallest_fit = min(p["gpu_memory_gib"] for p in um_fit) if um_fit else None
    res = [p["gpu_memory_gib"] for p in points if p["panel"] == "b" and p["strategy"] == "resident"]
    lay = {p["gpu_memory_gib"]: p for p in points if p["panel"] == "b" and p["strategy"] == "layers-cpu"}
    f = lambda v: f"{v:.2g}" if v < 1 else f"{v:.3g}"
    below = max(k for k in lay if k < min(res))
    um_b = find(points, "b", "qwen3-14b", float(smallest_fit), "um")
    drop = um_b["tokens_per_s"] / min(p["tokens_per_s"] for p in b)
    return f"""# Managed memory against static splits as the model outgrows the GPU

![decode tokens/s against model size and against weights / GPU memory](um-vs-splits.png)

`/usr/bin/python3 experiments/studies/um_vs_splits.py`: tiersim's predictions, not measurements (every point's
`sim run` command is in points.csv, the plans and sweeps run in commands.txt).

While the model fits, managed memory (`--policy um`) decodes as fast as resident weights (Qwen3-8B bf16: {f(r8['tokens_per_s'])}
tokens/s on an RTX 4090). Past the GPU's memory every decode step faults every page in again (a sweep through the
weights under LRU eviction evicts each page before its next use): Qwen3-14B falls to {f(r14['um']['tokens_per_s'])} tokens/s
({f(r14['um-prefetch']['tokens_per_s'])} with prefetch), below even reading the weights over PCIe in place
(`um-accessedby`, {f(r14['um-accessedby']['tokens_per_s'])}), while the static splits lose speed with the share that does not
fit: {f(r14['layers-cpu']['tokens_per_s'])} tokens/s with the most layers that fit ({r14['layers-cpu']['setting']}) and the rest
run by the CPU, {f(r14['distorch-cpu']['tokens_per_s'])} with DisTorch's least offload ({r14['distorch-cpu']['setting']}); at 32B
{f(r32['layers-cpu']['tokens_per_s'])} and {f(r32['distorch-cpu']['tokens_per_s'])} against {f(r32['um']['tokens_per_s'])} under `um`.
Panel (b) moves the GPU's memory instead of the model: `um` keeps the resident speed ({f(um_b['tokens_per_s'])} tokens/s)
down to {smallest_fit:g} GiB, where the pages decoding touches still fit (`resident`, which counts the memory the
process reserves, first fits at {min(res):g} GiB; prefetching whole layers already thrashes), then drops
{drop:.0f}x, while `layers-cpu` goes from {f(lay[below]['tokens_per_s'])} to {f(lay[min(lay)]['tokens_per_s'])} tokens/s
between {below:g} and {min(lay):g} GiB.
"""


def main():
    points = []
    for model in MODELS:
        points += one_machine("a", model, HW_GIB)
    for memory in MEMORIES:
        points += one_machine("b", "qwen3-14b", float(memory))
    os.makedirs(OUT, exist_ok=True)
    fields = ["panel", "model", "gpu_memory_gib", "weights_gb", "weights_per_gpu_memory", "strategy", "setting",
              "tokens_per_s", "bottleneck", "command"]
    with open(os.path.join(OUT, "points.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for p in points:
            w.writerow({**p, "gpu_memory_gib": f"{p['gpu_memory_gib']:g}", "weights_gb": f"{p['weights_gb']:.3f}",
                        "weights_per_gpu_memory": f"{p['weights_per_gpu_memory']:.3f}",
                        "tokens_per_s": f"{p['tokens_per_s']:.4g}"})
    with open(os.path.join(OUT, "commands.txt"), "w") as f:
        f.write("# made by: /usr/bin/python3 experiments/studies/um_vs_splits.py\n" + "\n".join(commands) + "\n")
    draw(points, os.path.join(OUT, "um-vs-splits.png"))
    with open(os.path.join(OUT, "README.md"), "w") as f:
        f.write(readme(points))
    print(f"wrote {os.path.relpath(OUT, ROOT)}: {len(points)} points")


if __name__ == "__main__":
    main()
