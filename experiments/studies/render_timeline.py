#!/usr/bin/python3
"""Draws a `sim run --timeline FILE` trace as a PNG with matplotlib: the headless "look at it" for a
machine without Chromium or the internet (ui.perfetto.dev, chrome://tracing).

One row per track (steps, host, each stream, the managed-memory track), spans as horizontal bars coloured
by kind, the copy -> kernel arrows ("waits for" flow events, "s"/"f" paired by id) as thin arrows, and the
memory counters as step lines (GiB) in a panel below that shares the time axis. The picture is a window
of one step (times in ms from that step's start), named in the title.

With no arguments it runs the simulator (./build/bin/sim, or $SIM) for the fixed configurations in
CONFIGS below and writes results/studies/timeline/: a PNG per window, and the trace JSON when it is
smaller than 5 MB. With --trace it draws an existing trace instead:

  /usr/bin/python3 experiments/studies/render_timeline.py
  /usr/bin/python3 experiments/studies/render_timeline.py --trace t.json --step "decode 1" \
      --from-ms 0 --to-ms 50 --png t.png

Run it with Debian's /usr/bin/python3 (it has matplotlib). Output is deterministic: fixed figure size
and dpi, no software/date metadata in the PNG, and the simulator's trace is itself byte-stable.
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Patch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timeline_summary import events  # noqa: E402  (the streaming reader of a trace)

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
OUT_DIR = os.path.join("results", "studies", "timeline")
MAX_JSON_BYTES = 5 * 10**6

MODEL = ["--model", "traces/models/qwen3-14b.json", "--dtype", "bf16", "--hw", "rtx4090",
         "--prompt", "128", "--decode", "3"]

# Each configuration: the run, and the windows drawn from it (step, from ms, to ms, file suffix).
CONFIGS = [
    {
        "name": "qwen3-14b-rtx4090-layers30",
        "what": "Qwen3-14B bf16 on an RTX 4090, --policy layers --layers 30 --prefetch 1 "
                "(10 layers + lm_head streamed from pinned memory, one layer ahead)",
        "args": MODEL + ["--policy", "layers", "--layers", "30", "--prefetch", "1"],
        "steps": 3,
        "windows": [("decode 1", 20.0, 62.0, "zoom"), ("decode 1", None, None, "step")],
    },
    {
        "name": "qwen3-14b-rtx4090-um",
        "what": "Qwen3-14B bf16 (27.5 GiB) on an RTX 4090 (24 GiB), --policy um "
                "(managed memory, oversubscribed: demand paging)",
        "args": MODEL + ["--policy", "um"],
        "steps": 3,
        "windows": [("decode 1", 0.0, 280.0, "zoom")],
    },
]

# Span kinds: legend label and colour, in legend order.
KINDS = collections.OrderedDict([
    ("step", ("step", "#c7c7c7")),
    ("cpu", ("CPU op (launch, copy issue, per-step work)", "#8c564b")),
    ("wait", ("host waits (sync, staging slot)", "#f2c6a0")),
    ("kernel0", ("kernel, even layer", "#1f77b4")),
    ("kernel1", ("kernel, odd layer", "#6baed6")),
    ("kernelx", ("kernel outside the layers (embedding, lm_head, ...)", "#17becf")),
    ("copy0", ("copy, even layer", "#2ca02c")),
    ("copy1", ("copy, odd layer", "#98df8a")),
    ("copyx", ("copy, no layer (lm_head, ...)", "#bcbd22")),
    ("fault", ("fault batch (migrate in)", "#d62728")),
    ("evict", ("evict (write back)", "#9467bd")),
    ("other", ("other span", "#7f7f7f")),
])
ARROW_COLOUR = "#222222"
COUNTER_COLOURS = ["#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]


LAYER_RE = re.compile(r"(?:^|\.)layers\.(\d+)\.")


def layer_of(span, n_layers):
    """The transformer layer a kernel or copy belongs to, or None (embedding, final norm, lm_head)."""
    args = span.get("args") or {}
    names = [args["tensor"]] if "tensor" in args else list(args.get("weights") or [])
    if names:
        m = LAYER_RE.search(names[0])
        return int(m.group(1)) if m else None
    layer = args.get("layer")
    if not isinstance(layer, int):
        m = re.search(r" L(\d+)$", span["name"])
        layer = int(m.group(1)) if m else -1
    return layer if 0 <= layer < n_layers else None


def kind_of(track, span, n_layers):
    name = span["name"]
    if track == "steps":
        return "step"
    if track == "host":
        return "wait" if name.startswith("waits") else "cpu"
    if "managed" in track:
        return "evict" if name.startswith("evict") else "fault"
    if " copy" in track:
        layer = layer_of(span, n_layers)
        return "copyx" if layer is None else "copy%d" % (layer % 2)
    if "compute" in track or "cpu" in track:
        layer = layer_of(span, n_layers)
        return "kernelx" if layer is None else "kernel%d" % (layer % 2)
    return "other"


def short_label(track, span):
    """A bar's text when it is wide enough to hold it."""
    name, args = span["name"], span.get("args") or {}
    if " copy" in track:
        tensor = args.get("tensor", name.replace("prefetch ", ""))
        m = re.match(r"model\.layers\.(\d+)\.(?:self_attn\.|mlp\.)?(.*)", tensor)
        return "L%s %s" % m.groups() if m else tensor
    if "managed" in track:
        blocks = args.get("blocks")
        return "%s %s blk" % ("evict" if name.startswith("evict") else "fault", blocks)
    if track == "host":
        return name.replace("waits: ", "")
    if track != "steps" and args.get("weights"):
        w = args["weights"][0]
        m = re.match(r"model\.layers\.(\d+)\.(?:self_attn\.|mlp\.)?(.*)", w)
        return "%s %s" % (name.split()[0], "L%s %s" % m.groups() if m else w)
    return name


