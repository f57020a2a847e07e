"""Calibration fixtures: PyTorch's CUDA caching allocator, recorded op by op on a GPU.

Runs deterministic (seeded) sequences of torch.empty(n, dtype=torch.uint8, device="cuda") and del, and
records torch.cuda.memory_allocated() and torch.cuda.memory_reserved() after every operation (both read
from one torch.cuda.memory_stats() call: allocated_bytes.all.current and reserved_bytes.all.current), and
at the end num_alloc_retries, num_ooms and the two peaks. tests/memory/caching_allocator_test.cpp replays
every sequence through tiersim's model (sim/memory/caching_allocator.cpp) and expects the same numbers.

Scenarios: size_classes (every size rule: < 512 B, around 1 MiB, 1-10 MiB, around 10 MiB, 10-100 MiB,
GiB, odd sizes, zero), split_merge (frees between allocations inside 2 MiB and 20 MiB segments),
random_mix, large_blocks (max_split_size's oversize rules, empty_cache), llm_inference (weights, then
per-layer transient activations of a prefill and decode steps with a growing KV cache), fragmentation
(a batch size that grows between iterations; holes that larger requests cannot use), streams (three
streams: blocks are reused only on their own) and oom_retry (torch.cuda.set_per_process_memory_fraction
holds the allocator to about 2 GiB: cached segments are released and the allocation retried, some
allocations fail). Each runs under PYTORCH_CUDA_ALLOC_CONF = "" (default), "max_split_size_mb:64",
"roundup_power2_divisions:4" and "expandable_segments:True", each (scenario, setting) in a fresh
subprocess (the allocator reads its settings once). Nothing here reserves more than about 14 GiB (on an
H100 with torch 2.11: random_mix under max_split_size_mb:64); a child stops if reserved memory ever
passes 30 GiB. The whole run took 2-3 minutes there.

Output (--out): one JSON line per (scenario, setting):
  {"scenario", "conf", "torch", "gpu", "total_memory", "allowed_memory_maximum" (null without a
   fraction), "ops": [["alloc", id, bytes] | ["alloc", id, bytes, stream] | ["free", id] |
   ["empty_cache"]], "allocated": [...], "reserved": [...] (after each op), "ooms": [indices of allocs
   that raised torch.OutOfMemoryError], "ptrs": [the tensor's data_ptr() for an alloc (0: none),
   null for other ops: diagnostics, the model does not predict addresses], "num_alloc_retries",
   "num_ooms", "peak_allocated", "peak_reserved"}
An alloc that ran out of memory stays in "ops" (listed in "ooms"); the frees of its id are left out.

On the GPU machine (torch 2.11, one H100/H200), from the repository root:

  python3 experiments/calibrate/allocator_trace.py --out tests/fixtures/allocator_traces.jsonl

Without a GPU or torch, the sequences (checked: ids, frees, at most 12 GiB live) as JSON, one per scenario:

  python3 experiments/calibrate/allocator_trace.py --dry-run
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

CONFS = ["", "max_split_size_mb:64", "roundup_power2_divisions:4", "expandable_segments:True"]
MAX_LIVE_BYTES = 12 * GiB      # checked on every sequence (requested bytes alive at once)
MAX_RESERVED_BYTES = 30 * GiB  # a child stops past this
OOM_LIMIT_BYTES = 2 * GiB + 10 * MiB  # oom_retry's memory fraction: this many bytes of the GPU


class Seq:
    """Builds a list of ops with fresh ids."""

    def __init__(self):
        self.ops = []
        self.next_id = 0
        self.live = {}

    def alloc(self, nbytes, stream=0):
        i = self.next_id
        self.next_id += 1
        self.ops.append(["alloc", i, int(nbytes)] + ([stream] if stream else []))
        self.live[i] = int(nbytes)
        return i

    def free(self, i):
        del self.live[i]
        self.ops.append(["free", i])

    def free_all(self, rng=None):
        ids = list(self.live)
        if rng is not None:
            rng.shuffle(ids)
        for i in ids:
            self.free(i)

    def empty_cache(self):
        self.ops.append(["empty_cache"])


SIZE_CLASSES = [
    0, 1, 100, 511, 512, 513, 1000, 4095, 12345,                                     # below and around 512 B
    1 * MiB - 1, 1 * MiB, 1 * MiB + 1, 1 * MiB + 511, 1 * MiB + 513, 999999,           # around 1 MiB
    3 * MiB // 2 + 7, 2 * MiB, 3333333, 5 * MiB, 7 * MiB + 3, 19 * MiB // 2,           # 1-10 MiB
    10 * MiB - 513, 10 * MiB - 1, 10 * MiB, 10 * MiB + 1, 10 * MiB + 512,              # around 10 MiB
    11 * MiB, 11 * MiB + 1, 12 * MiB - 1, 33 * MiB + 5, 63 * MiB, 64 * MiB, 65 * MiB,  # 10-100 MiB
    77777777, 99 * MiB + 511,
    1 * GiB, 1 * GiB + 1, 3 * GiB // 2 + 7,                                            # GiB
]


def size_classes(rng):
    s = Seq()
    first = [s.alloc(n) for n in SIZE_CLASSES]
    for k, i in enumerate(first):
        if k % 3 == 1:
            s.free(i)
    second = [s.alloc(n) for n in reversed(SIZE_CLASSES)]
    for i in second[::2]:
        s.free(i)
    s.empty_cache()
    for n in SIZE_CLASSES[::4]:
        s.alloc(n + 3)
    s.free_all(rng)
    s.empty_cache()
    for n in SIZE_CLASSES[1::5]:
        s.alloc(n)
    s.free_all(rng)
    return s


def split_merge(rng):
    s = Seq()
    # One 20 MiB segment cut in four, the middle freed and merged, reused by a larger request.
    a = [s.alloc(4 * MiB) for _ in range(4)]
    s.free(a[1])
    s.free(a[2])
    s.alloc(6 * MiB)
    s.alloc(3 * MiB)
    s.free(a[0])
    s.free(a[3])
    # A 2 MiB small segment: 100 KiB pieces, every other one freed, a 150 KiB request.
    small = [s.alloc(100 * KiB) for _ in range(18)]
    for i in small[::2]:
        s.free(i)
    s.alloc(150 * KiB)
    s.alloc(90 * KiB + 1)
    # A 30 MiB segment split for 10 MiB + 1, its rest reused.
    s.free(s.alloc(30 * MiB))
    s.alloc(10 * MiB + 1)
    s.alloc(19 * MiB)
    s.alloc(12 * MiB)
    # Random churn among sizes that split 2 MiB and 20 MiB segments.
    sizes = [100 * KiB, 300 * KiB + 3, 1 * MiB, 2 * MiB + 5, 4 * MiB, 6 * MiB + 1, 9 * MiB, 13 * MiB]
    for _ in range(400):
        if len(s.live) < 20 or (rng.random() < 0.5 and len(s.live) < 60):
            s.alloc(rng.choice(sizes))
        else:
            s.free(rng.choice(sorted(s.live)))
    s.free_all(rng)
    return s


def random_mix(rng):
    s = Seq()
    classes = [(0.30, 1, 4 * KiB), (0.20, 4 * KiB, 1 * MiB + 4 * KiB), (0.20, 1 * MiB, 11 * MiB),
               (0.20, 10 * MiB, 100 * MiB), (0.08, 100 * MiB, 600 * MiB), (0.02, 600 * MiB, 1200 * MiB)]
    for _ in range(700):
        live = sum(s.live.values())
        if s.live and (rng.random() < 0.45 or live > 5 * GiB):
            s.free(rng.choice(sorted(s.live)))
            continue
        r = rng.random()
        for p, lo, hi in classes:
            if r < p:
                break
            r -= p
        s.alloc(rng.randrange(lo, hi))
    s.free_all(rng)
    return s


def large_blocks(rng):
    s = Seq()
    g = s.alloc(1 * GiB)
    s.free(g)
    s.alloc(900 * MiB)          # max_split_size:64: the cached 1 GiB is oversize by more than 20 MiB
    s.alloc(1010 * MiB)         # within 20 MiB of 1 GiB
    s.alloc(50 * MiB)           # below max_split_size
    h = s.alloc(300 * MiB + 3)
    s.free(h)
    s.alloc(70 * MiB)           # >= max_split_size, the cached 300 MiB too big for it
    s.alloc(290 * MiB)          # fits the cached 300 MiB within 20 MiB
    s.empty_cache()
    s.free_all(rng)
    k = [s.alloc(200 * MiB + 1) for _ in range(4)]
    s.free(k[1])
    s.free(k[2])
    s.alloc(390 * MiB)          # the merged 400 MiB only if not oversize...
    s.alloc(100 * MiB)
    s.empty_cache()
    s.free_all(rng)
    s.empty_cache()
    for n in [2 * GiB + 7, 1536 * MiB, 2 * GiB - 3 * MiB]:
        s.free(s.alloc(n))
    s.alloc(2 * GiB - 10 * MiB)
    s.alloc(1 * GiB)
    s.free_all(rng)
    return s


def llm_inference(rng):
    """A decoder in fp16: weights, then a prefill (batch 4, 512 tokens) and decode steps; the
    activations of each layer die after it, the KV cache grows by concatenation (new, larger tensors)."""
    s = Seq()
    h, inter, vocab, layers, heads, b, t = 4096, 11008, 32000, 8, 32, 4, 512
    e = 2  # bytes per element
    s.alloc(vocab * h * e)                       # embedding
    for _ in range(layers):
        s.alloc(h * e)                           # input norm
        for _ in range(4):
            s.alloc(h * h * e)                   # q, k, v, o
        s.alloc(h * e)                           # post-attention norm
        for _ in range(3):
            s.alloc(h * inter * e)               # gate, up, down
    s.alloc(h * e)                               # final norm
    s.alloc(vocab * h * e)                       # lm head
    kv = [None] * layers
    length = 0
    for step in range(7):
        tokens = t if step == 0 else 1
        x = s.alloc(b * tokens * h * e)          # embedding lookup
        for layer in range(layers):
            n = s.alloc(b * tokens * h * e)
            q = s.alloc(b * tokens * h * e)
            k = s.alloc(b * tokens * h * e)
            v = s.alloc(b * tokens * h * e)
            s.free(n)
            new_len = length + tokens
            if kv[layer] is None:
                kv[layer] = (k, v)
            else:                                # torch.cat: a new, larger cache, the old one freed
                ok, ov = kv[layer]
                nk = s.alloc(b * new_len * h * e)
                nv = s.alloc(b * new_len * h * e)
                s.free(ok)
                s.free(ov)
                s.free(k)
                s.free(v)
                kv[layer] = (nk, nv)
            scores = s.alloc(b * heads * tokens * new_len * e)
            probs = s.alloc(b * heads * tokens * new_len * e)
            s.free(scores)
            attn = s.alloc(b * tokens * h * e)
            s.free(probs)
            s.free(q)
            o = s.alloc(b * tokens * h * e)
            s.free(attn)
            x2 = s.alloc(b * tokens * h * e)     # residual
            s.free(o)
            s.free(x)
            n2 = s.alloc(b * tokens * h * e)
            gate = s.alloc(b * tokens * inter * e)
            up = s.alloc(b * tokens * inter * e)
            act = s.alloc(b * tokens * inter * e)
            s.free(gate)
            s.free(up)
            down = s.alloc(b * tokens * h * e)
            s.free(act)
            s.free(n2)
            x = s.alloc(b * tokens * h * e)
            s.free(down)
            s.free(x2)
        last = s.alloc(b * h * e)                # the last token's hidden state
        s.free(x)
        logits = s.alloc(b * vocab * 4)          # float32 logits
        s.free(last)
        s.alloc(b * 8)                           # next token ids (int64), kept
        s.free(logits)
        length += tokens
    return s


def fragmentation(rng):
    s = Seq()
    # A batch that grows by one each iteration: activations (N*A, N*A*B) no longer fit the blocks
    # of the previous iteration's size.
    weights = [s.alloc(37 * MiB + 1234) for _ in range(4)]
    for n in range(1, 13):
        acts = []
        for layer in range(6):
            acts.append(s.alloc(n * 1_310_720 + 512 * layer))
            acts.append(s.alloc(n * 5_767_168 + 7))
            if layer % 2:
                s.free(acts.pop(0))
        for i in acts:
            s.free(i)
    s.free(weights[1])
    # Holes: 30 MiB blocks, every other freed; 45 MiB requests cannot use the holes.
    blocks = [s.alloc(30 * MiB) for _ in range(24)]
    for i in blocks[1::2]:
        s.free(i)
    more = [s.alloc(45 * MiB) for _ in range(10)]
    for i in blocks[0::2]:
        s.free(i)
    s.alloc(100 * MiB)
    for i in more[::3]:
        s.free(i)
    s.alloc(28 * MiB)
    s.alloc(59 * MiB)
    s.free_all(rng)
    return s


def streams(rng):
    s = Seq()
    for st in (0, 1, 2):
        ids = [s.alloc(n, st) for n in (1000, 5 * MiB, 12 * MiB + 3, 600 * KiB)]
        s.free(ids[1])
        s.free(ids[2])
    for st in (2, 0, 1):
        s.alloc(5 * MiB, st)
        s.alloc(11 * MiB, st)
    for _ in range(150):
        if s.live and rng.random() < 0.45:
            s.free(rng.choice(sorted(s.live)))
        else:
            s.alloc(rng.choice([700, 200 * KiB, 3 * MiB + 1, 9 * MiB, 25 * MiB]), rng.choice([0, 1, 2]))
    s.free_all(rng)
    return s


def oom_retry(rng):
    s = Seq()
    big = [s.alloc(100 * MiB) for _ in range(24)]       # more than the ~2 GiB allowed: the last ones fail
    for i in big[::2]:
        s.free(i)                                       # cached whole segments
    s.alloc(250 * MiB)                                  # releases cached segments, then retries
    s.alloc(5 * MiB)
    s.alloc(1000)
    for i in big[1::2][:4]:
        s.free(i)
    s.alloc(700 * MiB)
    s.alloc(700 * MiB)                                  # fails
    s.alloc(300 * MiB)
    small = [s.alloc(3 * MiB) for _ in range(12)]
    for i in small[1::2]:
        s.free(i)
    s.alloc(1 * GiB)                                    # fails
    s.empty_cache()
    s.free_all(rng)
    for _ in range(3):
        s.alloc(900 * MiB)                              # the third fails
    s.free_all(rng)
    return s


SCENARIOS = {
    "size_classes": (size_classes, 1, None),
    "split_merge": (split_merge, 2, None),
    "random_mix": (random_mix, 3, None),
    "large_blocks": (large_blocks, 4, None),
    "llm_inference": (llm_inference, 5, None),
    "fragmentation": (fragmentation, 6, None),
    "streams": (streams, 7, None),
    "oom_retry": (oom_retry, 8, OOM_LIMIT_BYTES),
}


def build(name):
    fn, seed, limit = SCENARIOS[name]
    ops = fn(random.Random(seed)).ops
    check(name, ops)
    return ops, limit


def check(name, ops):
    live, seen, peak = {}, set(), 0
    for op in ops:
        if op[0] == "alloc":
            assert op[1] not in seen, (name, op)
            assert isinstance(op[2], int) and 0 <= op[2] < 1 << 40, (name, op)
            seen.add(op[1])
            live[op[1]] = op[2]
            peak = max(peak, sum(live.values()))
        elif op[0] == "free":
            assert op[1] in live, (name, op)
            del live[op[1]]
        else:
            assert op == ["empty_cache"], (name, op)
    assert peak <= MAX_LIVE_BYTES, (name, peak)
    return peak


def child(name, conf):
    import torch

    if not torch.cuda.is_available():
        sys.exit("allocator_trace: torch.cuda.is_available() is False: this needs a CUDA GPU")
    assert os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "") == conf
    ops, limit = build(name)
    torch.cuda.init()
    dev = torch.device("cuda", 0)
    props = torch.cuda.get_device_properties(dev)
    total = int(props.total_memory)
    allowed = None
    if limit is not None:
        fraction = limit / total
        torch.cuda.set_per_process_memory_fraction(fraction, dev)
        # DeviceCachingAllocator::setMemoryFraction: static_cast<size_t>(fraction * totalGlobalMem)
        allowed = int(fraction * float(total))
    stats = torch.cuda.memory_stats(dev)
    if stats.get("allocated_bytes.all.current", 0) or stats.get("reserved_bytes.all.current", 0):
        sys.exit(f"allocator_trace: the allocator is not empty at the start: {stats}")
    used_streams = sorted({op[3] for op in ops if op[0] == "alloc" and len(op) > 3})
    cuda_streams = {st: torch.cuda.Stream(dev) for st in used_streams}
    tensors, failed, rec_ops, allocated, reserved, ooms, ptrs = {}, set(), [], [], [], [], []
    for op in ops:
        if op[0] == "alloc":
            stream = op[3] if len(op) > 3 else 0
            try:
                if stream:
                    with torch.cuda.stream(cuda_streams[stream]):
                        tensors[op[1]] = torch.empty(op[2], dtype=torch.uint8, device=dev)
                else:
                    tensors[op[1]] = torch.empty(op[2], dtype=torch.uint8, device=dev)
            except torch.cuda.OutOfMemoryError:
                failed.add(op[1])
                ooms.append(len(rec_ops))
        elif op[0] == "free":
            if op[1] in failed:
                continue
            del tensors[op[1]]
        else:
            torch.cuda.empty_cache()
        rec_ops.append(op)
        ptrs.append((tensors[op[1]].data_ptr() if op[1] in tensors else 0) if op[0] == "alloc" else None)
        st = torch.cuda.memory_stats(dev)
        allocated.append(int(st["allocated_bytes.all.current"]))
        reserved.append(int(st["reserved_bytes.all.current"]))
        if reserved[-1] > MAX_RESERVED_BYTES:
            sys.exit(f"allocator_trace: {name} [{conf}] reserved {reserved[-1]} bytes, past the 30 GiB limit")
    st = torch.cuda.memory_stats(dev)
    line = {
        "scenario": name, "conf": conf, "torch": torch.__version__, "gpu": props.name,
        "total_memory": total, "allowed_memory_maximum": allowed,
        "ops": rec_ops, "allocated": allocated, "reserved": reserved, "ooms": ooms, "ptrs": ptrs,
        "num_alloc_retries": int(st["num_alloc_retries"]), "num_ooms": int(st["num_ooms"]),
        "peak_allocated": int(st["allocated_bytes.all.peak"]), "peak_reserved": int(st["reserved_bytes.all.peak"]),
    }
    sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="JSON-lines file to write")
    ap.add_argument("--dry-run", action="store_true", help="print the sequences; no torch, no GPU")
    ap.add_argument("--scenario", action="append", choices=sorted(SCENARIOS), help="only these (repeatable)")
    ap.add_argument("--conf", action="append", help="only these PYTORCH_CUDA_ALLOC_CONF settings (repeatable)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    names = args.scenario or list(SCENARIOS)
    confs = args.conf if args.conf is not None else CONFS

    if args.child:
        child(args.child, os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""))
        return
    if args.dry_run:
        for name in names:
            ops, limit = build(name)
            peak = check(name, ops)
            print(json.dumps({"scenario": name, "n_ops": len(ops), "peak_live_bytes": peak,
                              "memory_limit": limit, "ops": ops}, separators=(",", ":")))
        return
    if not args.out:
        ap.error("--out is required (or --dry-run)")
    try:
        import torch
    except ImportError:
        sys.exit("allocator_trace: torch is not installed for " + sys.executable)
    if not torch.cuda.is_available():
        sys.exit("allocator_trace: torch.cuda.is_available() is False: this needs a CUDA GPU")
    for name in names:
        build(name)  # fail on a bad sequence before any GPU work
    lines = []
    for name in names:
        for conf in confs:
            env = dict(os.environ)
            env.pop("PYTORCH_ALLOC_CONF", None)  # it would take precedence over PYTORCH_CUDA_ALLOC_CONF
            env["PYTORCH_CUDA_ALLOC_CONF"] = conf
            start = time.time()
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name],
                                  env=env, capture_output=True, text=True)
            if proc.returncode != 0 or not proc.stdout.strip():
                sys.stderr.write(proc.stderr)
                sys.exit(f"allocator_trace: {name} [{conf}] failed (exit {proc.returncode})")
            line = proc.stdout.strip().splitlines()[-1]
            rec = json.loads(line)
            print(f"{name:14s} [{conf or 'default'}] {len(rec['ops'])} ops, peak reserved "
                  f"{rec['peak_reserved'] / GiB:.2f} GiB, {len(rec['ooms'])} OOM, "
                  f"{rec['num_alloc_retries']} retries, {time.time() - start:.1f} s", flush=True)
            lines.append(line)
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, args.out)
    print(f"wrote {len(lines)} traces to {args.out}")


if __name__ == "__main__":
    main()
