"""Inference memory as PyTorch's caching allocator sees it (issue 14's inference rows): a transformers causal LM
(random bf16 weights from a published config, SDPA) prefilled with a long prompt into a DynamicCache, then decoded
token by token with the cache, as generate() does (logits_to_keep=1: the head over the last token only). Per row:
torch.cuda.memory_allocated/reserved after the weights are built, and max_memory_allocated/reserved over the
prefill and over the decode steps (peaks reset before each phase), the cache's bytes, and the allocator's counters.
One JSON line per row; an OOM is recorded as a row with its phase, not a crash.

With --accelerate CAP (e.g. 8GiB), the random model is built on the GPU, saved (safetensors) once per process and
loaded back for each row with from_pretrained(device_map="auto", max_memory={0: CAP, "cpu": 100GiB}): accelerate's
own device map and its AlignDevicesHook on every offloaded module (its weights copied to the GPU in pre_forward,
dropped in post_forward), as users run it; the row records the device map and the offloaded bytes.

  python3 experiments/validate/infer_memory.py --out $OUT/infer_memory.jsonl
  python3 experiments/validate/infer_memory.py --fake --device cpu --out /tmp/i.jsonl   (harness test, no GPU)
"""
import argparse
import datetime
import gc
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_memory import Mem, build_hf, load_description  # noqa: E402

MODELS = ["traces/models/qwen3-0.6b.json", "traces/models/qwen3-4b.json", "traces/models/qwen3-8b.json"]
PROMPTS = [4096, 16384, 32768]


def cache_bytes(cache):
    total = 0
    for t in list(getattr(cache, "key_cache", [])) + list(getattr(cache, "value_cache", [])):  # older caches
        if isinstance(t, torch.Tensor):
            total += t.numel() * t.element_size()
    for layer in getattr(cache, "layers", []):
        for name in ("keys", "values"):
            t = getattr(layer, name, None)
            if isinstance(t, torch.Tensor):
                total += t.numel() * t.element_size()
    return total


SAVED = {}


def load_accelerate(desc, args, mem):
    """The random model (built on the GPU, saved once), loaded by transformers with device_map="auto" under the cap."""
    import accelerate
    import transformers
    key = json.dumps(desc, sort_keys=True)
    if key not in SAVED:
        built, info = build_hf(desc, torch.bfloat16, args.device, args.seed)
        path = f"/tmp/tiersim-infer-memory-{len(SAVED)}"
        built.save_pretrained(path, safe_serialization=True)
        SAVED[key] = (path, type(built), info)
        del built
        mem.free()
    path, cls, info = SAVED[key]
    model = cls.from_pretrained(path, device_map="auto", max_memory={0: args.accelerate, "cpu": "100GiB"},
                                dtype=torch.bfloat16, attn_implementation="sdpa")
    offloaded = 0
    for module in model.modules():
        hook = getattr(module, "_hf_hook", None)
        if hook is not None and getattr(hook, "offload", False):
            offloaded += sum(p.numel() * p.element_size() for p in module.parameters(recurse=False))
    info = dict(info, accelerate=accelerate.__version__, accelerate_cap=args.accelerate, offloaded_bytes=offloaded,
                device_map={k: str(v) for k, v in getattr(model, "hf_device_map", {}).items()})
    return model, info


