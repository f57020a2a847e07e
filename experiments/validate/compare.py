#!/usr/bin/python3
"""Measured against predicted, for every configuration and both sequence-length regimes measured on
the validation leases (results/validation/lease5, lease3, lease4-peer, lease8-pageable-ahead, lease10, lease12-h100,
lease13-s30).

    /usr/bin/python3 experiments/validate/compare.py        (from the repository root, after building)

Calibration, per lease (a lease is one machine; calibrating tiersim for a machine means these steps):
  - framework.new_length_attention = the default SDPA backend's first-call cost at a new sequence length
    (cuDNN here), from experiments/validate/sdpa_shapes.py (first call minus second call, median), on the
    lease where it ran (lease 4 has none: lease 3's; lease 8: lease 5's);
  - framework.per_copy and per_prefetch = the host time the harness spends per streamed weight tensor
    (its hooks' `.to("cuda:0")`, parameter swap and free; one layer ahead also the stream switch, event
    and hand-over), measured by experiments/validate/host_timeline.py on a separate lease
    (lease6-peer-hosttime: Qwen3-8B, 24 layers on cuda:1, on demand and one ahead): the host's time
    per offloaded layer minus per resident layer, per tensor. (A bare `.to()` costs 12.9 us from cuda:1 and
    5.1 us from pinned memory: copy_issue.py on lease 5.)
  - framework.peer_copy_sync = GPU time of PyTorch's copies of one Qwen3-8B layer from cuda:1 beyond
    the peer curve, per tensor (peer_copy_rate.py, lease7-peer-copy); framework.
    peer_copy_overlaps_compute = whether such a copy on a side stream overlapped compute by more than
    half (peer_overlap.py, lease11-peer-overlap);
  - framework.per_op = the host time per op kind: its split between kinds from the lease's captured
    Qwen3-8B run (framework_fit.py; lease 10's capture where the lease has none), times the one factor
    with which the event engine reproduces the lease's CALIBRATION row (Qwen3-8B resident, warm
    lengths; the first such row of the lease). That row is never a validation row. per_launch gets the
    factor too (op kinds per_op lacks); the earlier per-launch model is predicted beside it.
Everything else comes from calib/profiles/h200-measured.yaml (CUDA microbenchmarks, another lease), except the
managed allocator's call costs of a lease that measured its own (ALLOC_CALLS: tiersim_calib --only alloc_calls).
Every other row, in both regimes, is predicted from a generated trace (event and analytic engines)
and, on the lease the traces were captured on, from the captured trace of the same regime, after
removing the profiler's own host cost (measured in the capturing process: profiled minus unprofiled
step, per op). A framework calibrated from the captured run alone (no measured row) is reported too.
Writes calib/runtimes/pytorch-hf-h200.yaml and pytorch-hf-h100.yaml (lease 5's and lease 12's calibrations: the
shipped runtimes; hardware stays calib/profiles/h200-measured.yaml and h100-measured.yaml),
results/validation/{comparison.csv, table.md, predicted_vs_measured.png, latency_vs_offload.png}.
"""
import csv
import json
import math
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import framework_fit  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SIM = os.environ.get("TIERSIM_SIM", os.path.join(ROOT, "build", "bin", "sim"))  # TIERSIM_SIM: another build
VAL = os.path.join(ROOT, "results", "validation")
WORK = os.path.join(ROOT, "build", "validation")  # derived profiles and traces (not committed)
BASE_PROFILE = os.path.join(ROOT, "calib", "profiles", "h200-measured.yaml")
MODELS = {"Qwen3-8B": "traces/models/qwen3-8b.json", "Qwen3-14B": "traces/models/qwen3-14b.json",
          "Llama-3.1-8B": "traces/models/llama-3.1-8b.json"}
CALIBRATION = ("Qwen3-8B", "resident", "warm")
COPY_ISSUE = os.path.join(VAL, "lease5", "copy_issue.json")
PEER_COPY_RATE = os.path.join(VAL, "lease7-peer-copy", "peer_copy_rate.json")
PEER_OVERLAP_FILE = os.path.join(VAL, "lease11-peer-overlap", "peer_overlap.json")
# The tensors peer_copy_rate.py copies (bf16 elements of a Qwen3-8B decoder layer).
PEER_LAYER_ELEMENTS = [4096 * 4096, 1024 * 4096, 1024 * 4096, 4096 * 4096, 12288 * 4096, 12288 * 4096, 4096 * 12288,
                       4096, 4096, 128, 128]
STREAMING_TIMELINE = os.path.join(VAL, "lease6-peer-hosttime", "host_timeline_peer_qwen3-8b.json")
# lease -> (its folder, the machine kind, the folder of its SDPA microbenchmark, its measurement files)
LEASES = {"lease5": ("lease5", "nvidia-h200-x2", "lease5", ["measured.jsonl"]),
          "lease3": ("lease3", "nvidia-h200", "lease3", ["measured.jsonl"]),
          "lease4": ("lease4-peer", "nvidia-h200-x2", "lease3", ["measured.jsonl"]),
          "lease8": ("lease8-pageable-ahead", "nvidia-h200", "lease5", ["measured.jsonl"]),
          "lease10": ("lease10", "nvidia-h200-x2", "lease10", ["measured.jsonl", "measured_llama.jsonl"]),
          "lease12": ("lease12-h100", "nvidia-h100-x1", "lease12-h100",
                      ["measured.jsonl", "measured_b.jsonl", "measured_managed.jsonl"]),
          "lease13": ("lease13-s30", "nvidia-h200", "lease13-s30", ["measured.jsonl"]),
          "lease14": ("lease14-s30", "nvidia-h200", "lease14-s30", ["measured.jsonl"]),
          "lease15": ("lease15-s31", "nvidia-h200", "lease15-s31", ["measured.jsonl"]),
          "lease16": ("lease16-s31", "nvidia-h200", "lease16-s31", ["measured.jsonl"]),
          "lease17": ("lease17-s32", "nvidia-h200", "lease17-s32", ["measured.jsonl"])}
