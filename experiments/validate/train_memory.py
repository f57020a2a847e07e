#!/usr/bin/env python3
"""Training-step memory and time of Hugging Face decoders on one GPU (issue 14, validation side).

For every row (model x set-up x gradient checkpointing x batch/sequence shape) this builds the model from
a tiersim model description (traces/models/*.json: a published config.json plus "name"/"source", which are
dropped) with random weights on cuda:0, runs training steps on synthetic token batches (labels = inputs, the
model's own loss), and writes one JSON line:

  * what ran: model, params, weights dtype, autocast, optimizer, checkpointing, batch, seq, attention
    implementation, versions, GPU, PYTORCH_CUDA_ALLOC_CONF (left as found);
  * memory of the first measured step (after --warmup steps): memory_allocated() at the step's start and at
    the end of each phase (forward incl. loss, backward, optimizer.step(), zero_grad(set_to_none=True)),
    the peak allocated and peak reserved inside each phase (reset_peak_memory_stats() before each phase),
    the step's peaks (the largest phase peak), and the same peaks over the warm-up steps (the first step
    also allocates the optimizer's states);
  * time: the median over --steps measured steps of the step and of each phase (wall time with
    torch.cuda.synchronize() at every phase boundary);
  * on an out-of-memory error: {"oom": true, "error": ..., "phase": where it happened, ...}; the row's
    objects are freed (del, gc.collect(), empty_cache()) and the next row runs.

The loop holds only the loss between forward and backward (not the output object, so the bf16 logits are
not kept alive by the harness); optimizers are torch.optim's with their defaults (AdamW: foreach chosen by
torch, fused off; states in the weights' dtype).

  python3 experiments/validate/train_memory.py --out results.jsonl            # the 36 rows of issue 14
  python3 experiments/validate/train_memory.py --fake --device cpu --out t.jsonl   # harness test, no GPU
  python3 experiments/validate/train_memory.py --table results.jsonl             # markdown table of a run
"""
import argparse
import gc
import json
import os
import statistics
import sys
import time
import traceback

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
MODELS = ["traces/models/qwen3-0.6b.json", "traces/models/qwen3-1.7b.json", "traces/models/qwen3-4b.json"]
# name: (weights dtype, autocast dtype or None, optimizer)
SETUPS = {
    "fp32-autocast-adamw": ("float32", "bfloat16", "adamw"),
    "bf16-adamw": ("bfloat16", None, "adamw"),
    "bf16-sgd": ("bfloat16", None, "sgd"),
    "bf16-sgd-momentum": ("bfloat16", None, "sgd-momentum"),
    "fp32-adamw": ("float32", None, "adamw"),
}
DEFAULT_SETUPS = ["fp32-autocast-adamw", "bf16-adamw", "bf16-sgd"]
PHASES = ["forward", "backward", "optimizer", "zero_grad"]
GIB = 1024 ** 3

STATE = {"phase": None}  # where a step is, for the OOM record
OOM_ERRORS = tuple(e for e in (getattr(torch, "OutOfMemoryError", None),
                               getattr(torch.cuda, "OutOfMemoryError", None)) if e is not None)


class Mem:
    """torch.cuda's memory counters on a CUDA device; zeros elsewhere (the CPU harness test)."""

    def __init__(self, device):
        self.cuda = device.startswith("cuda")

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def reset_peak(self):
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()

    def alloc(self):
        return torch.cuda.memory_allocated() if self.cuda else 0

    def reserved(self):
        return torch.cuda.memory_reserved() if self.cuda else 0

    def peak_alloc(self):
        return torch.cuda.max_memory_allocated() if self.cuda else 0

    def peak_reserved(self):
        return torch.cuda.max_memory_reserved() if self.cuda else 0

    def stats(self):
        """A few allocator counters of the caching allocator, for the allocator model."""
        if not self.cuda:
            return {}
        s = torch.cuda.memory_stats()
        keys = ["num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free",
                "segment.all.current", "segment.all.peak", "segment.large_pool.peak", "segment.small_pool.peak",
                "reserved_bytes.large_pool.peak", "reserved_bytes.small_pool.peak",
                "allocated_bytes.large_pool.peak", "allocated_bytes.small_pool.peak",
                "inactive_split_bytes.all.peak", "active_bytes.all.peak", "requested_bytes.all.peak"]
        return {k: s.get(k) for k in keys}

    def free(self):
        gc.collect()
        if self.cuda:
            torch.cuda.empty_cache()


