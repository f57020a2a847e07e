"""Captures what real decode steps of a Hugging Face model do into tiersim's trace format.

    python3 capture_trace.py --model traces/models/qwen3-8b.json --steps 3 --out qwen3-8b.trace --summary s.json

Every module's forward is wrapped in a profiler range (forward hooks). Under torch.profiler (CPU +
CUDA), each CPU op carries the GPU kernels launched for it (Kineto correlation). Each op of the trace is
one kernel-launching CPU op, in launch order, attributed to the innermost module running it:
  gpu_us   = the summed duration of its kernels (measured),
  host_us  = host time from the previous launching op's end to this one's (measured), so a step's host
             times add up to its host time up to the last launch (the final wait is the engine's sync),
  launches = its kernel count,
  reads    = the module's weight, on the module's first op (by the generator's tensor id: the same
             module names), or the KV cache on the attention kernel inside self_attn.
The header (tensors, sizes) is the generator's for the same model, so policies place the captured trace
exactly as they place a generated one. Profiling adds host overhead; the summary records the
unprofiled step time next to the profiled one.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

try:
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import decode_latency as dl  # noqa: E402
except ImportError:  # --relabel-only needs neither
    torch = None

PREFIX = "ts|"


def is_step(name):
    """A step range: ts|step<N>."""
    rest = name[len(PREFIX):] if name.startswith(PREFIX) else ""
    return rest.startswith("step") and rest[4:].isdigit()


def generated_header(sim, model_json, prompt, decode):
    """Header lines (up to the first step) of the trace tiersim generates for this model."""
    out = subprocess.run([sim, "gen", "--model", model_json, "--prompt", str(prompt), "--decode", str(decode),
                          "-o", "/dev/stdout"], capture_output=True, text=True, check=True).stdout
    header = []
    for line in out.splitlines():
        if line.startswith("step "):
            break
        header.append(line)
    return header


def relabel_pre_layer_ops(lines, n_layers):
    """Ops outside any decoder layer that run before a step's first layer (rotary tables, masks) belong
    to the pre-layer group -1, not to the head (n_layers): prefetch counts layers from the op's group."""
    out, seen_layer = [], False
    for line in lines:
        if line.startswith("step "):
            seen_layer = False
        elif line.startswith("op "):
            m = re.search(r" layer=(-?\d+)", line)
            layer = int(m.group(1))
            if 0 <= layer < n_layers:
                seen_layer = True
            elif layer == n_layers and not seen_layer:
                line = line.replace(f" layer={n_layers}", " layer=-1", 1)
        out.append(line)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--sim", default="build/bin/sim")
    ap.add_argument("--header", help="header lines from `sim gen` (when sim cannot run here)")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--out", required=True, help="the fresh-regime trace")
    ap.add_argument("--out-warm", help="also capture the warm regime (lengths run before) into this trace")
    ap.add_argument("--summary", required=True)
    ap.add_argument("--relabel-only", action="store_true",
                    help="apply relabel_pre_layer_ops to an existing --out trace (no GPU needed) and stop")
    a = ap.parse_args()
    if a.relabel_only:
        with open(a.model) as f:
            n_layers = json.load(f)["num_hidden_layers"]
        with open(a.out) as f:
            lines = f.read().splitlines()
        with open(a.out, "w") as f:
            f.write("\n".join(relabel_pre_layer_ops(lines, n_layers)) + "\n")
        return

    name, cfg = dl.load_config(a.model)
    model = dl.build(cfg)
    if a.header:
        header = open(a.header).read().splitlines()
    else:
        header = generated_header(a.sim, a.model, a.prompt, a.steps)
    tensor_id = {}
    tensor_bytes = {}
    for line in header:
        if line.startswith("tensor "):
            _, tid, kind, nbytes, layer, tname = line.split(" ", 5)
            tensor_id[tname] = int(tid)
            tensor_bytes[tname] = int(nbytes)
    header = [h for h in header if not h.startswith("meta source")] + [
        f"meta source captured by experiments/validate/capture_trace.py on {torch.cuda.get_device_name()}, "
        f"torch {torch.__version__}, eager"]

    # A profiler range around every module's forward.
    ranges = {}
    for mname, module in model.named_modules():
        if not mname:
            continue
        def pre(m, args, mname=mname):
            r = torch.autograd.profiler.record_function(PREFIX + mname)
            r.__enter__()
            ranges.setdefault(mname, []).append(r)
        def post(m, args, out, mname=mname):
            ranges[mname].pop().__exit__(None, None, None)
        module.register_forward_pre_hook(pre)
        module.register_forward_hook(post)

    from torch.profiler import ProfilerActivity, profile
    from transformers import DynamicCache
    ids = torch.randint(0, cfg.vocab_size, (1, a.prompt), device="cuda")
    n_layers = cfg.num_hidden_layers
    summary = dict(model=name, gpu=torch.cuda.get_device_name(), torch=torch.__version__, prompt=a.prompt)
    with torch.no_grad():
        # Fresh: every profiled step is at a sequence length this process has not run (as in a first
        # generate). Warm: a second pass over lengths the first pass ran (see decode_latency.py).
        regimes = [("fresh", a.out)] + ([("warm", a.out_warm)] if a.out_warm else [])
        for regime, path in regimes:
            cache = DynamicCache()
            out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
            nxt = out.logits[:, -1].argmax(-1, keepdim=True)
            nxt.item()
            unprofiled = []
            n_before = 3 + (a.steps if regime == "fresh" else 0)
            for _ in range(n_before):  # warm up (fresh: and time the next lengths unprofiled)
                t = time.perf_counter()
                out = model(input_ids=nxt, past_key_values=cache, use_cache=True, logits_to_keep=1)
                nxt = out.logits[:, -1].argmax(-1, keepdim=True)
                nxt.item()
                unprofiled.append(time.perf_counter() - t)
            context_start = a.prompt + n_before
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for s_index in range(a.steps):
                    with torch.autograd.profiler.record_function(f"{PREFIX}step{s_index}"):
                        out = model(input_ids=nxt, past_key_values=cache, use_cache=True, logits_to_keep=1)
                        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
                        nxt.item()
            regime_header = [h + f", {regime} sequence lengths" if h.startswith("meta source") else h for h in header]
            lines, steps = trace_lines(prof, regime_header, tensor_id, tensor_bytes, cfg, context_start)
            with open(path, "w") as f:
                f.write("\n".join(relabel_pre_layer_ops(lines, n_layers)) + "\n")
            summary[regime] = dict(unprofiled_steps_s=unprofiled[3:], steps=steps, trace=os.path.basename(path))
    with open(a.summary, "w") as f:
        json.dump(summary, f, indent=1)
    for regime, _ in regimes:
        st = summary[regime]["steps"]
        print(f"{name} ({regime}): {len(st)} steps captured, {statistics.median(x['ops'] for x in st)} ops and "
              f"{statistics.median(x['kernels'] for x in st)} kernels per step, GPU busy "
              f"{statistics.median(x['gpu_busy_s'] for x in st) * 1e3:.2f} ms, profiled step "
              f"{statistics.median(x['profiled_s'] for x in st) * 1e3:.1f} ms", flush=True)