def track_rank(track):
    if track == "steps":
        return 0
    if track == "host":
        return 1
    if "compute" in track:
        return 2
    if " copy" in track:
        return 3
    if "managed" in track:
        return 4
    return 5


def load(path):
    process, tracks, spans, counters, flows = None, {}, [], collections.defaultdict(list), {}
    for e in events(path):
        ph = e.get("ph")
        if ph == "M" and e.get("name") == "process_name":
            process = e["args"]["name"]
        elif ph == "M" and e.get("name") == "thread_name":
            tracks[e["tid"]] = e["args"]["name"]
        elif ph == "X":
            spans.append(e)
        elif ph == "C":
            for key, value in e["args"].items():
                counters[e["name"]].append((e["ts"], value))
        elif ph in ("s", "f"):
            flows.setdefault((e.get("cat"), e.get("name"), e["id"]), {})[ph] = e
    for series in counters.values():
        series.sort()
    return process, tracks, spans, counters, flows


def render(path, step_name, from_ms, to_ms, png, title):
    process, tracks, spans, counters, flows = load(path)
    by_name = {tracks[s["tid"]]: None for s in spans}  # tracks that have spans
    step = next((s for s in spans if tracks[s["tid"]] == "steps" and s["name"] == step_name), None)
    if step is None:
        sys.exit("render_timeline.py: %s: no step %r" % (path, step_name))
    # Layers in the model: one more than the highest "layers.N." in a weight or tensor name.
    n_layers = 1 + max([int(m.group(1)) for s in spans for n in ([(s.get("args") or {}).get("tensor", "")]
                        + list((s.get("args") or {}).get("weights") or [])) for m in [LAYER_RE.search(n)] if m],
                       default=-1)
    origin = step["ts"]  # microseconds
    step_ms = step["dur"] / 1e3
    lo = 0.0 if from_ms is None else from_ms
    hi = step_ms if to_ms is None else min(to_ms, step_ms)
    t0, t1 = origin + lo * 1e3, origin + hi * 1e3

    order = sorted(by_name, key=lambda t: (track_rank(t), t))
    row = {t: i for i, t in enumerate(order)}

    W, H, DPI = 16.0, 8.6, 110
    left, right = 0.135, 0.985
    fig = plt.figure(figsize=(W, H), dpi=DPI)
    gs = fig.add_gridspec(2, 1, height_ratios=[max(3, len(order)) * 0.9, 1.6], hspace=0.08,
                          left=left, right=right, top=0.90, bottom=0.20)
    ax = fig.add_subplot(gs[0])
    axm = fig.add_subplot(gs[1], sharex=ax)
    px_per_ms = (right - left) * W * DPI / (hi - lo)

    bar_h = 0.7
    used = collections.Counter()
    for s in spans:
        a, b = s["ts"], s["ts"] + s.get("dur", 0)
        if b < t0 or a > t1 or (b > a and (b <= t0 or a >= t1)):
            continue
        track = tracks[s["tid"]]
        kind = kind_of(track, s, n_layers)
        used[kind] += 1
        x, w = (a - origin) / 1e3, (b - a) / 1e3
        y = row[track]
        ax.broken_barh([(x, max(w, 0.0))], (y - bar_h / 2, bar_h), facecolors=KINDS[kind][1],
                       edgecolors="white" if w * px_per_ms > 3 else "none", linewidth=0.4, zorder=2)
        vis = (max(a, t0) - origin) / 1e3, (min(b, t1) - origin) / 1e3
        label = short_label(track, s)
        if (vis[1] - vis[0]) * px_per_ms > 6.2 * len(label) + 6:
            ax.text((vis[0] + vis[1]) / 2, y, label, ha="center", va="center", fontsize=8,
                    color="white" if kind in ("kernel0", "fault", "evict", "cpu", "copy0") else "black",
                    bbox=dict(facecolor=KINDS[kind][1], edgecolor="none", pad=1.0), clip_on=True, zorder=4)

    # A managed-memory span is a stall at the start of a kernel on the same device: hatch that part of
    # the kernel's bar, so that it does not read as compute.
    stalled = 0
    for s in spans:
        track = tracks[s["tid"]]
        a, b = s["ts"], s["ts"] + s.get("dur", 0)
        if "managed" not in track or b <= t0 or a >= t1 or b <= a:
            continue
        compute = track.split()[0] + " compute"
        if compute in row:
            ax.broken_barh([((a - origin) / 1e3, (b - a) / 1e3)], (row[compute] - bar_h / 2, bar_h),
                           facecolors="none", edgecolors="white", hatch="////", linewidth=0, zorder=2.5)
            stalled += 1

    # Copy -> kernel arrows: from the copy bar's top edge to the kernel bar's bottom edge (or the
    # reverse when the copy row is above), drawn under the text but over the bars, thin and translucent.
    arrows = 0
    for ends in flows.values():
        s, f = ends.get("s"), ends.get("f")
        if s is None or f is None:
            continue
        if max(s["ts"], f["ts"]) < t0 or min(s["ts"], f["ts"]) > t1:
            continue
        ys, yf = row.get(tracks[s["tid"]]), row.get(tracks[f["tid"]])
        if ys is None or yf is None:
            continue
        direction = 1 if yf > ys else -1
        p0 = ((s["ts"] - origin) / 1e3, ys + direction * bar_h / 2)
        p1 = ((f["ts"] - origin) / 1e3, yf - direction * bar_h / 2)
        ax.add_patch(FancyArrowPatch(p0, p1, arrowstyle="-|>", mutation_scale=7, linewidth=0.7,
                                     color=ARROW_COLOUR, alpha=0.55, zorder=3, clip_on=True,
                                     shrinkA=0, shrinkB=0))
        arrows += 1

    ax.set_yticks(range(len(order)))
    ax.set_yticklabels(order, fontsize=10)
    ax.set_ylim(len(order) - 0.5, -0.5)
    ax.set_xlim(lo, hi)
    ax.grid(axis="x", color="#e0e0e0", linewidth=0.6, zorder=0)
    ax.tick_params(axis="x", labelbottom=False)
    ax.set_ylabel("track")

    # Memory counters: the value in force at the window's start, then each change. The scale is that of
    # the counters that change in the window; one that stays constant off that scale is only named in
    # the legend (a 7.6 GiB line would squash a 21.3-21.7 GiB one flat).
    lines = []
    for i, (name, series) in enumerate(sorted(counters.items())):
        before = [v for ts, v in series if ts <= t0]
        xs, ys = [lo], [(before[-1] if before else series[0][1]) / 2**30]
        for ts, v in series:
            if t0 < ts <= t1:
                xs.append((ts - origin) / 1e3)
                ys.append(v / 2**30)
        xs.append(hi)
        ys.append(ys[-1])
        lines.append((name, xs, ys, COUNTER_COLOURS[i % len(COUNTER_COLOURS)]))
    varying = [v for _, _, ys, _ in lines if max(ys) > min(ys) for v in ys] or [v for l in lines for v in l[2]]
    span_lo, span_hi = min(varying, default=0.0), max(varying, default=1.0)
    pad = max(0.1 * (span_hi - span_lo), 0.25)
    ylo, yhi = max(0.0, span_lo - pad), span_hi + pad
    for name, xs, ys, colour in lines:
        changes = len(xs) - 2
        if changes:
            label = "%s (%d changes)" % (name, changes)
        elif ylo <= ys[0] <= yhi:
            label = "%s (constant %.2f GiB)" % (name, ys[0])
        else:
            axm.plot([], [], color=colour, linewidth=1.3, linestyle=":",
                     label="%s: constant %.2f GiB (off scale)" % (name, ys[0]))
            continue
        axm.plot(xs, ys, drawstyle="steps-post", color=colour, linewidth=1.3, label=label)
    axm.set_ylim(ylo, yhi)
    axm.set_ylabel("memory in use\n(GiB)")
    axm.set_xlabel("time since the start of %s (ms)" % step_name)
    axm.grid(color="#e0e0e0", linewidth=0.6)

    handles = [Patch(facecolor=KINDS[k][1], label=KINDS[k][0]) for k in KINDS if used[k]]
    if stalled:
        handles.append(Patch(facecolor=KINDS["kernel0"][1], edgecolor="white", hatch="////",
                             label="kernel stalled by the evict/fault below it"))
    if arrows:
        handles.append(Line2D([], [], color=ARROW_COLOUR, alpha=0.7, marker=">", markersize=4,
                              linewidth=0.8, label="copy -> the kernel that waited for it"))
    handles += axm.get_legend_handles_labels()[0]
    fig.legend(handles=handles, loc="lower center", ncol=min(4, len(handles)), fontsize=9,
               frameon=False, bbox_to_anchor=(0.5 * (left + right), 0.0))

    whole = from_ms is None and to_ms is None
    window = ("the whole step, %.1f ms" % step_ms if whole
              else "%g-%g ms of its %.1f ms" % (lo, hi, step_ms))
    fig.suptitle("%s\n%s: %s" % (title or process, step_name, window), fontsize=12, y=0.985)
    fig.savefig(png, dpi=DPI, metadata={"Software": None})
    plt.close(fig)
    return {"step_ms": step_ms, "arrows": arrows, "kinds": dict(used)}