def load_description(path):
    """(name, config dict as published): the description less tiersim's own keys."""
    with open(path if os.path.isabs(path) else os.path.join(ROOT, path)) as f:
        d = json.load(f)
    name = d.pop("name", os.path.splitext(os.path.basename(path))[0])
    d.pop("source", None)
    return name, d


def build_hf(desc, dtype, device, seed):
    """Random-weight Hugging Face causal LM from a published config, built on the device in dtype."""
    import transformers
    d = dict(desc)
    cfg = transformers.AutoConfig.for_model(d.pop("model_type"), **d)
    cfg.use_cache = False  # training: no KV cache objects
    torch.manual_seed(seed)
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            try:  # transformers 5: dtype= (its _from_config sets the default dtype around the constructor)
                model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa", dtype=dtype)
            except TypeError:
                model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
    finally:
        torch.set_default_dtype(old)
    cast = False
    if any(p.dtype != dtype for p in model.parameters()):
        model.to(dtype)  # the constructor ignored the default dtype: cast (recorded)
        cast = True
    with torch.no_grad():  # random, not zeros, and no uninitialised memory; norm weights one
        for n, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02)
            else:
                p.fill_(1.0)
    attn = getattr(model.config, "_attn_implementation", None)
    rope = getattr(model.config, "rope_parameters", None) or {"rope_theta": getattr(model.config, "rope_theta", None)}
    info = {"attn_implementation": attn, "cast_after_build": cast, "model_class": type(model).__name__,
            "rope": rope if isinstance(rope, dict) else str(rope)}
    return model, info


class FakeDecoder(torch.nn.Module):
    """A small decoder with the interface the harness uses (the CPU test without transformers)."""

    def __init__(self, vocab=512, hidden=64, layers=2):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, hidden)
        self.layers = torch.nn.ModuleList(torch.nn.TransformerEncoderLayer(hidden, 4, 4 * hidden, 0.0,
                                                                           batch_first=True) for _ in range(layers))
        self.head = torch.nn.Linear(hidden, vocab, bias=False)
        self.head.weight = self.emb.weight
        self.ckpt = False

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None):
        self.ckpt = True
        self.ckpt_kwargs = gradient_checkpointing_kwargs or {}

    def forward(self, input_ids, labels):
        import torch.utils.checkpoint as cp
        h = self.emb(input_ids)
        for layer in self.layers:
            h = cp.checkpoint(layer, h, **self.ckpt_kwargs) if self.ckpt else layer(h)
        logits = self.head(h).float()
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                 labels[:, 1:].reshape(-1))
        return type("Out", (), {"loss": loss, "logits": logits})()


