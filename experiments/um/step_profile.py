"""Where a decode step's time goes, per step: a recorder for decode_latency.decode (its start / advance / stop hooks)
that runs torch.profiler (CPU + CUDA activity) over the prefill and every decode step and, per step, sums the GPU's
kernel and copy time by kind of kernel. A diagnosis, not a timing: the profiler adds host time to every op, so the
rows it is used with are not validation rows.

    rec = StepProfiler(); dl.decode(model, vocab, prompt, tokens, warmup, recorder=rec); rec.summary()
"""
import torch

# Kinds of GPU work by kernel name, first match wins (cuBLAS's GEMV and GEMM kernels, cuBLASLt's nvjet GEMMs on
# Hopper, SDPA's flash / memory-efficient kernels, the KV cache's torch.cat, PyTorch's elementwise and reductions).
KINDS = [
    ("copy", ("Memcpy", "Memset")),
    ("gemv", ("gemv", "gemvx", "gemvNSP", "gemv2T", "gemv2N", "splitKreduce")),
    ("gemm", ("gemm", "nvjet", "sm90_xmma", "cutlass", "xmma")),
    ("attention", ("flash", "fmha", "attention", "efficient")),
    ("cat", ("CatArrayBatchedCopy", "cat_")),
    ("reduce", ("reduce", "Reduce")),
    ("elementwise", ("elementwise", "vectorized", "unrolled", "Elementwise")),
]


def kind(name):
    for k, keys in KINDS:
        if any(key in name for key in keys):
            return k
    return "other"


class StepProfiler:
    def __init__(self):
        self.prof = None
        self.seg = None
        self.count = 0

    def _open(self):
        self.seg = torch.autograd.profiler.record_function(f"tiersim_step_{self.count}")
        self.seg.__enter__()
        self.count += 1

    def start(self, _n):
        from torch.profiler import ProfilerActivity, profile
        self.prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        self.prof.__enter__()
        self._open()

    def advance(self, _n):
        self.seg.__exit__(None, None, None)
        self._open()

    def stop(self):
        self.seg.__exit__(None, None, None)
        self.prof.__exit__(None, None, None)

    def summary(self):
        """One dict per step (step 0 is the prefill): its span, the GPU work that started in it by kind (seconds,
        launches), the union of that work's intervals (busy) and the 12 kernels that took longest."""
        events = self.prof.events()
        spans = []
        for e in events:
            if e.name.startswith("tiersim_step_"):
                spans.append((int(e.name.rsplit("_", 1)[1]), e.time_range.start, e.time_range.end))
        spans.sort()
        gpu = sorted((e.time_range.start, e.time_range.end, e.name) for e in events
                     if e.device_type == torch.autograd.DeviceType.CUDA)
        steps = []
        for idx, (k, s, t) in enumerate(spans):
            if t <= s:
                continue
            last = idx + 1 == len(spans)
            inside = [g for g in gpu if s <= g[0] < t or (last and g[0] >= s)]
            by_kind, names = {}, {}
            busy, cover_end = 0.0, -1.0
            for g0, g1, name in inside:
                d = max(0.0, g1 - g0)
                kk = kind(name)
                sec, n = by_kind.get(kk, (0.0, 0))
                by_kind[kk] = (sec + d * 1e-6, n + 1)
                short = name[:110]
                sec, n = names.get(short, (0.0, 0))
                names[short] = (sec + d * 1e-6, n + 1)
                lo = max(g0, cover_end)
                if g1 > lo:
                    busy += g1 - lo
                cover_end = max(cover_end, g1)
            steps.append(dict(step=k, span_s=(t - s) * 1e-6, launches=len(inside), busy_s=busy * 1e-6,
                              by_kind={kk: dict(seconds=round(v[0], 6), launches=v[1]) for kk, v in sorted(by_kind.items())},
                              top=[dict(name=n, seconds=round(v[0], 6), launches=v[1])
                                   for n, v in sorted(names.items(), key=lambda kv: -kv[1][0])[:12]]))
        return steps