# A lease's own managed allocator call costs (tiersim_calib --only alloc_calls on that machine, the `_all` medians),
# where it measured them; the other leases take the hardware profile's (another lease's).
ALLOC_CALLS = {"lease13": "results/calib/h200-s30/calib_alloc_s30.csv",
               "lease14": "results/calib/h200-s30/calib_alloc_s30d.csv",
               "lease15": "results/calib/h200-s31/calib_advised_s31c.csv",
               "lease16": "results/calib/h200-s31/calib_alloc_s31d.csv",
               "lease17": "results/calib/h200-s32/calib_alloc_s32b.csv"}
# A lease's own advised activation cycles (tiersim_calib --only advised_cycle on that machine), where it measured them
# and they are not the hardware profile's own (lease 15's are h200-measured's): the profile with that lease's table.
ADVISED_CYCLES = {"lease17": "results/calib/h200-s32/calib_alloc_s32b.csv"}
# The calibrated hardware profile a lease's framework calibration builds on (calib/profiles/NAME.yaml),
# when not h200-measured; and the leases whose runtime calibration is shipped (calib/runtimes/).
BASES = {"lease12": "h100-measured"}
SHIPPED = {"lease5", "lease12"}
SHIPPED_LEASE = "lease5"
PER_OP_LEASE = "lease10"  # whose captured run gives the per-op structure to leases without one
PEER_COPY_SYNC_S = 0.0  # set in main() from the peer-copy microbenchmark
PEER_OVERLAP = 1.0  # set in main(): the share of a peer copy that overlaps compute
COLORS = {"Qwen3-8B": "tab:blue", "Qwen3-14B": "tab:orange", "Llama-3.1-8B": "tab:green"}
# Traces captured on a lease (traces/captured/): lease -> model -> (file stem, the capture's summary)
CAPTURED = {"lease3": {"Qwen3-8B": ("qwen3-8b-h200", "lease3/qwen3-8b-capture.json"),
                       "Qwen3-14B": ("qwen3-14b-h200", "lease3/qwen3-14b-capture.json")},
            "lease10": {"Qwen3-8B": ("qwen3-8b-h200x2-lease10", "lease10/qwen3-8b-capture.json")},
            "lease12": {"Qwen3-8B": ("qwen3-8b-h100-lease12", "lease12-h100/qwen3-8b-capture.json")}}


def rows(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def base_name(lease):
    return BASES.get(lease, "h200-measured")


GPU_KIND = {"h200-measured": "h200", "h100-measured": "h100"}
HW_OF = {}  # runtime file -> the hardware profile it was calibrated with
SETS_OF = {}  # runtime file -> --set overrides of that profile measured on the lease (its allocator call costs)


def alloc_call_sets(lease):
    """--set arguments giving the lease's own cudaMallocManaged / cudaFree costs, when it measured them."""
    if lease not in ALLOC_CALLS:
        return []
    median = {}
    with open(os.path.join(ROOT, ALLOC_CALLS[lease])) as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) > 5 and parts[1] in ("malloc_managed_all", "free_gpu_written_all"):
                median[parts[1]] = float(parts[5])
    if len(median) != 2:
        sys.exit(f"{ALLOC_CALLS[lease]}: expected malloc_managed_all and free_gpu_written_all rows")
    return ["--set", f"managed_memory.alloc_call={median['malloc_managed_all'] * 1e6:.3f} us",
            "--set", f"managed_memory.free_call={median['free_gpu_written_all'] * 1e6:.3f} us"]


def advised_cycle_profile(lease):
    """h200-measured with the lease's own managed_memory.advised_cycle (the advised cycle's median less the cycle
    without advice, per size, as tiersim_fit --advised-cycle computes it), written under build/validation; the
    profile's name otherwise."""
    if lease not in ADVISED_CYCLES:
        return base_name(lease)
    median = {}
    with open(os.path.join(ROOT, ADVISED_CYCLES[lease])) as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) > 5 and parts[0] == "um_advised_cycle":
                median[parts[1]] = float(parts[5])
    sizes = [k[len("none_"):] for k in median if k.startswith("none_") and k != "none_all"]
    def size_bytes(name):
        units = {"B": 1, "KiB": 1024, "MiB": 1 << 20}
        digits = name.rstrip("KMiB")
        return int(digits) * units[name[len(digits):]]
    sizes.sort(key=size_bytes)
    if not sizes:
        sys.exit(f"{ADVISED_CYCLES[lease]}: no um_advised_cycle none_<size> rows")
    lines = ["  advised_cycle:"]
    for advice in ("prefer_cpu", "prefer_cpu_accessed_by", "prefer_cpu_read_mostly"):
        pts = []
        for sz in sizes:
            if f"{advice}_{sz}" not in median:
                sys.exit(f"{ADVISED_CYCLES[lease]}: no um_advised_cycle {advice}_{sz} row")
            pts.append(f'["{size_bytes(sz)} B", "{max(0.0, median[f"{advice}_{sz}"] - median[f"none_{sz}"]) * 1e6:.4g} us"]')
        lines.append(f"    {advice}: [" + ", ".join(pts) + "]")
    base = open(os.path.join(ROOT, "calib", "profiles", base_name(lease) + ".yaml")).read().split("\n")
    at = base.index("  advised_cycle:")
    end = at + 1
    while end < len(base) and base[end].startswith("    "):
        end += 1
    out = base[:at] + lines + base[end:]
    out = [f"name: {base_name(lease)}-{lease}" if l.startswith("name: ") else l for l in out]
    os.makedirs(WORK, exist_ok=True)
    path = os.path.join(WORK, f"{base_name(lease)}-{lease}.yaml")
    with open(path, "w") as f:
        f.write("\n".join(out))
    return path


