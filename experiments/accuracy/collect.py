#!/usr/bin/python3
"""Every validation row of every set, in one file: results/accuracy/rows.csv (issue 38).

    /usr/bin/python3 experiments/accuracy/collect.py [--out results/accuracy/rows.csv]

Reads what the compare scripts committed (their CSVs where they write one, otherwise their table.md /
compare.md) and runs nothing that needs the built `sim`. Each set below names its files, its expected row
count (the whole set, as its table has it) and how each row maps to a workload and a strategy; a table
whose columns are not found, a count that differs, or a table file under results/validation or
results/frameworks that no set reads and that is not listed in NOT_VALIDATION stops the run with the
file's name: no set is skipped silently.

Split: results/accuracy/splits.csv (set, row filter, in|out, reason). A set's own CSV may carry a `split`
column per row, which wins over splits.csv. A new set needs no code here if its folder holds
`accuracy_rows.csv` with the columns of rows.csv (without `source`; `split` optional): see
discovered_sets().

Strategies: resident (everything in GPU memory); host-copy (weights copied from host memory per use: layer
streaming, accelerate's hooks, DisTorch/ComfyUI casts, a model swap); peer (copied from a second GPU); managed
(cudaMallocManaged, any advice, within VRAM); managed-oversubscribed (managed past VRAM); cpu-execute (some or
all ops computed on the CPU: llama.cpp below -ngl all, -ot, --n-cpu-moe, -nkvo; torchao's CPU optimizer step);
mixed (two memory strategies in one run: managed memory plus copied layers).

Stdlib only (Debian's /usr/bin/python3).
"""
import argparse
import csv
import glob
import io
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLUMNS = ["set", "source", "row", "quantity", "measured", "predicted", "error", "gpu",
           "machine_class", "workload", "strategy", "split"]
QUANTITIES = {"seconds", "tokens_per_s", "bytes"}
WORKLOADS = {"decode", "prefill", "batched-decode", "diffusion", "vae", "text-encoder", "training",
             "memory", "gemv"}
STRATEGIES = {"resident", "host-copy", "peer", "managed", "managed-oversubscribed", "cpu-execute",
              "mixed"}
MACHINE_CLASSES = {"measured", "published", "datasheet"}
SPLITS_FILE = "results/accuracy/splits.csv"

# Markdown files with tables under results/validation and results/frameworks that are not validation
# rows, each with the reason (the coverage check fails on any other file no set reads).
NOT_VALIDATION = {
    "results/validation/table.md": "rendering of results/validation/comparison.csv (hf-decode), read from the CSV",
    "results/validation/regimes/table.md": "rendering of results/validation/regimes/comparison.csv, read from the CSV",
    "results/validation/llamacpp/moe.md": "the first MoE call's 8 rows under uniform routing only; the same 8 "
                                          "measurements are the first 8 rows of moe_routing.md (llamacpp-moe)",
}

GB = 1e9
GIB = 2.0 ** 30


class CollectError(Exception):
    pass


# ---------------------------------------------------------------- markdown tables

class Table:
    def __init__(self, path, header, rows, line, heading):
        self.path, self.header, self.rows, self.line, self.heading = path, header, rows, line, heading

    def col(self, name, after=None):
        """Index of the column named `name` (the first one after column index `after` if given)."""
        start = 0 if after is None else after + 1
        for i in range(start, len(self.header)):
            if self.header[i] == name:
                return i
        raise CollectError("%s (table at line %d): no column %r%s; columns: %s" % (
            self.path, self.line, name, "" if after is None else " after %r" % self.header[after],
            self.header))


def split_cells(line):
    s = line.strip().replace("\\|", "\x00")
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|"):
        s = s[:-1]
    return [c.strip().replace("\x00", "|") for c in s.split("|")]


def md_tables(path):
    full = os.path.join(ROOT, path)
    if not os.path.exists(full):
        raise CollectError("%s: file not found" % path)
    with open(full, encoding="utf-8") as f:
        lines = f.read().splitlines()
    tables, i, heading = [], 0, ""
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        if line.strip().startswith("|") and i + 1 < len(lines) and re.match(r"^\s*\|[\s:|-]+\|\s*$", lines[i + 1]):
            header = split_cells(line)
            rows, j = [], i + 2
            while j < len(lines) and lines[j].strip().startswith("|"):
                cells = split_cells(lines[j])
                if len(cells) != len(header):
                    raise CollectError("%s line %d: %d cells under a %d-column header" % (
                        path, j + 1, len(cells), len(header)))
                rows.append(cells)
                j += 1
            tables.append(Table(path, header, rows, i + 1, heading))
            i = j
            continue
        i += 1
    return tables


def tables_with(path, columns, count=None):
    """The tables of `path` whose header has every name in `columns`; fails if none (or not `count`)."""
    found = [t for t in md_tables(path) if all(c in t.header for c in columns)]
    if not found:
        raise CollectError("%s: no table with the columns %s" % (path, columns))
    if count is not None and len(found) != count:
        raise CollectError("%s: %d tables with the columns %s, expected %d" % (path, len(found), columns, count))
    return found