def load_cpu_offload():
    """torchao's CPUOffloadOptimizer from the file stage_torchao.sh staged (.ext/torchao-offload, or
    $TORCHAO_STAGED), run as is. Its one torchao import (torchao.utils) is served for the import only: a
    `torchao` left importable makes transformers ask for torchao's package version, which a staged file has not."""
    import importlib.util
    import types
    staged = os.environ.get("TORCHAO_STAGED", os.path.join(ROOT, ".ext", "torchao-offload"))
    utils = types.ModuleType("torchao.utils")
    with open(os.path.join(staged, "torchao", "utils.py")) as f:
        exec(compile(f.read(), f.name, "exec"), utils.__dict__)  # noqa: S102 - the staged helper
    saved = {k: sys.modules.get(k) for k in ("torchao", "torchao.utils")}
    sys.modules["torchao"], sys.modules["torchao.utils"] = types.ModuleType("torchao"), utils
    try:
        spec = importlib.util.spec_from_file_location(
            "torchao_cpu_offload", os.path.join(staged, "torchao", "optim", "cpu_offload.py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return mod.CPUOffloadOptimizer


def make_optimizer(kind, params, offload=None):
    if offload is not None:  # torchao's CPUOffloadOptimizer (staged by stage_torchao.sh): AdamW, fused, on the CPU
        CPUOffloadOptimizer = load_cpu_offload()
        if kind != "adamw":
            raise ValueError("optimizer offload is validated with AdamW only")
        return CPUOffloadOptimizer(params, optimizer_class=torch.optim.AdamW, offload_gradients=offload == "gradients",
                                   lr=1e-5)
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=1e-5)
    if kind == "sgd":
        return torch.optim.SGD(params, lr=1e-4)
    if kind == "sgd-momentum":
        return torch.optim.SGD(params, lr=1e-4, momentum=0.9)
    raise ValueError(kind)


def foreach_resolved(opt):
    """Whether torch will run the optimizer's foreach (multi-tensor) path: its own default rule."""
    if not hasattr(opt, "defaults"):  # CPUOffloadOptimizer: fused AdamW on the CPU (and on the GPU for small ones)
        return False
    f = opt.defaults.get("foreach")
    if f is not None:
        return bool(f)
    try:
        from torch.optim.optimizer import _default_to_fused_or_foreach
        params = [p for g in opt.param_groups for p in g["params"]]
        return bool(_default_to_fused_or_foreach(params, differentiable=False, use_fused=False)[1])
    except Exception:  # noqa: BLE001 - private API
        return None


def one_step(model, opt, ids, autocast, mem, device, record, sync=True):
    """One training step; per-phase times (ms) and, when record, the memory at phase ends and peaks. Without
    sync no phase waits for the GPU (a training loop's own rhythm; the phase times are then the host's)."""
    times, m = {}, {}
    if sync:
        mem.sync()
    if record:
        m["at_step_start_allocated"] = mem.alloc()
        m["at_step_start_reserved"] = mem.reserved()

    def begin(phase):
        STATE["phase"] = phase
        if record:
            mem.reset_peak()
        return time.perf_counter()

    def end(phase, t0):
        if sync:
            mem.sync()
        times[phase] = (time.perf_counter() - t0) * 1e3
        if record:
            m[phase] = {"allocated_end": mem.alloc(), "reserved_end": mem.reserved(),
                        "peak_allocated": mem.peak_alloc(), "peak_reserved": mem.peak_reserved()}

    t0 = begin("forward")
    if autocast is not None:
        with torch.autocast(device_type=device.split(":")[0], dtype=autocast):
            loss = model(input_ids=ids, labels=ids).loss
    else:
        loss = model(input_ids=ids, labels=ids).loss
    end("forward", t0)
    t0 = begin("backward")
    loss.backward()
    end("backward", t0)
    t0 = begin("optimizer")
    opt.step()
    end("optimizer", t0)
    t0 = begin("zero_grad")
    opt.zero_grad(set_to_none=True)
    end("zero_grad", t0)
    STATE["phase"] = None
    times["step"] = sum(times[p] for p in PHASES)
    return float(loss.detach().float()), times, m


def run_row(row, desc, args, mem, base):
    name, published = desc
    wdt, adt, optk = SETUPS[row["setup"]]
    wdtype, adtype = getattr(torch, wdt), (getattr(torch, adt) if adt else None)
    rec = dict(base, model=name, setup=row["setup"], weights_dtype=wdt, autocast=adt and "bf16" or "none",
               optimizer=optk, gradient_checkpointing=row["ckpt"], batch=row["batch"], seq=row["seq"])
    mem.free()
    mem.reset_peak()
    if mem.cuda:
        torch.cuda.reset_accumulated_memory_stats()
    STATE["phase"] = "build"
    t_build = time.perf_counter()
    if args.fake:
        torch.manual_seed(args.seed)
        model = FakeDecoder().to(device=args.device, dtype=wdtype)
        info = {"attn_implementation": "fake", "cast_after_build": False, "model_class": "FakeDecoder"}
        vocab = 512
    else:
        model, info = build_hf(published, wdtype, args.device, args.seed)
        vocab = published["vocab_size"]
    model.train()
    if row["ckpt"]:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if args.lora:
        # peft's LoRA with its defaults but rank and targets: frozen base, adapters A and B (fp32 under
        # get_peft_model's autocast_adapter_dtype), lora_dropout 0 (nn.Identity), lora_alpha 8.
        import peft
        targets = (["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
                   if args.lora_targets == "all-linear" else args.lora_targets.split(","))
        model = peft.get_peft_model(model, peft.LoraConfig(r=args.lora, target_modules=targets, lora_dropout=0.0))
        adapters = [p for n, p in model.named_parameters() if p.requires_grad]
        rec.update(lora_rank=args.lora, lora_targets=args.lora_targets, peft=peft.__version__,
                   adapter_params=sum(p.numel() for p in adapters),
                   adapter_dtypes=sorted({str(p.dtype) for p in adapters}))
    rec.update(info)
    rec["params"] = sum(p.numel() for p in model.parameters())
    rec["param_bytes"] = sum(p.numel() * p.element_size() for p in model.parameters())
    mem.sync()
    rec["build_s"] = round(time.perf_counter() - t_build, 2)
    rec["after_build_allocated"] = mem.alloc()
    rec["after_build_reserved"] = mem.reserved()
    rec["build_peak_allocated"] = mem.peak_alloc()
    offload = {"none": None, "cpu": "states", "cpu-gradients": "gradients"}[args.optimizer_offload]
    opt = make_optimizer(optk, [p for p in model.parameters() if p.requires_grad], offload)  # what Trainer hands it
    if offload is not None:
        rec.update(optimizer_offload=args.optimizer_offload, offloaded_params=len(opt.param_d2h_map),
                   offloaded_elements=sum(p.numel() for p in opt.param_d2h_map),
                   torch_threads=torch.get_num_threads())
    rec["foreach_default"] = getattr(opt, "defaults", {}).get("foreach")
    rec["foreach_resolved"] = foreach_resolved(opt)
    g = torch.Generator(device="cpu").manual_seed(args.seed + 1)
    ids = torch.randint(0, vocab, (row["batch"], row["seq"]), generator=g).to(args.device)
    mem.sync()
    rec["before_warmup_allocated"] = mem.alloc()
    mem.reset_peak()
    STATE["phase"] = "warmup"
    for i in range(args.warmup):
        STATE["warmup_step"] = i
        one_step(model, opt, ids, adtype, mem, args.device, record=False)
    STATE.pop("warmup_step", None)
    mem.sync()
    rec["warmup_peak_allocated"] = mem.peak_alloc()
    rec["warmup_peak_reserved"] = mem.peak_reserved()
    steps = args.steps_big if rec["params"] > args.big_params else args.steps
    all_times, first_mem, loss = [], None, None
    peaks_a, peaks_r = [], []
    for i in range(steps):
        loss, times, m = one_step(model, opt, ids, adtype, mem, args.device, record=True)
        all_times.append(times)
        peaks_a.append(max(m[p]["peak_allocated"] for p in PHASES))
        peaks_r.append(max(m[p]["peak_reserved"] for p in PHASES))
        if first_mem is None:
            first_mem = m
    if args.no_phase_sync:  # the loop without synchronizing: steps back to back, one synchronize at the end
        mem.sync()
        t0 = time.perf_counter()
        for i in range(steps):
            one_step(model, opt, ids, adtype, mem, args.device, record=False, sync=False)
        mem.sync()
        rec["unsynced_step_ms"] = (time.perf_counter() - t0) * 1e3 / steps
    rec["measured_steps"] = steps
    rec["loss"] = loss
    rec["max_memory_allocated"] = peaks_a[0]
    rec["max_memory_reserved"] = peaks_r[0]
    rec["max_memory_allocated_all_steps"] = max(peaks_a)
    rec["max_memory_reserved_all_steps"] = max(peaks_r)
    rec["memory"] = first_mem
    rec["after_step_reserved"] = mem.reserved()
    rec["step_ms"] = statistics.median(t["step"] for t in all_times)
    rec["phase_ms"] = {p: statistics.median(t[p] for t in all_times) for p in PHASES}
    rec["step_ms_all"] = [round(t["step"], 3) for t in all_times]
    rec["allocator_stats"] = mem.stats()
    try:  # the process's resident host memory after the measured steps (pinned buffers and CPU optimizer state)
        with open("/proc/self/statm") as f:
            rec["host_rss_bytes"] = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        pass
    return rec


def table(paths):
    """The markdown table of measured rows (README of results/validation/training)."""
    rows = [json.loads(line) for p in paths for line in open(p) if line.strip()]
    print("| model | set-up | ckpt | shape | peak alloc GiB | peak reserved GiB | reserved-alloc GiB | step ms "
          "| fwd ms | bwd ms | opt ms | loss |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        head = f"| {r['model']} | {r['setup']} | {'on' if r['gradient_checkpointing'] else 'off'} | {r['batch']}x{r['seq']} |"
        if "skipped" in r:
            print(head + f" skipped: {r['skipped']} |||||||")
        elif "error" in r:
            what = "OOM" if r.get("oom") else "error"
            at = r.get("phase") + (f" (warm-up step {r['warmup_step']})" if r.get("warmup_step") is not None else "")
            print(head + f" {what} in {at}: reserved {r.get('reserved_at_oom', 0) / GIB:.2f} GiB at failure |||||||")
        else:
            a, v, ph = r["max_memory_allocated"] / GIB, r["max_memory_reserved"] / GIB, r["phase_ms"]
            print(head + f" {a:.2f} | {v:.2f} | {v - a:.2f} | {r['step_ms']:.1f} | {ph['forward']:.1f} | "
                  f"{ph['backward']:.1f} | {ph['optimizer']:.1f} | {r['loss']:.2f} |")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--table":
        return table(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=MODELS)
    ap.add_argument("--setups", nargs="+", default=DEFAULT_SETUPS, choices=sorted(SETUPS))
    ap.add_argument("--ckpt", nargs="+", default=["off", "on"], choices=["off", "on"])
    ap.add_argument("--shapes", nargs="+", default=["1x1024", "4x512"], help="BATCHxSEQ")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--steps-big", type=int, default=5, help="measured steps for models over --big-params")
    ap.add_argument("--big-params", type=float, default=3e9)
    ap.add_argument("--budget-s", type=float, default=1e9, help="rows not started by then are recorded skipped")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--fake", action="store_true", help="a small stand-in model (tests the harness, no transformers)")
    ap.add_argument("--lora", type=int, default=0, help="LoRA rank through peft (0: full fine-tuning)")
    ap.add_argument("--lora-targets", default="q_proj,v_proj", help="comma list of projections, or all-linear")
    ap.add_argument("--optimizer-offload", default="none", choices=["none", "cpu", "cpu-gradients"],
                    help="torchao's CPUOffloadOptimizer (cpu-gradients: offload_gradients=True); loads "
                         "torchao's own file staged by stage_torchao.sh (carry .ext)")
    ap.add_argument("--no-phase-sync", action="store_true",
                    help="also time the measured steps again back to back without synchronizing (unsynced_step_ms)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    mem = Mem(args.device)
    base = {"torch": torch.__version__, "device": args.device,
            "PYTORCH_CUDA_ALLOC_CONF": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    try:
        import transformers
        base["transformers"] = transformers.__version__
    except ImportError:
        base["transformers"] = None
    if mem.cuda:
        p = torch.cuda.get_device_properties(0)
        free, total = torch.cuda.mem_get_info()
        base.update(gpu=p.name, gpu_total_bytes=total, gpu_free_bytes_at_start=free,
                    cuda=torch.version.cuda, allocator_backend=torch.cuda.get_allocator_backend())
    descs = {m: load_description(m) for m in args.models} if not args.fake else \
        {m: (os.path.splitext(os.path.basename(m))[0] + "-fake", {}) for m in args.models}
    rows = [{"model": m, "setup": s, "ckpt": c == "on", "batch": int(sh.split("x")[0]), "seq": int(sh.split("x")[1])}
            for m in args.models for s in args.setups for c in args.ckpt for sh in args.shapes]
    t_start = time.perf_counter()
    summary = []
    with open(args.out, "a") as out:
        for i, row in enumerate(rows):
            name = descs[row["model"]][0]
            wdt, adt, optk = SETUPS[row["setup"]]
            head = dict(base, model=name, setup=row["setup"], weights_dtype=wdt, autocast=adt and "bf16" or "none",
                        optimizer=optk, gradient_checkpointing=row["ckpt"], batch=row["batch"], seq=row["seq"])
            if args.lora:
                head.update(lora_rank=args.lora, lora_targets=args.lora_targets)
            if args.optimizer_offload != "none":
                head.update(optimizer_offload=args.optimizer_offload)
            if time.perf_counter() - t_start > args.budget_s:
                rec = dict(head, skipped=f"time budget {args.budget_s:.0f} s spent")
            else:
                t_row = time.perf_counter()
                oom = None
                try:
                    rec = run_row(row, descs[row["model"]], args, mem, base)
                except OOM_ERRORS as e:  # noqa: PERF203
                    oom = dict(head, oom=True, error=str(e).splitlines()[0][:400], phase=STATE["phase"],
                               warmup_step=STATE.get("warmup_step"), allocated_at_oom=mem.alloc(),
                               reserved_at_oom=mem.reserved(), peak_allocated_at_oom=mem.peak_alloc(),
                               peak_reserved_at_oom=mem.peak_reserved(), allocator_stats=mem.stats())
                except Exception as e:  # noqa: BLE001 - a broken row must not end the run
                    oom = dict(head, oom=False, error=f"{type(e).__name__}: {e}"[:600], phase=STATE["phase"],
                               traceback=traceback.format_exc()[-2000:])
                if oom is not None:
                    rec = oom
                STATE.pop("warmup_step", None)
                STATE["phase"] = None
                mem.free()  # the row's model, optimizer and grads (their frames are gone with the exception)
                rec["row_s"] = round(time.perf_counter() - t_row, 2)
                rec["reserved_after_free"] = mem.reserved()
            out.write(json.dumps(rec) + "\n")
            out.flush()
            summary.append(rec)
            if "skipped" in rec:
                line = "skipped"
            elif "error" in rec:
                line = f"{'OOM' if rec.get('oom') else 'ERROR'} in {rec.get('phase')}: {rec['error'][:120]}"
            else:
                line = (f"alloc {rec['max_memory_allocated'] / GIB:7.2f} GiB  reserved {rec['max_memory_reserved'] / GIB:7.2f}"
                        f"  step {rec['step_ms']:8.1f} ms  loss {rec['loss']:.3f}")
            print(f"[{i + 1:2d}/{len(rows)} {time.perf_counter() - t_start:6.1f}s] {name:12s} {row['setup']:20s} "
                  f"ckpt={'on ' if row['ckpt'] else 'off'} {row['batch']}x{row['seq']:<5d} {line}", flush=True)
    ok = sum(1 for r in summary if "max_memory_allocated" in r)
    print(f"{ok} rows measured, {sum(1 for r in summary if r.get('oom'))} OOM, "
          f"{sum(1 for r in summary if 'error' in r and not r.get('oom'))} errors, "
          f"{sum(1 for r in summary if 'skipped' in r)} skipped, {time.perf_counter() - t_start:.1f} s")


if __name__ == "__main__":
    sys.exit(main())
