#!/usr/bin/python3
"""What a `sim run --timeline FILE` trace holds, without a viewer (ui.perfetto.dev needs the internet and
chrome://tracing is gone from current Chromium): its tracks with their span counts and busy time, the
steps, each memory counter's range, the copy-to-kernel arrows (and whether every one has both ends), and
the args each track's spans carry. Reads the file as a stream, so a 1,000-step timeline of a 70B model
(hundreds of MB) needs little memory. Exit code 1 when the file is not a well-formed trace or an arrow
lacks an end.

  /usr/bin/python3 experiments/studies/timeline_summary.py t.json
"""
import collections
import json
import sys


def events(path, chunk=1 << 20):
    """Yields the objects of the file's traceEvents array one at a time."""
    decoder = json.JSONDecoder()
    with open(path, encoding="utf-8") as f:
        buf = f.read(chunk)
        start = buf.find('"traceEvents":[')
        if start < 0:
            raise ValueError("no traceEvents array")
        pos = start + len('"traceEvents":[')
        while True:
            while pos < len(buf) and buf[pos] in " \n\r\t,":
                pos += 1
            if pos < len(buf) and buf[pos] == "]":
                return
            try:
                obj, pos = decoder.raw_decode(buf, pos)
            except json.JSONDecodeError:
                more = f.read(chunk)
                if not more:
                    raise ValueError("the trace ends inside an event") from None
                buf = buf[pos:] + more  # keep only what is not decoded yet
                pos = 0
                continue
            yield obj


def summarise(path):
    process = None
    tracks = {}                                   # tid -> name
    spans = collections.Counter()                 # tid -> spans
    busy = collections.Counter()                  # tid -> microseconds
    arg_keys = collections.defaultdict(set)       # tid -> keys seen
    steps = []
    counters = {}                                 # name -> [samples, min, max]
    flow_ends = collections.defaultdict(lambda: [0, 0])
    for e in events(path):
        ph = e.get("ph")
        if ph == "M" and e.get("name") == "process_name":
            process = e["args"]["name"]
        elif ph == "M" and e.get("name") == "thread_name":
            tracks[e["tid"]] = e["args"]["name"]
        elif ph == "X":
            tid = e["tid"]
            spans[tid] += 1
            busy[tid] += e.get("dur", 0)
            arg_keys[tid].update(e.get("args", {}).keys())
            if tracks.get(tid) == "steps":
                steps.append(e["name"])
        elif ph == "C":
            for key, value in e["args"].items():
                c = counters.setdefault(e["name"] + " " + key, [0, value, value])
                c[0] += 1
                c[1] = min(c[1], value)
                c[2] = max(c[2], value)
        elif ph in ("s", "f"):
            flow_ends[(e.get("cat"), e.get("name"), e["id"])][0 if ph == "s" else 1] += 1

    print(f"{path}: {process or '(no process name)'}")
    print(f"tracks ({len(tracks)}):")
    for tid in sorted(tracks):
        keys = ", ".join(sorted(arg_keys[tid])) or "-"
        print(f"  {tid:3d} {tracks[tid]:<28} {spans[tid]:8d} spans  {busy[tid] / 1e3:12.3f} ms  args: {keys}")
    shown = ", ".join(steps[:3]) + (f", ... {steps[-1]}" if len(steps) > 3 else "")
    print(f"steps: {len(steps)} ({shown})")
    print("counters (bytes):")
    for name in sorted(counters):
        n, lo, hi = counters[name]
        print(f"  {name:<28} {n:8d} samples  {lo / 2**30:10.3f} .. {hi / 2**30:10.3f} GiB")
    whole = sum(1 for s, f in flow_ends.values() if s == 1 and f == 1)
    broken = len(flow_ends) - whole
    print(f"flows: {len(flow_ends)} arrows, {whole} with both ends, {broken} broken")
    return broken == 0


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: timeline_summary.py TIMELINE.json")
    try:
        ok = summarise(sys.argv[1])
    except (OSError, ValueError) as err:
        sys.exit(f"timeline_summary.py: {sys.argv[1]}: {err}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