def trace_lines(prof, header, tensor_id, tensor_bytes, cfg, context_start):
    """The trace (header + one decode step per profiled step range) and per-step summaries."""
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CPU]
    spans = sorted((e for e in events if e.name.startswith(PREFIX)), key=lambda e: (e.time_range.start, -e.time_range.end))
    launchers = [e for e in events if e.kernels and not e.name.startswith(PREFIX)]
    if not launchers:
        sys.exit("capture: no CPU op carries kernels: this torch's profiler does not correlate them")
    n_layers = cfg.num_hidden_layers
    kv_token_bytes = 2 * cfg.num_key_value_heads * cfg.head_dim * 2
    lines = list(header)
    summary_steps = []
    step_spans = sorted((sp for sp in spans if is_step(sp.name)), key=lambda e: e.time_range.start)
    module_spans = [sp for sp in spans if not is_step(sp.name)]
    launchers.sort(key=lambda e: e.time_range.start)
    for s_index, step in enumerate(step_spans):
        inside = [op for op in launchers if step.time_range.start <= op.time_range.start < step.time_range.end]
        local_spans = [sp for sp in module_spans if step.time_range.start <= sp.time_range.start < step.time_range.end]
        context = context_start + s_index + 1
        lines.append("step decode tokens=1")
        prev_end = step.time_range.start
        gpu_total, kernels_total = 0.0, 0
        weight_read = set()
        for op in inside:
            best = None  # innermost module range enclosing the op
            for sp in local_spans:
                if sp.thread == op.thread and sp.time_range.start <= op.time_range.start < sp.time_range.end:
                    if best is None or sp.time_range.start >= best.time_range.start:
                        best = sp
            mname = best.name[len(PREFIX):] if best is not None else ""
            m = re.match(r"model\.layers\.(\d+)\.", mname + ".")
            layer = int(m.group(1)) if m else (-1 if "embed" in mname else n_layers)
            kind, reads = "elementwise", ""
            if mname in tensor_id:
                tid = tensor_id[mname]
                first = mname not in weight_read
                weight_read.add(mname)
                if "embed" in mname:
                    kind, reads = "embedding", f"{tid}:{min(cfg.hidden_size * 2, tensor_bytes[mname])}" if first else ""
                elif mname.endswith("norm") or "layernorm" in mname:
                    kind, reads = "norm", str(tid) if first else ""
                else:
                    kind, reads = "gemv", str(tid) if first else ""
            elif mname.endswith("self_attn") and m and ("scaled_dot_product" in op.name or "attention" in op.name):
                kv = tensor_id.get(f"kv_cache.layer{layer}")
                kind, reads = "attention", (f"{kv}:{min(context * kv_token_bytes, tensor_bytes[f'kv_cache.layer{layer}'])}" if kv is not None else "")
            elif not mname:
                kind = "sample"
            gpu_us = sum(k.duration for k in op.kernels)
            host_us = max(0.0, op.time_range.end - prev_end)
            prev_end = max(prev_end, op.time_range.end)
            line = f"op {kind} layer={layer}"
            if reads:
                line += f" read={reads}"
            if len(op.kernels) != 1:
                line += f" launches={len(op.kernels)}"
            line += f" gpu_us={gpu_us:.3f} host_us={host_us:.3f}"
            lines.append(line)
            gpu_total += gpu_us
            kernels_total += len(op.kernels)
        summary_steps.append(dict(profiled_s=(step.time_range.end - step.time_range.start) * 1e-6,
                                  gpu_busy_s=gpu_total * 1e-6, kernels=kernels_total, ops=len(inside)))
    lines.append("end")
    return lines, summary_steps


if __name__ == "__main__":
    main()