def pct(cell, where):
    m = re.match(r"^\s*([+-]?\d+(?:\.\d+)?)\s*%", cell)
    if not m:
        raise CollectError("%s: not a percentage: %r" % (where, cell))
    return float(m.group(1)) / 100.0


def number(cell, where):
    m = re.match(r"^\s*([+-]?\d+(?:\.\d+)?)", cell.replace(",", ""))
    if not m:
        raise CollectError("%s: not a number: %r" % (where, cell))
    return float(m.group(1))


UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "GB": GB, "GiB": GIB}


def quantity_value(cell, where, default_unit=None):
    """'69.7 ms' -> 0.0697, '0.177 s' -> 0.177, '24.43 GB' -> 2.443e10; a bare number takes default_unit."""
    m = re.match(r"^\s*([+-]?\d+(?:\.\d+)?)\s*(s|ms|us|GB|GiB)?\b", cell.replace(",", ""))
    if not m:
        raise CollectError("%s: not a quantity: %r" % (where, cell))
    unit = m.group(2) or default_unit
    if unit is None:
        raise CollectError("%s: no unit in %r" % (where, cell))
    return float(m.group(1)) * UNITS[unit]


def pair(cell, where, default_unit=None):
    """'24.43 / 24.38 GB' -> (measured, predicted) in base units."""
    m = re.match(r"^\s*([+-]?\d+(?:\.\d+)?)\s*/\s*([+-]?\d+(?:\.\d+)?)\s*(s|ms|GB|GiB)?\s*$", cell)
    if not m:
        raise CollectError("%s: not a 'measured / predicted' pair: %r" % (where, cell))
    unit = m.group(3) or default_unit
    if unit is None:
        raise CollectError("%s: no unit in %r" % (where, cell))
    return float(m.group(1)) * UNITS[unit], float(m.group(2)) * UNITS[unit]


def rel(measured, predicted):
    return predicted / measured - 1.0


# ---------------------------------------------------------------- rows

def row(set_id, source, label, quantity, measured, predicted, error, gpu, workload, strategy,
        machine_class="measured", split=""):
    return {"set": set_id, "source": source, "row": label, "quantity": quantity, "measured": measured,
            "predicted": predicted, "error": error, "gpu": gpu, "machine_class": machine_class,
            "workload": workload, "strategy": strategy, "split": split}


def gpu_of(text):
    for kind in ("H200", "H100", "A100", "RTX 5090", "RTX 4090", "RTX 3090"):
        if kind in text:
            return kind.replace("RTX ", "RTX")
    raise CollectError("no GPU kind in %r" % text)


def labelled(t, cells, names, prefix=""):
    parts = [cells[t.col(n)].replace("`", "") for n in names]
    return (prefix + " ".join(p for p in parts if p)).strip()


def offload_strategy(offload_cell):
    return "resident" if offload_cell.strip() in ("none", "-", "") else "host-copy"


def simple_table(set_id, path, columns, label_cols, meas, pred, err, quantity, gpu, workload, strategy,
                 unit=None, prefix="", table_filter=None, tables=None):
    """One row per table line: measured / predicted columns with units, the set's own error column."""
    out = []
    for t in tables if tables is not None else tables_with(path, columns):
        if table_filter and not table_filter(t):
            continue
        im, ip, ie = t.col(meas), t.col(pred, after=t.col(meas)), None
        ie = t.col(err, after=ip)
        for cells in t.rows:
            where = "%s line %d" % (path, t.line)
            d = {h: cells[i] for i, h in enumerate(t.header)}
            label = labelled(t, cells, label_cols, prefix(t) if callable(prefix) else prefix)
            if quantity == "tokens_per_s":
                m, p = number(cells[im], where), number(cells[ip], where)
            else:
                m, p = quantity_value(cells[im], where, unit), quantity_value(cells[ip], where, unit)
            out.append(row(set_id, path, label, quantity, m, p, pct(cells[ie], where), gpu,
                           workload(d) if callable(workload) else workload,
                           strategy(d) if callable(strategy) else strategy))
    return out


def pair_columns(set_id, path, t, label, pairs, gpu, strategy, unit, err_after=True):
    """Rows from 'meas / pred' pair columns, each followed by its 'err' column when err_after."""
    out = []
    for cells in t.rows:
        where = "%s line %d" % (path, t.line)
        for name, what in pairs:
            i = t.col(name)
            m, p = pair(cells[i], where, unit)
            e = pct(cells[i + 1], where) if err_after else rel(m, p)
            if err_after and t.header[i + 1] not in ("err", "error"):
                raise CollectError("%s: column after %r is %r, not its error" % (where, name, t.header[i + 1]))
            out.append(row(set_id, path, "%s | %s" % (label(cells), what), "bytes", m, p, e, gpu, "memory",
                           strategy(cells) if callable(strategy) else strategy))
    return out