def run_row(path, prompt, decode, args, mem):
    name, desc = load_description(path)
    row = {"model": name, "prompt": prompt, "decode": decode, "batch": args.batch, "dtype": "bfloat16",
           "torch": torch.__version__, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "PYTORCH_CUDA_ALLOC_CONF": os.environ.get("PYTORCH_CUDA_ALLOC_CONF")}
    if mem.cuda:
        row["gpu"] = torch.cuda.get_device_name()
    phase = "build"
    model = cache = ids = None
    try:
        import transformers
        row["transformers"] = transformers.__version__
        if args.accelerate:
            model, info = load_accelerate(desc, args, mem)
        else:
            model, info = build_hf(desc, torch.bfloat16, args.device, args.seed)
        model.config.use_cache = True
        model.eval()
        row.update(info)
        mem.sync()
        row["params"] = sum(p.numel() for p in model.parameters())
        row["after_build_allocated"], row["after_build_reserved"] = mem.alloc(), mem.reserved()
        g = torch.Generator(device="cpu").manual_seed(args.seed)
        ids = torch.randint(0, desc["vocab_size"], (args.batch, prompt), generator=g).to(args.device)
        with torch.inference_mode():
            phase = "prefill"
            try:  # transformers >= 4.56: the cache's layers from the config
                cache = transformers.DynamicCache(config=model.config)
            except TypeError:
                cache = transformers.DynamicCache()
            mem.reset_peak()
            t0 = time.perf_counter()
            out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
            nxt = out.logits[:, -1:].argmax(-1)
            del out
            mem.sync()
            row["prefill_ms"] = (time.perf_counter() - t0) * 1e3
            row["prefill_peak_allocated"], row["prefill_peak_reserved"] = mem.peak_alloc(), mem.peak_reserved()
            row["after_prefill_allocated"], row["after_prefill_reserved"] = mem.alloc(), mem.reserved()
            row["cache_bytes_after_prefill"] = cache_bytes(cache)
            phase = "decode"
            mem.reset_peak()
            t0 = time.perf_counter()
            for _ in range(decode):
                out = model(input_ids=nxt, past_key_values=cache, use_cache=True, logits_to_keep=1)
                nxt = out.logits[:, -1:].argmax(-1)
                del out
            mem.sync()
            row["decode_ms_per_token"] = (time.perf_counter() - t0) * 1e3 / max(decode, 1)
            row["decode_peak_allocated"], row["decode_peak_reserved"] = mem.peak_alloc(), mem.peak_reserved()
            row["after_decode_allocated"], row["after_decode_reserved"] = mem.alloc(), mem.reserved()
            row["cache_bytes_after_decode"] = cache_bytes(cache)
        row["allocator_stats"] = mem.stats()
    except Exception as e:  # an OOM (or anything else) is recorded with its phase, then the next row
        row.update({"oom": "out of memory" in str(e).lower(), "error": str(e).splitlines()[0][:300], "phase": phase,
                    "allocated_at_error": mem.alloc(), "reserved_at_error": mem.reserved()})
    del model, cache, ids
    mem.free()
    row["reserved_after_free"] = mem.reserved()
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=MODELS)
    ap.add_argument("--prompts", nargs="+", type=int, default=PROMPTS)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--batch", type=int, default=1, help="sequences, each of --prompts tokens")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--fake", action="store_true", help="tiny-4 at short prompts (tests the harness)")
    ap.add_argument("--budget-s", type=float, default=1e9, help="rows not started by then are recorded skipped")
    ap.add_argument("--accelerate", help="load with accelerate's device_map='auto' under this GPU cap (8GiB)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.fake:
        args.models, args.prompts, args.decode = ["experiments/validate/calibration_models/tiny-4.json"], [64], 4
    mem = Mem(args.device)
    start = time.perf_counter()
    with open(args.out, "w") as f:
        for path in args.models:
            for prompt in args.prompts:
                if time.perf_counter() - start > args.budget_s:
                    row = {"model": path, "prompt": prompt, "skipped": True}
                else:
                    row = run_row(path, prompt, args.decode, args, mem)
                f.write(json.dumps(row) + "\n")
                f.flush()
                gib = 1024 ** 3
                print(f"[{time.perf_counter() - start:6.1f}s] {row['model']:<12} batch {args.batch} prompt {prompt:>6}  "
                      + (f"prefill peak {row.get('prefill_peak_allocated', 0) / gib:6.2f} / "
                         f"{row.get('prefill_peak_reserved', 0) / gib:6.2f} GiB  decode peak "
                         f"{row.get('decode_peak_allocated', 0) / gib:6.2f} / {row.get('decode_peak_reserved', 0) / gib:6.2f}"
                         if "error" not in row and not row.get("skipped") else row.get("error", "skipped")), flush=True)


if __name__ == "__main__":
    main()