def runtime_path(lease):
    """Where a lease's calibrated runtime goes: the shipped runtime for the leases in SHIPPED."""
    kind = GPU_KIND[base_name(lease)]
    if lease in SHIPPED:
        return os.path.join(ROOT, "calib", "runtimes", f"pytorch-hf-{kind}.yaml")
    return os.path.join(WORK, f"pytorch-hf-{kind}-{lease}.yaml")


def write_runtime(path, lease, fw):
    """A runtime profile (calib/runtimes/SCHEMA.md) for the lease's framework calibration. fw: per_launch_us,
    new_length_us, per_copy_us, per_prefetch_us, and optionally per_op_us (kind -> us) with per_op_from (the
    captured trace its shares came from)."""
    per_op = fw.get("per_op_us")
    per_op_source = (f"per_op = host time per op kind, its shares from the captured run {fw['per_op_from']} "
                     f"(experiments/validate/framework_fit.py), all scaled by one factor so the event engine "
                     f"reproduces the calibration row {' '.join(CALIBRATION)}, per_launch likewise for other op "
                     f"kinds" if per_op else
                     f"per_launch set so the event engine reproduces the calibration row {' '.join(CALIBRATION)}")
    source = (f"calibrated by experiments/validate/compare.py on {lease} of results/validation (eager PyTorch 2.11 + "
              f"transformers 5, HF Qwen3, batch 1): {per_op_source}; new_length_attention = the default SDPA backend's first call at a new length minus a "
              f"repeated call (experiments/validate/sdpa_shapes.py); per_copy and per_prefetch = host time per "
              f"streamed tensor on demand and one layer ahead (experiments/validate/host_timeline.py, "
              f"lease6-peer-hosttime); peer_copy_sync = GPU time of PyTorch's cuda:1 -> cuda:0 copies of a "
              f"Qwen3-8B layer beyond the peer curve, per tensor (experiments/validate/peer_copy_rate.py, "
              f"lease7-peer-copy); peer_copy_overlaps_compute from the share of a 1 GiB cuda:1 -> cuda:0 copy "
              f"hidden under compute queued before it (experiments/validate/peer_overlap.py, lease11-peer-overlap: "
              f"{100 * PEER_OVERLAP:.0f}%); per_step 0")
    kind = GPU_KIND[base_name(lease)]
    text = (f"# Eager PyTorch 2.11 + transformers 5 (HF generate, batch 1) on the {kind.upper()} validation host: host costs\n"
            f"# calibrated by experiments/validate/compare.py (which writes this file) from measured runs.\n"
            f"tiersim_runtime: 1\n"
            f"name: pytorch-hf-{kind}\n"
            f"description: \"eager PyTorch 2.11 + HF transformers 5, host costs calibrated on the {kind.upper()} validation host\"\n"
            f"source: \"{source}\"\n"
            f"per_launch: \"{fw['per_launch_us']:.4f} us\"\n"
            f"per_copy: \"{fw['per_copy_us']:.2f} us\"\n"
            f"per_prefetch: \"{fw['per_prefetch_us']:.2f} us\"\n"
            f"per_step: \"0 us\"\n"
            f"new_length_attention: \"{fw['new_length_us']:.1f} us\"\n"
            f"peer_copy_sync: \"{PEER_COPY_SYNC_S * 1e6:.2f} us\"\n"
            f"peer_copy_overlaps_compute: {'true' if PEER_OVERLAP > 0.5 else 'false'}\n")
    if per_op:
        text += "per_op: {" + ", ".join(f'{k}: "{v:.3f} us"' for k, v in sorted(per_op.items())) + "}\n"
    HW_OF[path] = advised_cycle_profile(lease)
    SETS_OF[path] = alloc_call_sets(lease)
    # The blocks other scripts write are kept as they are: training (experiments/validate/train_host_fit.py),
    # cpu_offload (cpu_offload_fit.py), gpu_cast (from experiments/calibrate/cast_rate.py, results/calib/h100-cast, h200-cast) and
    # gpu_block_reduction (experiments/calibrate/group_norm_rate.py, results/calib/h100-groupnorm).
    if os.path.exists(path):
        old = open(path).read()
        ats = [a for a in (old.find(m) for m in ("\ntraining:", "\ngpu_cast:", "\ncpu_offload:", "\ngpu_block_reduction:")) if a >= 0]
        if ats:
            text += old[min(ats) + 1:]
    with open(path, "w") as f:
        f.write(text)