def read_csv_rows(path, need):
    """A CSV file's rows as dicts, after checking that it has every column of `need` (named in that order if not)."""
    with open(os.path.join(ROOT, path), newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in need if c not in (reader.fieldnames or [])]
        if missing:
            raise CollectError("%s: columns %s not found" % (path, missing))
        return list(reader)


# ---------------------------------------------------------------- the sets

def hf_decode():
    path = "results/validation/comparison.csv"
    out = []
    need = sorted({"lease", "model", "config", "regime", "strategy", "calibration", "measured_s", "event_s"})
    for r in read_csv_rows(path, need):
        if r["calibration"] == "True":
            continue  # the lease's declared calibration row: fitted, excluded from every error figure
        strategy = {"resident": "resident", "pinned": "host-copy", "pageable": "host-copy",
                    "peer": "peer", "managed": "managed"}[r["strategy"]]
        m, p = float(r["measured_s"]), float(r["event_s"])
        out.append(row("hf-decode", path, "%s %s %s %s" % (r["lease"], r["model"], r["config"], r["regime"]),
                       "seconds", m, p, rel(m, p), "H100" if r["lease"].startswith("lease12") else "H200",
                       "decode", strategy, split=r.get("split", "")))
    return out


def regimes():
    path = "results/validation/regimes/comparison.csv"
    out = []
    need = sorted({"model", "regime", "prompt", "batch", "gpu", "repeat", "measured_s", "event_s"})
    for r in read_csv_rows(path, need):
        if r["repeat"] != "0":
            continue  # batch 1 measured again at the end of a process: shown in the table, not counted
        m, p = float(r["measured_s"]), float(r["event_s"])
        prefill = r["regime"] == "prefill"
        out.append(row("regimes-prefill" if prefill else "regimes-batched", path,
                       "%s %s prompt %s batch %s warm" % (r["model"], r["regime"], r["prompt"], r["batch"]),
                       "seconds", m, p, rel(m, p), gpu_of(r["gpu"]),
                       "prefill" if prefill else ("decode" if r["batch"] == "1" else "batched-decode"),
                       "resident", split=r.get("split", "")))
    return out


def framework_table(set_id, path, prefix="", strategy=None):
    cols = ["configuration", "regime", "measured", "predicted", "error", "offloaded bytes: run / tiersim"]

    def strat(d):
        if strategy:
            return strategy(d)
        return "resident" if d["offloaded bytes: run / tiersim"].startswith("0 /") else "host-copy"
    return simple_table(set_id, path, cols, ["configuration", "regime"], "measured", "predicted", "error",
                        "seconds", "H100", "decode", strat, prefix=prefix)


def accelerate():
    return framework_table("accelerate", "results/frameworks/accelerate/table.md")


def distorch():
    return (framework_table("distorch", "results/frameworks/distorch/table.md", "casts on the compute stream: ")
            + framework_table("distorch", "results/frameworks/distorch/table_offload.md", "two offload streams: "))


def comfyui():
    return (framework_table("comfyui", "results/frameworks/comfyui/table.md", "call 1: ")
            + framework_table("comfyui", "results/frameworks/comfyui/call2/table.md", "call 2: ")
            + framework_table("comfyui", "results/frameworks/comfyui/call2/native/table.md",
                              "call 2, native allocator: "))


def um_prefill():
    path = "results/validation/um-prefill/table.md"
    t = tables_with(path, ["prompt", "measured warm prefill", "measured decode (warm)"], count=1)[0]
    out = []
    for cells in t.rows:
        where = "%s line %d" % (path, t.line)
        for set_id, first, workload in (("um-prefill", "measured warm prefill", "prefill"),
                                        ("um-prefill-decode", "measured decode (warm)", "decode")):
            i = t.col(first)
            if t.header[i + 1] != "predicted" or t.header[i + 2] != "error":
                raise CollectError("%s: %r is not followed by predicted, error" % (where, first))
            out.append(row(set_id, path, "prompt %s, warm" % cells[t.col("prompt")], "seconds",
                           quantity_value(cells[i], where), quantity_value(cells[i + 1], where),
                           pct(cells[i + 2], where), "H100", workload, "managed"))
    return out


def seed_allocator():
    path = "results/validation/seed-allocator/table.md"
    return simple_table("seed-allocator", path, ["configuration", "regime", "measured", "predicted", "error"],
                        ["configuration", "regime"], "measured", "predicted", "error", "seconds", "H100", "decode",
                        lambda d: "mixed" if "+offload" in d["configuration"] else "managed")


