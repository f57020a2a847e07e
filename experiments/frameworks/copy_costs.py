"""Framework microbenchmarks for the offload paths (runs on a GPU machine with torch and accelerate; no
weights, no model): what accelerate's hooks cost per offloaded tensor beyond the copy itself, and how
long a pageable copy holds the host thread when it is issued on a side stream (ComfyUI's offload
streams). These calibrate runtime parameters; no validation row is looked at.

  python3 experiments/frameworks/copy_costs.py --out copy_costs.json

(a) accelerate: the seven Linear weights of a Qwen3-8B decoder layer (bf16, pageable CPU tensors),
    run through accelerate's own cpu_offload (AlignDevicesHook per leaf: a synchronous .to() per tensor,
    torch.cuda.empty_cache() after each, the weight set back to meta after the forward), against the
    same seven copies done by hand (a synchronous .to(), F.linear, del). Per-tensor extra = the
    difference over 7. Batch-1 input, so the matmuls are short next to the copies.
(b) pageable copy on a side stream: host time of dst.copy_(src, non_blocking=True) from pageable
    memory on stream S against the copy's GPU time (events), alone, with a 50 ms kernel queued on
    the compute stream first (does the host wait for another stream?), and with that kernel queued on
    S itself (the driver syncs the stream before a pageable copy).
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

SHAPES = [(4096, 4096), (1024, 4096), (1024, 4096), (4096, 4096), (12288, 4096), (12288, 4096), (4096, 12288)]
MIB = 1 << 20


def check_cuda():
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device")


def timed(fn, repeats):
    out = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        out.append(time.perf_counter() - t0)
    return out


def accelerate_hooks(repeats):
    from accelerate import cpu_offload

    x = torch.randn(1, 4096, dtype=torch.bfloat16, device="cuda:0")
    mods = [torch.nn.Linear(i, o, bias=False, dtype=torch.bfloat16) for (o, i) in SHAPES]
    for m in mods:
        m.weight.data.normal_()
    seq = torch.nn.ModuleList(mods)
    cpu_weights = [m.weight.detach().clone() for m in mods]  # pageable, as from_pretrained leaves them

    class Chain(torch.nn.Module):
        def __init__(self, ms):
            super().__init__()
            self.ms = ms

        def forward(self, h):
            outs = []
            for m in self.ms:
                inp = h if m.in_features == 4096 else torch.zeros(1, m.in_features, dtype=h.dtype, device=h.device)
                outs.append(m(inp))
            return outs

    chain = Chain(seq)
    cpu_offload(chain, execution_device=torch.device("cuda:0"))

    def by_hand():
        for w, (o, i) in zip(cpu_weights, SHAPES):
            inp = x if i == 4096 else torch.zeros(1, i, dtype=x.dtype, device=x.device)
            wg = w.to("cuda:0")
            F.linear(inp, wg)
            del wg

    with torch.no_grad():
        for _ in range(3):
            chain(x)
            by_hand()
        hooks = timed(lambda: chain(x), repeats)
        hand = timed(by_hand, repeats)
    nbytes = sum(o * i * 2 for (o, i) in SHAPES)
    return {
        "tensors": len(SHAPES),
        "bytes": nbytes,
        "accelerate_hooks_s": hooks,
        "by_hand_s": hand,
        "per_tensor_extra_s": (statistics.median(hooks) - statistics.median(hand)) / len(SHAPES),
    }


def pageable_side_stream(repeats):
    side = torch.cuda.Stream()
    compute = torch.cuda.current_stream()
    out = {}
    for mib in (8, 64, 256):
        n = mib * MIB // 2
        src = torch.empty(n, dtype=torch.bfloat16).normal_()  # pageable
        dst = torch.empty(n, dtype=torch.bfloat16, device="cuda:0")
        rows = {}
        for case in ("alone", "compute_busy", "same_stream_busy"):
            host, gpu, start_after_issue = [], [], []
            for _ in range(repeats):
                torch.cuda.synchronize()
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                if case == "compute_busy":
                    with torch.cuda.stream(compute):
                        torch.cuda._sleep(50_000_000)  # ~25-50 ms of GPU time on the compute stream
                if case == "same_stream_busy":
                    with torch.cuda.stream(side):
                        torch.cuda._sleep(50_000_000)
                with torch.cuda.stream(side):
                    t0 = time.perf_counter()
                    e0.record(side)
                    dst.copy_(src, non_blocking=True)
                    e1.record(side)
                    host.append(time.perf_counter() - t0)
                torch.cuda.synchronize()
                gpu.append(e0.elapsed_time(e1) / 1e3)
            rows[case] = {"host_s": statistics.median(host), "gpu_s": statistics.median(gpu),
                          "host_all_s": host, "gpu_all_s": gpu}
        out[f"{mib}MiB"] = rows
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args()
    check_cuda()
    result = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    try:
        import accelerate
        result["accelerate"] = accelerate.__version__
        result["accelerate_hooks"] = accelerate_hooks(args.repeats)
    except ImportError as e:
        result["accelerate_hooks"] = {"error": str(e)}
    result["pageable_side_stream"] = pageable_side_stream(args.repeats)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    a = result["accelerate_hooks"]
    if "per_tensor_extra_s" in a:
        print(f"accelerate: hooks {statistics.median(a['accelerate_hooks_s'])*1e3:.2f} ms, by hand "
              f"{statistics.median(a['by_hand_s'])*1e3:.2f} ms for {a['tensors']} tensors "
              f"({a['bytes']/1e6:.0f} MB): {a['per_tensor_extra_s']*1e6:.1f} us extra per tensor")
    for size, rows in result["pageable_side_stream"].items():
        for case, r in rows.items():
            print(f"pageable {size:>7} {case:<17} host {r['host_s']*1e3:8.3f} ms  gpu {r['gpu_s']*1e3:8.3f} ms")


if __name__ == "__main__":
    main()
