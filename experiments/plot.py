#!/usr/bin/python3
"""Plot tiersim's own outputs with matplotlib: one command, one PNG.

  /usr/bin/python3 experiments/plot.py INPUT -o OUT.png [--x COL] [--y COL] [--series COL ...]
                                       [--title T] [--goal V] [--log-y auto|on|off]

INPUT is one of
  - the CSV or JSONL of a grid, `sim sweep ... --hw a,b --policy x,y --offload-gb 0:8:1 --format csv|jsonl`,
    or the CSV of an offload sweep, `sim sweep ... --gb 2:28:2`;
  - the JSONL or CSV of `sim plan ... --format jsonl|csv`.

Defaults. A sweep: y is decode tokens/s (s/iteration for a diffusion model); x is the GB of weights offloaded
(offloaded_bytes / 1e9) when an offload axis varies, else the varying layer count (--layers, --ngl, --n-cpu-moe),
else the first varying axis; one line per combination of the other varying axes (--series). Rows whose status is
not ok are left out (and counted on stderr). A plan: two panels, speed against price (USD) and against the GPU's peak
memory (GiB); colour is the strategy, points on sim's Pareto front (speed, GPU memory, price) are ringed and
labelled hw/strategy, and a dashed step line is the best speed at that price (or memory) or less. --goal draws the
speed goal (tokens/s or s/iteration) as a horizontal line.

Derived columns any input may name: offloaded_gb, vram_peak_gib, h2d_gb_per_step, price_usd, speed.
The PNG is deterministic (fixed size and dpi, no software stamp). A missing file or column exits 2 with a message
naming both.
"""
import argparse
import csv
import json
import os
import sys

PROG = "plot.py"
# Columns sim writes that are results, not axes of a sweep.
METRICS = {"tps", "decode_step_seconds", "iteration_seconds", "step_seconds", "prefill_seconds", "vram_peak_bytes",
           "offloaded_bytes", "h2d_bytes_per_step", "peer_bytes_per_step", "status", "error", "command",
           "offloaded_gb", "vram_peak_gib", "h2d_gb_per_step", "speed"}
# Axis columns that are a count of layers (x before any other axis but the offload).
LAYER_AXES = ["layers", "ngl", "n-cpu-moe"]
OFFLOAD_AXES = ["offload-gb", "offload_gb"]
# Plan CSV headers -> the JSONL names.
PLAN_CSV = {"price (USD)": "price_usd", "limited by": "bottleneck", "meets goal": "meets_goal",
            "GPU peak (GiB)": "vram_peak_gib", "offloaded (GB)": "offloaded_gb"}
LABELS = {"tps": "decode tokens/s", "tokens_per_s": "decode tokens/s", "iteration_seconds": "s/iteration",
          "s_per_iteration": "s/iteration", "decode_step_seconds": "decode step (s)", "step_seconds": "step (s)",
          "prefill_seconds": "prefill (s)", "offloaded_gb": "weights offloaded (GB, 1e9 bytes)",
          "offload-gb": "--offload-gb asked (GB, 1e9 bytes)", "offload_gb": "GB moved off the GPU asked (1e9 bytes)",
          "vram_peak_gib": "peak memory of the fullest GPU (GiB)", "vram_peak_bytes": "GPU peak memory (bytes)",
          "offloaded_bytes": "weights offloaded (bytes)", "h2d_gb_per_step": "host-to-GPU copies per step (GB)",
          "price_usd": "price (USD, launch MSRP of the GPUs)", "layers": "transformer layers on the GPU (--layers)",
          "ngl": "llama.cpp -ngl (slots on the GPU)", "n-cpu-moe": "--n-cpu-moe (layers with experts on the CPU)",
          "prompt": "prompt tokens", "decode": "decoded tokens", "batch": "batch (sequences)",
          "ctx-size": "context (tokens)", "threads": "CPU threads", "prefetch": "prefetch (layers ahead)"}


def fail(msg):
    """Print `plot.py: msg` and exit 2."""
    print(f"{PROG}: {msg}", file=sys.stderr)
    sys.exit(2)


def number(v):
    """A float for numbers and numeric strings, else the value unchanged."""
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float)):
        return float(v)
    try:
        return float(v)
    except (TypeError, ValueError):
        return v