def gemv_chain():
    path = "results/validation/gemv_chain_table.md"

    def strat(d):
        c = d["configuration"]
        return "resident" if c == "resident" else "managed" if c.startswith("managed") else "host-copy"
    return simple_table("gemv-chain", path, ["configuration", "measured step", "predicted", "error"],
                        ["configuration"], "measured step", "predicted", "error", "seconds", "H200", "gemv", strat)


def llamacpp_strategy(flags):
    """-ngl 99 alone: every layer on the GPU; anything else (-ngl 0 or part, -ot, --n-cpu-moe, -nkvo) computes
    some or all ops on the CPU."""
    if re.search(r"-ngl 99\b", flags) and not re.search(r"-nkvo|-ot |-ncmoe|--n-cpu-moe", flags):
        return "resident"
    return "cpu-execute"


def llamacpp_workload(d):
    test = d["test"]
    if test.startswith("pp"):
        return "prefill"
    if test.startswith("tg"):
        return "decode"
    raise CollectError("llama-bench test %r is neither pp nor tg" % test)


def llamacpp():
    path = "results/validation/llamacpp/table.md"
    cols = ["model", "file", "llama-bench", "test", "measured t/s", "tiersim t/s", "error"]
    return simple_table("llamacpp", path, cols, ["model", "file", "llama-bench", "test"], "measured t/s",
                        "tiersim t/s", "error", "tokens_per_s", "H100", llamacpp_workload,
                        lambda d: llamacpp_strategy(d["llama-bench"]))


def llamacpp_graphs():
    path = "results/validation/llamacpp/graphs.md"
    cols = ["model", "file", "llama-bench", "test", "measured t/s", "tiersim t/s", "error"]
    return simple_table("llamacpp-graphs", path, cols, ["model", "file", "llama-bench", "test"], "measured t/s",
                        "tiersim t/s", "error", "tokens_per_s", "H100", llamacpp_workload,
                        lambda d: llamacpp_strategy(d["llama-bench"]))


def llamacpp_moe():
    # Predicted with the routing llama.cpp chose (captured), the index's headline column; the uniform-routing
    # prediction beside it is an alternative input, not a second row.
    path = "results/validation/llamacpp/moe_routing.md"
    cols = ["measured", "llama-bench", "test", "measured t/s", "tiersim, llama.cpp's routing"]
    return simple_table("llamacpp-moe", path, cols, ["measured", "llama-bench", "test"], "measured t/s",
                        "tiersim, llama.cpp's routing", "error", "tokens_per_s", "H100", llamacpp_workload,
                        lambda d: llamacpp_strategy(d["llama-bench"]), prefix="qwen3-30b-a3b-L24 Q4_K_M ")


def diffusion():
    path = "results/validation/diffusion/table.md"
    cols = ["resolution", "frames", "offload (DisTorch)", "host memory", "measured", "predicted", "error",
            "cuda:0 peak allocated: run / tiersim"]
    out = []
    for t in tables_with(path, cols):
        heading = t.heading.split(" (")[0].split(": ")[0]
        for cells in t.rows:
            where = "%s line %d" % (path, t.line)
            d = {h: cells[i] for i, h in enumerate(t.header)}
            label = "%s | %s %s %s %s" % (heading, d["resolution"], "" if d["frames"] == "-" else d["frames"] + " frames",
                                          d["offload (DisTorch)"].strip("`"), d["host memory"])
            label = re.sub(r"\s+", " ", label)
            strategy = offload_strategy(d["offload (DisTorch)"])
            out.append(row("diffusion-seconds", path, label, "seconds", quantity_value(d["measured"], where),
                           quantity_value(d["predicted"], where), pct(d["error"], where), "H100", "diffusion",
                           strategy))
            m, p = pair(d["cuda:0 peak allocated: run / tiersim"], where)
            out.append(row("diffusion-memory", path, label + " | peak allocated", "bytes", m, p, rel(m, p), "H100",
                           "memory", strategy))
    return out


def diffusion_reserved():
    path = "results/validation/diffusion/reserved.md"
    cols = ["model", "weights", "resolution", "frames", "offload (DisTorch)", "allocated: run / tiersim",
            "reserved: run / tiersim"]
    t = tables_with(path, cols, count=1)[0]

    def label(cells):
        d = {h: cells[i] for i, h in enumerate(t.header)}
        return re.sub(r"\s+", " ", "%s %s %s %s %s" % (d["model"], d["weights"], d["resolution"],
                                                        "" if d["frames"] == "-" else d["frames"] + " frames",
                                                        d["offload (DisTorch)"].strip("`")))
    return pair_columns("diffusion-reserved", path, t, label,
                        [("allocated: run / tiersim", "peak allocated"), ("reserved: run / tiersim", "peak reserved")],
                        "H100", lambda cells: offload_strategy(cells[t.col("offload (DisTorch)")]), None)