def sim_args(row):
    """The tiersim configuration that matches what the harness did."""
    cfg, layers = row["config"], row["layers"]
    if cfg == "resident":
        return ["--policy", "resident"]
    if cfg.startswith("offload:"):
        _, k, pf, mem = cfg.split(":", 3)
        args = ["--policy", "layers", "--layers", str(layers - int(k)), "--prefetch", pf]
        return args + (["--donor", mem] if mem.startswith("cuda:") else ["--host-memory", mem])
    if cfg.startswith("managed:"):  # managed:ADVICE, or managed:ADVICE:after-load (advised after the weights load)
        policy = {"none": "um", "prefer-cpu": "um-cpu", "accessed-by": "um-accessedby", "read-mostly": "um-readmostly"}
        # decode_latency.py initialises the weights on the GPU, then prefetches them to host memory: a
        # PreferredLocation=CPU block is mapped from the start (managed_first_read.cu).
        return ["--policy", policy[cfg.split(":")[1]], "--allocator", "per-tensor", "--um-filled", "gpu"]
    raise ValueError(cfg)


def predict(row, regime, engine, runtime, trace=None):
    source = (["--trace", trace] if trace else
              ["--model", MODELS[row["model"]], "--prompt", str(row["prompt"]), "--decode", str(row["warmup"] + row["tokens"])])
    args = ([SIM] + source + ["--hw", HW_OF[runtime]] + SETS_OF.get(runtime, []) +
            ["--runtime", runtime, "--engine", engine, "--lengths", regime, "--json"] + sim_args(row))
    p = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    if p.returncode != 0:
        sys.exit(f"sim failed for {row['model']} {row['config']}: {p.stderr}")
    return json.loads(p.stdout)


def measured(row, regime):
    return row["decode_median_s"] if regime == "fresh" else row["warm_decode_median_s"]


def spread(row, regime):
    """(slowest - fastest token) / median, over the timed tokens of one regime."""
    times = row["decode_s"] if regime == "fresh" else row["warm_decode_s"]
    return (max(times) - min(times)) / measured(row, regime)


def new_length_cost(folder):
    d = json.load(open(os.path.join(VAL, folder, "sdpa_shapes.json")))["backends"]["default"]  # what HF runs
    return statistics.median(d["first_call_s"]) - statistics.median(d["second_call_s"])


def streaming_copy_cost(placement="offload:24:0:cuda:1", first_offloaded=12, last=35, tensors_per_layer=11):
    """Host seconds per streamed tensor: the slope of the host's arrival at each decoder layer over the
    offloaded layers minus the slope over the resident ones (layer 0 holds the step's preamble)."""
    per = []
    for step in json.load(open(STREAMING_TIMELINE))["placements"][placement]["steps"]:
        at = {int(m.split(".")[2]): t * 1e-6 for t, m, k in step
              if k == "pre" and m.startswith("model.layers.") and m.count(".") == 2}
        resident = (at[first_offloaded] - at[1]) / (first_offloaded - 1)
        offloaded = (at[last] - at[first_offloaded]) / (last - first_offloaded)
        per.append((offloaded - resident) / tensors_per_layer)
    return statistics.median(per)


def peer_curve_points():
    """The base profile's measured peer-link points: (bytes, effective bytes/s), ascending."""
    text = open(BASE_PROFILE).read()
    line = re.search(r"peer_link:.*?transfer: \{[^\n]*\n\s*points: \[(.*?)\]\}", text, re.S).group(1)
    units = {"B": 1, "GB/s": 1e9}
    return [(float(a) * units[u], float(b) * units[v]) for a, u, b, v in
            re.findall(r'\["([0-9.e+]+) (B)", "([0-9.e+]+) (GB/s)"\]', line)]


def curve_seconds(pts, nbytes):
    """A copy's time on a measured curve, as tiersim evaluates it (TransferCurve::latency_and_rate:
    effective bandwidth interpolated in log(size) between the points, held beyond them)."""
    if nbytes <= pts[0][0]:
        return nbytes / pts[0][1]
    if nbytes >= pts[-1][0]:
        return nbytes / pts[-1][1]
    for (s0, r0), (s1, r1) in zip(pts, pts[1:]):
        if s0 <= nbytes <= s1:
            t = (math.log(nbytes) - math.log(s0)) / (math.log(s1) - math.log(s0))
            return nbytes / math.exp(math.log(r0) + t * (math.log(r1) - math.log(r0)))


def overlap_share(alone, both):
    """The share of a copy hidden under ~20 ms of compute queued before it on cuda:0's default stream
    (peer_overlap.py): (compute + copy - both) / copy."""
    c = json.load(open(PEER_OVERLAP_FILE))["cases"]
    return (c["compute alone"] + c[alone] - c[both]) / c[alone]


def peer_overlap_share():
    """For a PyTorch copy from cuda:1 issued on a cuda:0 side stream."""
    return overlap_share("peer copy alone (.to on a cuda:0 side stream)",
                         "compute, then peer .to() on a cuda:0 side stream")


def pinned_overlap_share():
    return overlap_share("pinned copy alone", "compute, then pinned host .to() on a cuda:0 side stream (control)")