def load(path):
    """The rows of a CSV or JSONL file as dicts of numbers and strings, and the columns in file order."""
    if not os.path.isfile(path):
        fail(f"{path}: no such file")
    with open(path, newline="") as f:
        text = f.read()
    if not text.strip():
        fail(f"{path}: empty")
    rows, columns = [], []
    if text.lstrip().startswith("{"):
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                fail(f"{path}:{n}: not JSON ({e.msg})")
            rows.append({k: number(v) for k, v in r.items()})
            columns += [k for k in r if k not in columns]
    else:
        reader = csv.DictReader(text.splitlines())
        columns = [PLAN_CSV.get(c, c) for c in reader.fieldnames or []]
        for r in reader:
            rows.append({PLAN_CSV.get(k, k): number(v) for k, v in r.items()})
    return rows, columns


def derive(rows):
    """Add unit-converted columns (GB, GiB) and a boolean pareto/meets_goal where sim wrote yes/blank."""
    for r in rows:
        if isinstance(r.get("offloaded_bytes"), float):
            r["offloaded_gb"] = r["offloaded_bytes"] / 1e9
        if isinstance(r.get("vram_peak_bytes"), float):
            r["vram_peak_gib"] = r["vram_peak_bytes"] / 2**30
        if isinstance(r.get("h2d_bytes_per_step"), float):
            r["h2d_gb_per_step"] = r["h2d_bytes_per_step"] / 1e9
        for k in ("pareto", "meets_goal"):
            if isinstance(r.get(k), str):
                r[k] = r[k].strip().lower() in ("yes", "true", "1")
    return rows


def need(path, columns, *names):
    """Exit naming the file and the column when a needed column is missing."""
    for name in names:
        if name not in columns:
            fail(f"{path}: no column '{name}' (columns: {', '.join(columns)})")


def label(col):
    """Axis label with units for a column."""
    return LABELS.get(col, col)


def log_scale(values, mode):
    """Whether a y axis is logarithmic: on, off, or auto (positive values spanning more than 30x)."""
    if mode != "auto":
        return mode == "on"
    pos = [v for v in values if isinstance(v, float) and v > 0]
    return len(pos) == len(values) and len(pos) > 1 and max(pos) / min(pos) > 30