def model_swap():
    path = "results/validation/model-swap/table.md"
    t = tables_with(path, ["move", "median"], count=1)[0]
    swap = [c for c in t.rows if c[0].startswith("one swap")]
    if len(swap) != 1:
        raise CollectError("%s: no 'one swap' row" % path)
    measured = quantity_value(swap[0][t.col("median")], path)
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        m = re.search(r"\*\*([0-9.]+) s, ([+-][0-9.]+%)\*\*", f.read())
    if not m:
        raise CollectError("%s: tiersim's '**N s, E%%**' line not found" % path)
    return [row("model-swap", path, "Wan 2.2 A14B fp8 expert swap (unload + load), median of 3", "seconds",
                measured, float(m.group(1)), pct(m.group(2), path), "H100", "diffusion", "host-copy")]


def wan_vae():
    path = "results/validation/wan-vae/table.md"
    t = tables_with(path, ["size", "latent frames", "measured s", "predicted s", "error",
                           "peak allocated GB: measured", "reserved GB: measured"], count=1)[0]
    out = []
    for cells in t.rows:
        where = "%s line %d" % (path, t.line)
        label = "%s (%s latent frames)" % (cells[t.col("size")], cells[t.col("latent frames")])
        i = t.col("measured s")
        out.append(row("wan-vae", path, label, "seconds", float(cells[i]), float(cells[i + 1]),
                       pct(cells[i + 2], where), "H100", "vae", "resident"))
        for name, what in (("peak allocated GB: measured", "peak allocated"), ("reserved GB: measured", "peak reserved")):
            i = t.col(name)
            if t.header[i + 1] != "predicted" or t.header[i + 2] != "error":
                raise CollectError("%s: %r is not followed by predicted, error" % (where, name))
            out.append(row("wan-vae-memory", path, label + " | " + what, "bytes", float(cells[i]) * GB,
                           float(cells[i + 1]) * GB, pct(cells[i + 2], where), "H100", "memory", "resident"))
    return out


def umt5():
    path = "results/validation/umt5/table.md"
    return simple_table("umt5", path, ["weights", "tokens", "measured", "predicted", "error"], ["weights", "tokens"],
                        "measured", "predicted", "error", "seconds", "H100", "text-encoder", "resident",
                        prefix="umT5-XXL ")


def qwen_image_te():
    path = "results/validation/qwen-image-te/table.md"
    return simple_table("qwen-image-te", path, ["weights", "tokens", "measured forward", "predicted", "error"],
                        ["weights", "tokens"], "measured forward", "predicted", "error", "seconds", "H200",
                        "text-encoder", "resident", prefix="Qwen2.5-VL-7B ")


def stage_workload(d):
    s = d["stage"].lower()
    if "vae" in s or s.startswith("ae_"):
        return "vae"
    if "dit" in s:
        return "diffusion"
    return "text-encoder"


def comfy_stages(set_id, path, gpu):
    return simple_table(set_id, path, ["stage", "weights", "size", "measured", "predicted", "error"],
                        ["stage", "weights", "size"], "measured", "predicted", "error", "seconds", gpu,
                        stage_workload, "resident")


def stage_table(set_id, path, gpu):
    return simple_table(set_id, path, ["stage", "size", "measured", "predicted", "error"], ["stage", "size"],
                        "measured", "predicted", "error", "seconds", gpu, stage_workload, "resident")


def moe_hf():
    path = "results/validation/moe-hf/table.md"
    return simple_table("moe-hf", path, ["experts implementation", "regime", "measured", "predicted", "error"],
                        ["experts implementation", "regime"], "measured", "predicted", "error", "seconds", "H100",
                        "decode", "resident", prefix="Qwen3-30B-A3B L24 ")


def moe_accelerate():
    return framework_table("moe-accelerate", "results/validation/moe-accelerate/table.md")


def moe_um():
    path = "results/validation/moe-um/table.md"
    strat = lambda d: "resident" if d["configuration"] == "resident" else "managed"
    decode = tables_with(path, ["configuration", "experts", "regime", "measured", "predicted", "error"], count=1)
    first = tables_with(path, ["configuration", "experts", "measured prefill (128 tokens, cold)", "predicted", "error"],
                        count=1)
    return (simple_table("moe-um", path, [], ["configuration", "experts", "regime"], "measured", "predicted", "error",
                         "seconds", "H100", "decode", strat, tables=decode, prefix="Qwen3-30B-A3B L24 decode ")
            + simple_table("moe-um-first-step", path, [], ["configuration", "experts"],
                           "measured prefill (128 tokens, cold)", "predicted", "error", "seconds", "H100", "prefill",
                           strat, tables=first, prefix="Qwen3-30B-A3B L24 first step (cold prefill) "))


INFER_PAIRS = [("prefill peak allocated GiB meas / pred", "prefill peak allocated"),
               ("prefill peak reserved GiB meas / pred", "prefill peak reserved"),
               ("decode peak allocated GiB meas / pred", "decode peak allocated"),
               ("decode peak reserved GiB meas / pred", "decode peak reserved")]