def peer_copy_sync_cost():
    """GPU seconds per cross-device copy beyond the peer curve: PyTorch's copies of one Qwen3-8B layer's
    11 tensors cuda:1 -> cuda:0 (CUDA events, lease7) minus the curve's time for the same sizes."""
    case = json.load(open(PEER_COPY_RATE))["cases"]["qwen3-8b layer (11 tensors)"]
    sizes = [2 * n for n in PEER_LAYER_ELEMENTS]
    assert sum(sizes) == case["bytes"]
    pts = peer_curve_points()
    return (case["median_s"] - sum(curve_seconds(pts, b) for b in sizes)) / len(sizes)


def copy_issue_cost(source):
    return json.load(open(COPY_ISSUE))["sources"][source]["median_s"]


def solve(row, target_s, make, hi):
    """The x in [0, hi] with which the event engine predicts `target_s` for the calibration row's regime;
    make(x) writes the profile it returns the path of. The profile is left written with that x."""
    lo = 0.0
    for _ in range(40):
        mid = (lo + hi) / 2
        if predict(row, CALIBRATION[2], "event", make(mid))["step_seconds"] < target_s:
            lo = mid
        else:
            hi = mid
    make((lo + hi) / 2)
    return (lo + hi) / 2


def calibrate(row, fw, path, lease, target_s=None):
    """per_launch (us) with which the event engine reproduces the calibration row (or target_s)."""
    target = measured(row, CALIBRATION[2]) if target_s is None else target_s

    def make(x):
        write_runtime(path, lease, dict(fw, per_launch_us=x, per_op_us=None))
        return path
    return solve(row, target, make, 200.0)


def calibrate_per_op(row, fw, shares, source, path, lease):
    """One factor on the captured per-op shares (and on per_launch, for the other op kinds) with which the
    event engine reproduces the calibration row."""
    def make(x):
        write_runtime(path, lease, dict(fw, per_launch_us=fw["per_launch_us"] * x,
                                        per_op_us={k: v * x for k, v in shares.items()}, per_op_from=source))
        return path
    return solve(row, measured(row, CALIBRATION[2]), make, 5.0)


def tiny_fit(cal, regime):
    """The small-model alternative: step = kernels x per_kernel + per_step from tiny-4 and tiny-24."""
    by = {r["model"]: r for r in cal}
    a, b = by["tiny-4"], by["tiny-24"]
    per_kernel = (measured(b, regime) - measured(a, regime)) / (b["kernels_per_step"] - a["kernels_per_step"])
    return per_kernel, measured(a, regime) - a["kernels_per_step"] * per_kernel


_deprofiled = {}


def deprofiled_trace(lease, model, regime):
    if (lease, model, regime) not in _deprofiled:
        _deprofiled[(lease, model, regime)] = make_deprofiled_trace(lease, model, regime)
    return _deprofiled[(lease, model, regime)]


def profiler_cost_per_op(summary_path):
    """The profiler's own host cost per op, measured in the capturing process: (profiled - unprofiled)
    fresh step time / ops per step (the warm pass has no unprofiled steps)."""
    fresh = json.load(open(os.path.join(VAL, summary_path)))["fresh"]
    profiled = statistics.median(s["profiled_s"] for s in fresh["steps"])
    unprofiled = statistics.median(fresh["unprofiled_steps_s"])
    ops = statistics.median(s["ops"] for s in fresh["steps"])
    return max(0.0, (profiled - unprofiled) / ops)


def make_deprofiled_trace(lease, model, regime):
    """The captured trace with the profiler's own host cost per op removed."""
    stem, summary_path = CAPTURED[lease][model]
    overhead_us = profiler_cost_per_op(summary_path) * 1e6
    suffix = "" if regime == "fresh" else "-warm"
    src = os.path.join(ROOT, "traces", "captured", f"{stem}{suffix}.trace")
    dst = os.path.join(WORK, f"{stem}{suffix}-deprofiled.trace")

    def fix(m):
        return f"host_us={max(0.0, float(m.group(1)) - overhead_us):.3f}"
    with open(src) as f, open(dst, "w") as g:
        for line in f:
            g.write(re.sub(r"host_us=([0-9.]+)", fix, line) if line.startswith("op ") else line)
    return dst, overhead_us


def capture_calibration_note(lease, cal_row, data, fw):
    """The framework calibrated from the captured run instead of a measured row: per_launch set so the
    generated Qwen3-8B trace reproduces the step of the de-profiled warm capture (replayed, resident).
    Every row of the lease is then a validation row."""
    trace, overhead_us = deprofiled_trace(lease, "Qwen3-8B", "warm")
    path = os.path.join(WORK, f"pytorch-hf-{lease}-captured.yaml")
    write_runtime(path, lease, dict(fw, per_launch_us=0.0, per_op_us=None))
    replayed = predict(cal_row, "warm", "event", path, trace)["step_seconds"]
    per_launch = calibrate(cal_row, fw, path, lease, target_s=replayed)
    errs = [(predict(r, g, "event", path)["step_seconds"] - measured(r, g)) / measured(r, g)
            for r in data for g in ("fresh", "warm")]
    return (f"; calibrated from the captured run instead (profiler cost {overhead_us:.1f} us per op removed, the "
            f"warm capture replays to {replayed * 1e3:.1f} ms against {measured(cal_row, 'warm') * 1e3:.1f} ms "
            f"measured unprofiled): per_launch {per_launch:.2f} us, all {len(errs)} rows of the lease "
            f"{100 * statistics.mean(abs(e) for e in errs):.1f}%, worst {max((100 * e for e in errs), key=abs):+.1f}%: "
            f"not used (no measured row)")


