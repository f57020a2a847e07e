"""Where a training step's phases spend their time: host issue or GPU work (a diagnosis for sim train's step
time, not a validation row). For a few rows of train_memory.py's grid it runs the same step (2 warm-up steps, then
one under torch.profiler with CPU and CUDA activities) and records per phase (forward with the loss, backward,
optimizer, zero_grad; a synchronize at each boundary as in train_memory.py): the wall time, the host time until
the phase's last kernel launch, the GPU kernels' summed time and their union (busy time), and the kernel count.
A phase whose busy time is close to its wall time is GPU-bound; one whose last launch is close to its end is
host-bound.

  python3 experiments/validate/train_profile.py --out $OUT/train_profile.jsonl
"""
import argparse
import json
import os
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_memory import SETUPS, build_hf, load_description, make_optimizer  # noqa: E402

ROWS = [("traces/models/qwen3-4b.json", "bf16-sgd", False, 1, 1024),
        ("traces/models/qwen3-4b.json", "bf16-adamw", True, 1, 1024),
        ("traces/models/qwen3-0.6b.json", "bf16-sgd", False, 1, 1024),
        ("experiments/validate/calibration_models/tiny-24.json", "bf16-sgd", False, 1, 128)]
PHASES = ["forward", "backward", "optimizer", "zero_grad"]


def union(intervals):
    total, end = 0.0, -1e30
    for s, e in sorted(intervals):
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total


def run(path, setup, ckpt, batch, seq, seed=0):
    name, desc = load_description(path)
    wdtype, autocast, opt_kind = SETUPS[setup]
    model, _ = build_hf(desc, getattr(torch, wdtype), "cuda", seed)
    model.train()
    if ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    opt = make_optimizer(opt_kind, model.parameters())
    ids = torch.randint(0, desc["vocab_size"], (batch, seq), device="cuda")
    ac = getattr(torch, autocast) if autocast else None
    marks = {}

    def step(record):
        for phase in PHASES:
            torch.cuda.synchronize()
            t0 = time.perf_counter_ns()
            with torch.profiler.record_function("phase:" + phase):
                work(phase)
            torch.cuda.synchronize()
            if record:
                marks[phase] = (t0, time.perf_counter_ns())
        step.loss = None

    def work(phase):
        if phase == "forward":
            with torch.autocast("cuda", dtype=ac, enabled=ac is not None):
                loss = model(input_ids=ids, labels=ids).loss
            step.loss = loss
        elif phase == "backward":
            step.loss.backward()
        elif phase == "optimizer":
            opt.step()
        else:
            opt.zero_grad(set_to_none=True)

    for _ in range(2):
        step(False)
    step(True)
    plain = {p: (e - s) / 1e6 for p, (s, e) in marks.items()}  # wall ms without the profiler
    # Three steps as a training loop runs them, with no synchronize between phases (one at the end).
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(3):
        for phase in PHASES:
            work(phase)
        step.loss = None
    torch.cuda.synchronize()
    nosync_ms = (time.perf_counter() - t0) * 1e3 / 3
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step(True)
    # The phases' spans in the profiler's own clock (microseconds): its record_function events; each phase runs
    # to the next phase's start (the synchronize in between belongs to it).
    events = prof.events()
    kernels, launches, spans = [], [], {}
    for e in events:
        if e.device_type == torch.autograd.DeviceType.CUDA:
            kernels.append((e.time_range.start, e.time_range.end))
        elif e.name in ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx"):
            launches.append(e.time_range.start)
        elif e.name.startswith("phase:"):
            spans[e.name[6:]] = e.time_range.start
    row = {"model": name, "setup": setup, "gradient_checkpointing": ckpt, "batch": batch, "seq": seq,
           "torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "step_no_phase_sync_ms": nosync_ms,
           "phases": {}}
    ends = {p: spans[q] for p, q in zip(PHASES, PHASES[1:])}
    ends[PHASES[-1]] = max([b for _, b in kernels] + [spans[PHASES[-1]]]) + 1
    for phase, (s_ns, e_ns) in marks.items():
        s_us, e_us = spans[phase], ends[phase]
        k = [(a, b) for a, b in kernels if s_us <= a < e_us]
        l = [t for t in launches if s_us <= t < e_us]
        row["phases"][phase] = {"wall_ms": (e_ns - s_ns) / 1e6, "wall_unprofiled_ms": plain[phase], "kernels": len(k), "launches": len(l),
                                "kernel_sum_ms": sum(b - a for a, b in k) / 1e3, "kernel_busy_ms": union(k) / 1e3,
                                "last_launch_ms": (max(l) - s_us) / 1e3 if l else None,
                                "first_kernel_ms": (min(a for a, _ in k) - s_us) / 1e3 if k else None}
    del model, opt
    torch.cuda.empty_cache()
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    with open(args.out, "w") as f:
        for r in ROWS:
            try:
                row = run(*r)
            except Exception as e:  # noqa: BLE001 - recorded, next row
                row = {"row": list(r), "error": str(e).splitlines()[0][:300]}
            f.write(json.dumps(row) + "\n")
            f.flush()
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