def infer_table(set_id, path, label_cols, strategy, prefix=""):
    t = tables_with(path, label_cols + [p for p, _ in INFER_PAIRS], count=1)[0]

    def label(cells):
        parts = []
        for c in label_cols:
            v = cells[t.col(c)]
            if v:
                parts.append("%s %s" % (c, v) if c in ("batch", "prompt", "cap") else v)
        return prefix + ", ".join(parts)
    return pair_columns(set_id, path, t, label, INFER_PAIRS, "H100", strategy, "GiB")


def inference_memory():
    return (infer_table("inference-memory", "results/validation/inference-memory/compare.md",
                        ["model", "batch", "prompt", "PYTORCH_CUDA_ALLOC_CONF"], "resident")
            + infer_table("inference-memory", "results/validation/inference-memory/accelerate/compare.md",
                          ["model", "cap", "prompt"], "host-copy", prefix="accelerate: "))


def inference_memory_moe():
    return (infer_table("inference-memory-moe", "results/validation/inference-memory/moe/compare.md",
                        ["model", "prompt"], "resident")
            + infer_table("inference-memory-moe", "results/validation/inference-memory/moe/compare_accelerate.md",
                          ["model", "cap", "prompt"], "host-copy", prefix="accelerate: "))


def optimizer_offload():
    path = "results/validation/optimizer-offload/compare.md"
    t = tables_with(path, ["model", "set-up", "ckpt", "offload", "alloc GiB meas / pred", "reserved GiB meas / pred",
                           "step ms meas / pred"], count=1)[0]
    label = lambda cells: "%s %s ckpt %s offload %s" % tuple(cells[t.col(c)] for c in ("model", "set-up", "ckpt", "offload"))
    out = pair_columns("optimizer-offload-memory", path, t, label,
                       [("alloc GiB meas / pred", "peak allocated"), ("reserved GiB meas / pred", "peak reserved")],
                       "H100", "cpu-execute", "GiB")
    for cells in t.rows:
        where = "%s line %d" % (path, t.line)
        i = t.col("step ms meas / pred")
        m, p = pair(cells[i], where, "ms")
        out.append(row("optimizer-offload", path, label(cells) + " | step", "seconds", m, p, pct(cells[i + 1], where),
                       "H100", "training", "cpu-execute"))
    return out


def training():
    path = "results/validation/training/compare.md"
    t = tables_with(path, ["model", "set-up", "ckpt", "shape", "PYTORCH_CUDA_ALLOC_CONF", "alloc GiB meas / pred",
                           "reserved GiB meas / pred", "step ms meas / pred"], count=1)[0]

    def label(cells):
        s = "%s %s ckpt %s %s" % tuple(cells[t.col(c)] for c in ("model", "set-up", "ckpt", "shape"))
        conf = cells[t.col("PYTORCH_CUDA_ALLOC_CONF")]
        return s + (" " + conf if conf else "")
    out = pair_columns("training-memory", path, t, label,
                       [("alloc GiB meas / pred", "peak allocated"), ("reserved GiB meas / pred", "peak reserved")],
                       "H100", "resident", "GiB")
    for cells in t.rows:
        where = "%s line %d" % (path, t.line)
        i = t.col("step ms meas / pred")
        m, p = pair(cells[i], where, "ms")
        out.append(row("training", path, label(cells) + " | step", "seconds", m, p, pct(cells[i + 1], where), "H100",
                       "training", "resident"))
    return out