def run_sim(sim, config, trace):
    cmd = [sim, "run", *config["args"], "--timeline", trace, "--timeline-steps", str(config["steps"])]
    for attempt in range(4):
        try:
            r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
            if r.returncode == 0:
                return cmd, r.stdout
            err = r.stderr.strip()
        except OSError as e:  # the binary is being rebuilt: missing, or text file busy
            err = str(e)
        print("render_timeline.py: %s failed (%s); retrying in 30 s" % (" ".join(cmd), err), file=sys.stderr)
        time.sleep(30)
    sys.exit("render_timeline.py: %s keeps failing" % " ".join(cmd))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trace", help="draw this trace instead of running the configurations")
    p.add_argument("--step", default="decode 1", help="the step the window lies in (--trace)")
    p.add_argument("--from-ms", type=float, help="window start, ms from the step's start (--trace)")
    p.add_argument("--to-ms", type=float, help="window end, ms from the step's start (--trace)")
    p.add_argument("--png", help="output PNG (--trace)")
    p.add_argument("--out", default=OUT_DIR, help="output folder of the configurations (default %(default)s)")
    a = p.parse_args()

    if a.trace:
        info = render(a.trace, a.step, a.from_ms, a.to_ms, a.png or os.path.splitext(a.trace)[0] + ".png", None)
        print(info)
        return

    sim = os.environ.get("SIM", "./build/bin/sim")
    out = os.path.join(REPO, a.out) if not os.path.isabs(a.out) else a.out
    os.makedirs(out, exist_ok=True)
    for config in CONFIGS:
        with tempfile.TemporaryDirectory() as tmp:
            trace = os.path.join(tmp, config["name"] + ".json")
            cmd, _ = run_sim(sim, config, trace)
            size = os.path.getsize(trace)
            for step, lo, hi, suffix in config["windows"]:
                png = os.path.join(out, "%s-%s.png" % (config["name"], suffix))
                info = render(trace, step, lo, hi, png, config["what"])
                print("%s: %s, %.1f ms step, %d arrows, spans by kind %s"
                      % (os.path.relpath(png, REPO), step, info["step_ms"], info["arrows"], info["kinds"]))
            kept = os.path.join(out, config["name"] + ".json")
            if size < MAX_JSON_BYTES:
                with open(trace, "rb") as src, open(kept, "wb") as dst:
                    dst.write(src.read())
                print("%s: %d bytes" % (os.path.relpath(kept, REPO), size))
            elif os.path.exists(kept):
                os.remove(kept)
            shown = ["sim" if c == sim else c for c in cmd]
            shown[shown.index("--timeline") + 1] = config["name"] + ".json"
            print("  " + " ".join(shown))


if __name__ == "__main__":
    main()