def figure(size):
    """A matplotlib figure on the Agg backend, with fixed fonts."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"font.size": 9, "svg.hashsalt": "tiersim"})
    return plt


def save(fig, out):
    """Write the PNG deterministically."""
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    fig.savefig(out, dpi=110, metadata={"Software": None})


# ---- sweeps ----------------------------------------------------------------------------------------------------

def sweep_defaults(rows, columns):
    """(x, y, series) for a sweep: the offload or layer axis on x, speed on y, the other varying axes as lines."""
    axes = [c for c in columns if c not in METRICS]
    varying = [c for c in axes if len({str(r.get(c)) for r in rows}) > 1]
    diffusion = any(r.get("iteration_seconds", 0) and not r.get("tps") for r in rows)
    y = "iteration_seconds" if diffusion else "tps"
    x = None
    for c in OFFLOAD_AXES:
        if c in varying:
            x = "offloaded_gb" if "offloaded_gb" in rows[0] else c
    for c in LAYER_AXES:
        if x is None and c in varying:
            x = c
    if x is None:
        numeric = [c for c in varying if all(isinstance(r.get(c), float) for r in rows)]
        x = (numeric or varying or ["offloaded_gb"])[0]
    series = [c for c in varying if c != x and not (x == "offloaded_gb" and c in OFFLOAD_AXES)]
    return x, y, series


def plot_sweep(path, rows, columns, args):
    """Lines of y against x, one per combination of the series columns."""
    ok = [r for r in rows if r.get("status", "ok") == "ok"]
    if len(ok) < len(rows):
        print(f"{PROG}: {path}: {len(rows) - len(ok)} of {len(rows)} rows not ok, left out", file=sys.stderr)
    if not ok:
        fail(f"{path}: no row with status ok")
    x, y, series = sweep_defaults(ok, columns)
    x, y = args.x or x, args.y or y
    series = args.series if args.series is not None else series
    need(path, list(ok[0].keys()), y, x, *series)
    categorical = not all(isinstance(r.get(x), float) for r in ok)
    cats = sorted({str(r[x]) for r in ok}) if categorical else []
    groups = {}
    for r in ok:
        key = tuple(str(r.get(c)) for c in series)
        xv = cats.index(str(r[x])) if categorical else r[x]
        groups.setdefault(key, []).append((xv, r[y]))
    plt = figure(None)
    many = len(groups) > 6
    fig, ax = plt.subplots(figsize=(10.5 if many else 9, 5.2))
    markers = "os^vDP*Xh<>p"
    for i, (key, pts) in enumerate(sorted(groups.items())):
        pts = sorted(p for p in pts if isinstance(p[1], float))
        name = ", ".join(f"{c}={v}" for c, v in zip(series, key)) or y
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=markers[i % len(markers)], markersize=4,
                label=name, color=f"C{i % 10}", linestyle=["-", "--", "-.", ":"][i % 4])
    if categorical:
        ax.set_xticks(range(len(cats)))
        ax.set_xticklabels(cats, rotation=20, ha="right")
    if log_scale([r[y] for r in ok], args.log_y):
        log_y(ax)
        ax.set_ylabel(label(y) + " (log scale)")
    else:
        ax.set_ylabel(label(y))
    if args.goal is not None:
        ax.axhline(args.goal, color="grey", linestyle=":", linewidth=1, label=f"goal {args.goal:g}")
    ax.set_xlabel(label(x))
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(args.title or f"{os.path.basename(path)}: {label(y)} against {label(x)}")
    if len(groups) > 1 or args.goal is not None:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False,
                  title=", ".join(series) if series else None)
    fig.tight_layout()
    save(fig, args.output)
    return len(ok)


# ---- plans -----------------------------------------------------------------------------------------------------

def log_y(ax):
    """A logarithmic y axis ticked at 1, 2 and 5 times powers of ten, labelled as plain numbers."""
    from matplotlib.ticker import LogLocator
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(plain_numbers())
    ax.yaxis.set_minor_formatter(plain_numbers(blank=True))


def plain_numbers(blank=False):
    """Tick labels as plain numbers (300, 1000, 3000) on a log axis, or none (minor ticks)."""
    from matplotlib.ticker import FuncFormatter
    return FuncFormatter(lambda v, _: "" if blank else f"{v:g}")


def front(points, lower_is_better):
    """The step line of the best speed at each x or less: [(x, speed)] sorted by x."""
    best, line = None, []
    for xv, s in sorted(points):
        if best is None or (s < best if lower_is_better else s > best):
            best = s
            line.append((xv, s))
    return line


def plot_plan(path, rows, columns, args):
    """Speed against price and against GPU peak memory, strategies coloured, the Pareto front ringed and labelled."""
    speed = "tokens_per_s" if "tokens_per_s" in columns else "s_per_iteration"
    if speed not in columns and not args.y:
        fail(f"{path}: no column 'tokens_per_s' or 's_per_iteration' (columns: {', '.join(columns)})")
    need(path, columns, "hw", "strategy")
    y = args.y or speed
    x1 = args.x or "price_usd"
    ok = [r for r in rows if isinstance(r.get(y), float) and not r.get("error")]
    if not ok:
        fail(f"{path}: no row with a number in '{y}'")
    need(path, list(ok[0].keys()), x1, "vram_peak_gib", "pareto")
    lower = y == "s_per_iteration"
    strategies = sorted({r["strategy"] for r in ok})
    plt = figure(None)
    fig, axes = plt.subplots(1, 2, figsize=(15, 6.2), sharey=True)
    logy = log_scale([r[y] for r in ok], args.log_y)
    for ax, x in zip(axes, (x1, "vram_peak_gib")):
        for i, s in enumerate(strategies):
            pts = [r for r in ok if r["strategy"] == s and isinstance(r.get(x), float)]
            ax.scatter([r[x] for r in pts], [r[y] for r in pts], s=22, color=f"C{i % 10}", label=s, zorder=3)
        par = [r for r in ok if r.get("pareto") and isinstance(r.get(x), float)]
        ax.scatter([r[x] for r in par], [r[y] for r in par], s=90, facecolors="none", edgecolors="black",
                   linewidths=1.2, label="Pareto front (sim plan: speed, GPU memory, price)", zorder=4)
        line = front([(r[x], r[y]) for r in ok if isinstance(r.get(x), float)], lower)
        if line:
            xs, ys = zip(*line)
            ax.step(list(xs) + [max(r[x] for r in ok if isinstance(r.get(x), float))], list(ys) + [ys[-1]],
                    where="post", color="black", linestyle="--", linewidth=0.8, alpha=0.6,
                    label=f"best {'(lowest) ' if lower else ''}speed at this price (left) or GPU memory (right) or less")
        if logy:
            log_y(ax)
        if args.goal is not None:
            ax.axhline(args.goal, color="red", linestyle=":", linewidth=1, label=f"goal: {args.goal:g} {label(y)}")
        xs = [r[x] for r in ok if isinstance(r.get(x), float) and r[x] > 0]
        if x == "price_usd" and xs and max(xs) / min(xs) > 8:
            ax.set_xscale("log")
            ax.set_xticks([t for t in (100, 200, 300, 500, 1000, 2000, 3000, 5000, 10000, 20000, 30000, 50000)
                           if min(xs) / 1.2 <= t <= max(xs) * 1.2])
            ax.xaxis.set_major_formatter(plain_numbers())
            ax.xaxis.set_minor_formatter(plain_numbers(blank=True))
        ax.set_xlabel(label(x) + (" (log scale)" if ax.get_xscale() == "log" else ""))
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel(label(y) + (" (log scale)" if logy else ""))
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 5), fontsize=8, frameon=False)
    fig.suptitle(args.title or f"{os.path.basename(path)}: {label(y)} against price and GPU memory", fontsize=11)
    fig.tight_layout(rect=(0, 0.09, 1, 0.96))
    for ax, x in zip(axes, (x1, "vram_peak_gib")):
        annotate(ax, [r for r in ok if r.get("pareto") and isinstance(r.get(x), float)], x, y)
    save(fig, args.output)
    return len(ok)


def annotate(ax, points, x, y):
    """Label points hw/strategy where the label overlaps no marker nor label placed before it (the candidate offsets
    tried in turn; the first if all overlap). Points within a few pixels share one label: 'hw/a, b' for one machine,
    one line per machine otherwise."""
    from matplotlib.transforms import Bbox
    ax.figure.canvas.draw()
    renderer = ax.figure.canvas.get_renderer()
    clusters = []                                   # [display x, display y, data point, [rows]]
    for r in sorted(points, key=lambda r: (-r[y], r[x], r["hw"], r["strategy"])):
        px, py = ax.transData.transform((r[x], r[y]))
        for c in clusters:
            if abs(c[0] - px) < 6 and abs(c[1] - py) < 6:
                c[3].append(r)
                break
        else:
            clusters.append([px, py, (r[x], r[y]), [r]])
    taken = [Bbox.from_extents(c[0] - 7, c[1] - 7, c[0] + 7, c[1] + 7) for c in clusters]
    offsets = [(7, 0), (7, 10), (-7, 0), (-7, 10), (7, -11), (-7, -11), (7, 20), (-7, 20), (7, -22), (-7, -22)]
    frame = ax.get_window_extent(renderer)
    for _, _, xy, rows in clusters:
        machines = {}
        for r in rows:
            machines.setdefault(r["hw"], []).append(r["strategy"])
        text = "\n".join(f"{hw}/{', '.join(dict.fromkeys(st))}" for hw, st in machines.items())
        chosen = None
        for dx, dy in offsets:
            t = ax.annotate(text, xy, xytext=(dx, dy), textcoords="offset points", fontsize=7,
                            ha="left" if dx > 0 else "right", va="center", zorder=5)
            box = t.get_window_extent(renderer).expanded(1.02, 1.15)
            if frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1) and \
                    not any(box.overlaps(b) for b in taken):
                chosen = box
                break
            t.remove()
        if chosen is None:
            t = ax.annotate(text, xy, xytext=offsets[0], textcoords="offset points", fontsize=7, va="center",
                            zorder=5)
            chosen = t.get_window_extent(renderer)
        taken.append(chosen)


def main(argv=None):
    """Parse the arguments, read the input, plot it."""
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("input", help="CSV or JSONL from sim sweep or sim plan")
    p.add_argument("-o", "--output", required=True, help="the PNG to write")
    p.add_argument("--x", help="column on x (default: see above)")
    p.add_argument("--y", help="column on y (default: tokens/s, or s/iteration)")
    p.add_argument("--series", nargs="*", help="columns whose combination makes one line (sweeps)")
    p.add_argument("--title", help="figure title")
    p.add_argument("--goal", type=float, help="draw this speed goal as a horizontal line")
    p.add_argument("--log-y", choices=["auto", "on", "off"], default="auto", help="log y axis (default auto)")
    args = p.parse_args(argv)
    rows, columns = load(args.input)
    derive(rows)
    columns += [c for c in ("offloaded_gb", "vram_peak_gib", "h2d_gb_per_step") if rows and c in rows[0]]
    is_plan = "strategy" in columns and "rank" in columns
    n = (plot_plan if is_plan else plot_sweep)(args.input, rows, columns, args)
    print(f"{PROG}: wrote {args.output} ({n} points from {args.input})")


if __name__ == "__main__":
    main()