def per_op_structure(lease):
    """framework_fit's per-op shares (us per generated op, unscaled) from a lease's warm Qwen3-8B capture."""
    stem, summary_path = CAPTURED[lease]["Qwen3-8B"]
    trace = os.path.join(ROOT, "traces", "captured", f"{stem}-warm.trace")
    captured = framework_fit.captured_host_by_kind(trace, profiler_cost_per_op(summary_path) * 1e6)
    shares, _ = framework_fit.per_op_shares(captured, framework_fit.generated_ops_by_kind(MODELS["Qwen3-8B"]))
    return shares, os.path.relpath(trace, ROOT)


def strategy(config):
    if config == "resident":
        return "resident"
    if config.startswith("managed:"):
        return "managed"
    mem = config.split(":", 3)[3]
    return "peer" if mem.startswith("cuda:") else mem


def lease_rows(lease):
    folder, _kind, _sdpa, files = LEASES[lease]
    return [r for name in files for r in rows(os.path.join(VAL, folder, name))]


def calibrate_lease(lease, data, per_copy_s, per_prefetch_s):
    """The lease's framework calibration (the steps of this file's docstring) from its rows `data`
    (lease_rows(lease)), written to runtime_path(lease): (calibration row, one of `data`, runtime path, per-launch
    runtime path, new-length cost s, fw, per-op source lease, shares, scale)."""
    sdpa_folder = LEASES[lease][2]
    cal_row = next(r for r in data if (r["model"], r["config"]) == CALIBRATION[:2])  # the first such row
    path = runtime_path(lease)
    uniform_path = os.path.join(WORK, f"pytorch-hf-{lease}-per-launch.yaml")
    new_length_s = new_length_cost(sdpa_folder)
    fw = dict(new_length_us=new_length_s * 1e6, per_copy_us=per_copy_s * 1e6, per_prefetch_us=per_prefetch_s * 1e6)
    fw["per_launch_us"] = calibrate(cal_row, fw, uniform_path, lease)
    # The framework's structure per op kind from a captured run: this lease's, else lease 10's (the
    # same software; only the host's speed differs between machines, and the scale takes that).
    source = lease if "Qwen3-8B" in CAPTURED.get(lease, {}) else PER_OP_LEASE
    shares, source_trace = per_op_structure(source)
    scale = calibrate_per_op(cal_row, fw, shares, source_trace, path, lease)
    return cal_row, path, uniform_path, new_length_s, fw, source, shares, scale


def setup():
    """The lease-independent framework measurements: (per_copy s, per_prefetch s); sets the peer-copy globals."""
    os.makedirs(WORK, exist_ok=True)
    global PEER_COPY_SYNC_S, PEER_OVERLAP
    PEER_COPY_SYNC_S = peer_copy_sync_cost()
    PEER_OVERLAP = peer_overlap_share()
    return streaming_copy_cost(), streaming_copy_cost("offload:24:1:cuda:1")


def lease_runtime(lease):
    """For another script (experiments/um/oversubscribe_compare.py): the lease's calibrated runtime file and the
    hardware arguments its rows are predicted with (--hw NAME and the lease's own measured --set overrides)."""
    per_copy_s, per_prefetch_s = setup()
    path = calibrate_lease(lease, lease_rows(lease), per_copy_s, per_prefetch_s)[1]
    return path, ["--hw", HW_OF[path]] + SETS_OF[path]