# (set id, function, expected rows, what the set is): the expected count is the whole set as its table has it.
SETS = [
    ("hf-decode", hf_decode, 273, "HF eager decode, batch 1, eleven leases (comparison.csv, calibration rows excluded)"),
    ("regimes-prefill", regimes, None, "resident prefill 512-8192, H100"),
    ("regimes-batched", None, None, "resident decode at batch 1-64, H100"),
    ("accelerate", accelerate, 6, "accelerate device_map=auto + its hooks"),
    ("distorch", distorch, 12, "DisTorch casts on the compute stream (6) and on two offload streams (6)"),
    ("comfyui", comfyui, 22, "ComfyUI partial loading, three calls (10 + 8 + 4)"),
    ("um-prefill", um_prefill, None, "prompts read from host memory (managed), warm prefill"),
    ("um-prefill-decode", None, None, "the same runs' warm decode step (managed)"),
    ("seed-allocator", seed_allocator, 16, "seed 000's allocator as written"),
    ("gemv-chain", gemv_chain, 14, "a GEMV chain without a framework"),
    ("llamacpp", llamacpp, 44, "llama-bench pp512/tg128"),
    ("llamacpp-graphs", llamacpp_graphs, 16, "llama-bench with CUDA graphs on and off"),
    ("llamacpp-moe", llamacpp_moe, 19, "llama.cpp on Qwen3-30B-A3B L24, captured routing"),
    ("diffusion-seconds", diffusion, 94, "DiT iterations: FLUX, Wan, Qwen-Image, resident and DisTorch"),
    ("diffusion-memory", None, 94, "the same iterations' peak allocated"),
    ("diffusion-reserved", diffusion_reserved, 46, "caching allocator replay: 23 runs x allocated, reserved"),
    ("model-swap", model_swap, 1, "ComfyUI's swap between Wan 2.2 A14B's experts"),
    ("wan-vae", wan_vae, 8, "the Wan 2.1 VAE's decode, seconds"),
    ("wan-vae-memory", None, 16, "the same decodes' peak allocated and reserved"),
    ("umt5", umt5, 4, "Wan's umT5-XXL encode"),
    ("qwen-image-te", qwen_image_te, 8, "Qwen-Image's text encoder, Qwen2.5-VL-7B"),
    ("comfy-stages", lambda: comfy_stages("comfy-stages", "results/validation/comfy_stages/table.md", "H100"), 8,
     "FLUX's text encoders and VAE decode, H100"),
    ("comfy-stages-h200", lambda: comfy_stages("comfy-stages-h200", "results/validation/comfy_stages_h200/table.md",
                                               "H200"), 7, "FLUX's and Wan's text encoders, H200"),
    ("qwen-image-h200", lambda: stage_table("qwen-image-h200", "results/validation/qwen-image-h200/table.md", "H200"),
     5, "the Wan 2.1 VAE decode and Qwen-Image's DiT on an H200"),
    ("flux-ae-h200", lambda: stage_table("flux-ae-h200", "results/validation/flux-ae-h200/table.md", "H200"), 5,
     "FLUX's VAE encode (Kontext reference) and decode on an H200"),
    ("moe-hf", moe_hf, 6, "transformers' Qwen3Moe decode, grouped_mm / eager"),
    ("moe-accelerate", moe_accelerate, 6, "accelerate on a MoE"),
    ("moe-um", moe_um, 16, "Qwen3-30B-A3B L24 decode in managed memory"),
    ("moe-um-first-step", None, 8, "the same processes' first step (cold prefill)"),
    ("inference-memory", inference_memory, 116, "PyTorch's allocator at inference: 25 + 4 runs x 4 peaks"),
    ("inference-memory-moe", inference_memory_moe, 40, "the allocator for MoE inference: 6 + 4 runs x 4 peaks"),
    ("optimizer-offload", optimizer_offload, 22, "torchao CPU-offloaded optimizer: step time"),
    ("optimizer-offload-memory", None, 44, "the same runs' peak allocated and reserved"),
    ("training", training, 90, "training steps: step time"),
    ("training-memory", None, 180, "the same steps' peak allocated and reserved"),
]
EXPECTED_EXTRA = {"regimes-prefill": 15, "regimes-batched": 15, "um-prefill": 3, "um-prefill-decode": 3}


def csv_set(set_id, path, label_cols, measured, predicted, quantity, gpu, workload, strategy, keep=None,
            error=None):
    """Rows of a compare script's CSV: label columns joined, measured/predicted columns (base units), the error
    column if given (else predicted / measured - 1); workload/strategy/gpu a value or a function of the row;
    keep filters rows; a `split` column, where the CSV has one, is the row's split."""
    out = []
    need = sorted(set(label_cols) | {measured, predicted} | ({error} if error else set()))
    for r in read_csv_rows(path, need):
        if keep and not keep(r):
            continue
        m, p = float(r[measured]), float(r[predicted])
        val = lambda v: v(r) if callable(v) else v
        out.append(row(set_id, path, " ".join(r[c] for c in label_cols), quantity, m, p,
                       float(r[error]) if error else rel(m, p), val(gpu), val(workload), val(strategy),
                       split=r.get("split", "") or ""))
    return out


def discovered_sets():
    """Sets that carry their rows themselves: any results/**/accuracy_rows.csv in rows.csv's columns (without
    `source`, which is the file; `split` optional, per row)."""
    out = []
    for full in sorted(glob.glob(os.path.join(ROOT, "results", "**", "accuracy_rows.csv"), recursive=True)):
        path = os.path.relpath(full, ROOT)
        if path.startswith(os.path.join("results", "accuracy")):
            continue
        for r in read_csv_rows(path, [c for c in COLUMNS if c not in ("source", "split")]):
            out.append(row(r["set"], path, r["row"], r["quantity"], float(r["measured"]), float(r["predicted"]),
                           float(r["error"]), r["gpu"], r["workload"], r["strategy"], r["machine_class"],
                           r.get("split", "") or ""))
    return out


# ---------------------------------------------------------------- splits

def read_splits():
    full = os.path.join(ROOT, SPLITS_FILE)
    if not os.path.exists(full):
        raise CollectError("%s: not found" % SPLITS_FILE)
    rules = []
    with open(full, newline="") as f:
        lines = [l for l in f if not l.startswith("#")]
    for r in csv.DictReader(io.StringIO("".join(lines))):
        if r["split"] not in ("in", "out"):
            raise CollectError("%s: set %s: split %r is neither in nor out" % (SPLITS_FILE, r["set"], r["split"]))
        if not r.get("reason", "").strip():
            raise CollectError("%s: set %s: no reason" % (SPLITS_FILE, r["set"]))
        rules.append((r["set"], r.get("row_filter", "") or "", r["split"], r["reason"].strip()))
    return rules


def read_splits_with_reasons():
    return read_splits()


def assign_splits(rows):
    rules = read_splits()
    for r in rows:
        if r["split"]:
            if r["split"] not in ("in", "out"):
                raise CollectError("%s: row %r: split %r is neither in nor out" % (r["source"], r["row"], r["split"]))
            continue  # the set's own per-row split wins
        match = None
        for set_id, filt, split, _ in rules:  # the last matching rule wins: a row filter after the set's default
            if set_id == r["set"] and (not filt or re.search(filt, r["row"])):
                match = split
        if match is None:
            raise CollectError("%s: no split for set %s (row %r)" % (SPLITS_FILE, r["set"], r["row"]))
        r["split"] = match


# ---------------------------------------------------------------- coverage and checks

def coverage(rows):
    read = {r["source"] for r in rows}
    files = []
    for base in ("results/validation", "results/frameworks"):
        for full in glob.glob(os.path.join(ROOT, base, "**", "*.md"), recursive=True):
            p = os.path.relpath(full, ROOT)
            if os.path.basename(p) == "README.md":
                continue
            files.append(p)
    carried = {os.path.dirname(p) for p in read if os.path.basename(p) == "accuracy_rows.csv"}
    for p in sorted(files):
        if p in read or p in NOT_VALIDATION or os.path.dirname(p) in carried:
            continue  # a folder with accuracy_rows.csv: its tables are that CSV's rendering
        if not any(t.rows for t in md_tables(p)):
            continue
        raise CollectError("%s: a table no set reads and not listed in NOT_VALIDATION (collect.py)" % p)


def check(rows):
    counts = {}
    for r in rows:
        counts[r["set"]] = counts.get(r["set"], 0) + 1
        for k, allowed in (("quantity", QUANTITIES), ("workload", WORKLOADS), ("strategy", STRATEGIES),
                           ("machine_class", MACHINE_CLASSES)):
            if r[k] not in allowed:
                raise CollectError("%s: row %r: %s %r not one of %s" % (r["source"], r["row"], k, r[k], sorted(allowed)))
        if (r["quantity"] == "bytes") != (r["workload"] == "memory"):
            raise CollectError("%s: row %r: memory rows are workload memory, and only they" % (r["source"], r["row"]))
        if not (r["measured"] > 0):
            raise CollectError("%s: row %r: measured %r" % (r["source"], r["row"], r["measured"]))
    expected = {s: n for s, _, n, _ in SETS if n is not None}
    expected.update(EXPECTED_EXTRA)
    for s, n in sorted(expected.items()):
        if counts.get(s, 0) != n:
            raise CollectError("set %s: %d rows, expected %d (the whole set)" % (s, counts.get(s, 0), n))
    keys = {}
    for r in rows:
        k = (r["set"], r["row"])
        if k in keys:
            raise CollectError("set %s: row label %r twice (%s)" % (r["set"], r["row"], r["source"]))
        keys[k] = 1


def number_repeats(rows):
    """A configuration measured twice in one set (another call, the same labels) keeps both rows: the second
    occurrence in file order is labelled '(#2)', and so on."""
    seen = {}
    for r in rows:
        k = (r["set"], r["row"])
        seen[k] = seen.get(k, 0) + 1
        if seen[k] > 1:
            r["row"] = "%s (#%d)" % (r["row"], seen[k])


def collect():
    rows = []
    for _, fn, _, _ in SETS:
        if fn is not None:
            rows.extend(fn())
    rows.extend(discovered_sets())
    number_repeats(rows)
    coverage(rows)
    assign_splits(rows)
    check(rows)
    rows.sort(key=lambda r: (r["set"], r["source"], r["row"]))
    return rows


def write_rows(rows, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(COLUMNS)
        for r in rows:
            out = dict(r)
            form = "%.0f" if r["quantity"] == "bytes" else "%.6g"
            out["measured"] = form % r["measured"]
            out["predicted"] = form % r["predicted"]
            out["error"] = "%.5f" % r["error"]
            w.writerow([out[c] for c in COLUMNS])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "results/accuracy/rows.csv"))
    args = ap.parse_args()
    try:
        rows = collect()
    except CollectError as e:
        print("collect.py: %s" % e, file=sys.stderr)
        return 1
    write_rows(rows, args.out)
    sets = sorted({r["set"] for r in rows})
    print("%d rows from %d sets -> %s" % (len(rows), len(sets), os.path.relpath(args.out, ROOT)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