def main():
    per_copy_s, per_prefetch_s = setup()
    results, notes, profiles = [], [], {}
    notes.append(f"per_copy = {per_copy_s * 1e6:.1f} us and per_prefetch = {per_prefetch_s * 1e6:.1f} us per streamed "
                 f"tensor, on demand and one layer ahead (host timeline, lease6); a bare .to() costs "
                 f"{copy_issue_cost('cuda:1') * 1e6:.1f} us from cuda:1, {copy_issue_cost('pinned') * 1e6:.1f} us "
                 f"from pinned memory (lease5). peer_copy_sync = {PEER_COPY_SYNC_S * 1e6:.1f} us per copy from cuda:1 "
                 f"(PyTorch's copies of a Qwen3-8B layer, lease7, beyond the peer curve). A copy from cuda:1 "
                 f"issued on a side stream overlapped compute by {100 * PEER_OVERLAP:.0f}% (lease11; from pinned "
                 f"memory {100 * pinned_overlap_share():.0f}%): peer_copy_overlaps_compute "
                 f"{'true' if PEER_OVERLAP > 0.5 else 'false'}.")
    for lease, (folder, kind, _sdpa, _files) in LEASES.items():
        data = lease_rows(lease)
        cal_row, path, uniform_path, new_length_s, fw, source, shares, scale = calibrate_lease(
            lease, data, per_copy_s, per_prefetch_s)
        profiles[lease] = path
        note = (f"{lease} ({kind}): new_length_attention {new_length_s * 1e3:.1f} ms; host cost per op kind = the "
                f"shares of {source}'s captured run x {scale:.3f} ("
                + ", ".join(f"{k} {v * scale:.1f} us" for k, v in sorted(shares.items()))
                + f"), which reproduces the calibration row {' '.join(CALIBRATION)}, measured "
                f"{measured(cal_row, 'warm') * 1e3:.1f} ms; one cost per generated launch instead: "
                f"{fw['per_launch_us']:.2f} us")
        tiny_path = os.path.join(VAL, folder, "calibration.jsonl")
        if os.path.exists(tiny_path):
            pk, ps = tiny_fit(rows(tiny_path), "warm")
            note += (f"; small-model alternative (tiny-4, tiny-24, warm): {pk * 1e6:.1f} us per measured kernel + "
                     f"{ps * 1e3:.1f} ms, which predicts Qwen3-8B resident warm "
                     f"{(cal_row['kernels_per_step'] * pk + ps) * 1e3:.1f} ms: not used")
        captured = CAPTURED.get(lease, {})
        if "Qwen3-8B" in captured:
            note += capture_calibration_note(lease, cal_row, data, fw)
        if SETS_OF[path]:
            note += (f"; the managed allocator's calls measured on this lease ({ALLOC_CALLS[lease]}): "
                     + ", ".join(a.split(".", 1)[1] for a in SETS_OF[path] if a != "--set"))
        notes.append(note + ".")
        for r in data:
            for regime in ("fresh", "warm"):
                m = measured(r, regime)
                ev = predict(r, regime, "event", path)
                an = predict(r, regime, "analytic", path)
                per_launch = predict(r, regime, "event", uniform_path)["step_seconds"]
                cap = None
                if r["model"] in captured:
                    trace, _ = deprofiled_trace(lease, r["model"], regime)
                    cap = predict(r, regime, "event", path, trace)["step_seconds"]
                results.append(dict(
                    lease=lease, model=r["model"], config=r["config"], regime=regime, strategy=strategy(r["config"]),
                    calibration=r is cal_row and regime == CALIBRATION[2], measured_s=m,
                    measured_spread=spread(r, regime),
                    event_s=ev["step_seconds"], event_err=(ev["step_seconds"] - m) / m,
                    analytic_s=an["step_seconds"], analytic_err=(an["step_seconds"] - m) / m,
                    captured_s=cap, captured_err=(cap - m) / m if cap else None,
                    per_launch_s=per_launch, per_launch_err=(per_launch - m) / m,
                    offloaded_gb=ev["offloaded_bytes"] / 1e9,
                    moved_gb=(ev["h2d_bytes_per_step"] + ev["peer_bytes_per_step"] +
                              ev.get("remote_read_bytes_per_step", 0)) / 1e9))
    # The other H200 leases' rows predicted with the shipped (lease 5) calibration: what moving to another
    # machine of the same kind costs when it is not calibrated itself.
    cross, cross_rows = [], []
    for lease in LEASES:
        if lease == SHIPPED_LEASE or base_name(lease) != base_name(SHIPPED_LEASE):
            continue
        for r in lease_rows(lease):
            for regime in ("fresh", "warm"):
                m = measured(r, regime)
                p = predict(r, regime, "event", profiles[SHIPPED_LEASE])["step_seconds"]
                cross.append((p - m) / m)
                cross_rows.append(dict(lease=lease, model=r["model"], config=r["config"], regime=regime,
                                       strategy=strategy(r["config"]), measured_s=f"{m:.6g}", predicted_s=f"{p:.6g}",
                                       error=f"{(p - m) / m:.5f}"))
    # What a user on another machine of a calibrated GPU kind gets from the shipped runtime (accuracy.py reports it).
    with open(os.path.join(VAL, "other_host.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(cross_rows[0].keys()), lineterminator="\n")
        w.writeheader()
        w.writerows(cross_rows)

    with open(os.path.join(VAL, "comparison.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(results[0].keys()))
        w.writeheader()
        w.writerows(results)
    report(results, notes, cross)
    plot(results)


def mape(xs, key):
    xs = [abs(x[key]) for x in xs if x[key] is not None]
    return 100 * statistics.mean(xs) if xs else float("nan")


def summary_lines(val, label):
    worst = max(val, key=lambda x: abs(x["event_err"]))
    over = [x for x in val if abs(x["event_err"]) > 0.2]
    lines = [f"{label}: {len(val)} validation rows ({len({x['model'] for x in val})} models, "
             f"{len({x['config'] for x in val})} configurations, fresh and warm "
                 f"sequence lengths). Mean absolute error of the decode step (= of tokens/s): event engine "
                 f"{mape(val, 'event_err'):.1f}%, analytic {mape(val, 'analytic_err'):.1f}%. Worst row (event): "
                 f"{worst['lease']} {worst['model']} {worst['config']} {worst['regime']} {100 * worst['event_err']:+.1f}%. "
                 f"Rows worse than 20%: {len(over)}."]
    lines.append(f"- with one host cost per generated launch instead of per op kind (the earlier framework model): "
                 f"event {mape(val, 'per_launch_err'):.1f}%")
    for regime in ("fresh", "warm"):
        sub = [x for x in val if x["regime"] == regime]
        lines.append(f"- {regime} lengths: {len(sub)} rows, event {mape(sub, 'event_err'):.1f}%, analytic "
                     f"{mape(sub, 'analytic_err'):.1f}%")
    for model in MODELS:
        sub = [x for x in val if x["model"] == model]
        if sub and len({x["model"] for x in val}) > 1:
            lines.append(f"- {model}: {len(sub)} rows, event {mape(sub, 'event_err'):.1f}%, analytic "
                         f"{mape(sub, 'analytic_err'):.1f}%, worst {max((100 * x['event_err'] for x in sub), key=abs):+.1f}%"
                         f"; one cost per launch instead of per op kind: {mape(sub, 'per_launch_err'):.1f}%")
    for s in ("resident", "pinned", "pageable", "peer", "managed"):
        sub = [x for x in val if x["strategy"] == s]
        if sub:
            lines.append(f"- {s}: {len(sub)} rows, event {mape(sub, 'event_err'):.1f}%, analytic {mape(sub, 'analytic_err'):.1f}%, "
                         f"worst {max((100 * x['event_err'] for x in sub), key=abs):+.1f}%")
    cap = [x for x in val if x["captured_err"] is not None]
    if cap:
        lines.append(f"- from the captured traces (same lease, profiler cost removed): {len(cap)} rows, "
                     f"{mape(cap, 'captured_err'):.1f}%, worst {max((100 * x['captured_err'] for x in cap), key=abs):+.1f}%")
    return lines


def report(results, notes, cross):
    val = [x for x in results if not x["calibration"]]
    lines = list(notes)
    lines.append("")
    for lease in LEASES:
        lines += summary_lines([x for x in val if x["lease"] == lease], lease)
    lines += summary_lines(val, "All leases")
    lines.append(f"- the other leases' rows predicted with {SHIPPED_LEASE}'s calibration (other machines of the same "
                 f"kind, not calibrated themselves): {100 * statistics.mean(abs(e) for e in cross):.1f}%, worst "
                 f"{max((100 * e for e in cross), key=abs):+.1f}%")
    lines.append("")
    lines.append("| lease | model | configuration | lengths | measured step | spread | event (generated) | error | analytic | error | "
                 "event (captured) | error | offloaded | moved per step |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for x in results:
        tag = " (calibration)" if x["calibration"] else ""
        capt = (f"{x['captured_s'] * 1e3:.1f} ms | {100 * x['captured_err']:+.1f}%" if x["captured_err"] is not None
                else "- | -")
        lines.append(f"| {x['lease']} | {x['model']} | {x['config']}{tag} | {x['regime']} | {x['measured_s'] * 1e3:.1f} ms | "
                     f"{100 * x['measured_spread']:.0f}% | {x['event_s'] * 1e3:.1f} ms | {100 * x['event_err']:+.1f}% | "
                     f"{x['analytic_s'] * 1e3:.1f} ms | {100 * x['analytic_err']:+.1f}% | {capt} | "
                     f"{x['offloaded_gb']:.1f} GB | {x['moved_gb']:.2f} GB |")
    with open(os.path.join(VAL, "table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def plot(results):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not found: run with Debian's /usr/bin/python3 (python3-matplotlib) for the plots")
        return
    fig, ax = plt.subplots(figsize=(6.5, 6.5))
    for x in results:
        color = "tab:gray" if x["calibration"] else COLORS[x["model"]]
        ax.scatter(x["measured_s"] * 1e3, x["event_s"] * 1e3, c=color, s=18,
                   marker="o" if x["regime"] == "fresh" else "^")
    lim = [20, 4000]
    ax.plot(lim, lim, "k--", lw=0.8)
    ax.plot(lim, [v * 1.2 for v in lim], "k:", lw=0.6)
    ax.plot(lim, [v / 1.2 for v in lim], "k:", lw=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lim)
    ax.set_ylim(lim)
    ax.set_xlabel("measured decode step (ms)")
    ax.set_ylabel("predicted decode step, event engine (ms)")
    ax.set_title("tiersim vs real runs, H200 (blue Qwen3-8B, orange Qwen3-14B, green Llama-3.1-8B;\n"
                 "o fresh lengths, ^ warm; gray calibration; dotted ±20%)",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(VAL, "predicted_vs_measured.png"), dpi=120)

    fig, axes = plt.subplots(2, 2, figsize=(11, 8.5))
    for row_axes, regime in zip(axes, ("warm", "fresh")):
        for ax, model in zip(row_axes, ["Qwen3-8B", "Qwen3-14B"]):
            for variant, style in [(":0:pinned", "o-"), (":1:pinned", "s-"), (":0:pageable", "^-"), (":0:cuda:1", "d-")]:
                pts = sorted((x["offloaded_gb"], x["measured_s"], x["event_s"]) for x in results
                             if x["model"] == model and x["regime"] == regime and x["lease"] == SHIPPED_LEASE and
                             (x["config"] == "resident" or x["config"].endswith(variant)))
                if len(pts) < 2:
                    continue
                gb = [p[0] for p in pts]
                line, = ax.plot(gb, [p[1] * 1e3 for p in pts], style, label=f"measured {variant[1:]}")
                ax.plot(gb, [p[2] * 1e3 for p in pts], style.replace("-", "--"), color=line.get_color(), alpha=0.6,
                        label=f"predicted {variant[1:]}")
            ax.set_yscale("log")
            ax.set_xlabel("GB of weights off the compute GPU (last K layers + head)")
            ax.set_ylabel("decode step (ms)")
            ax.set_title(f"{model}, {regime} sequence lengths ({SHIPPED_LEASE})")
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(VAL, "latency_vs_offload.png"), dpi=120)


if __name__ == "__main__":
    main()
