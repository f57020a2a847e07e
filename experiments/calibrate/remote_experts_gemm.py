"""How fast the experts' matrix products read weights that stay in host memory (managed, PreferredLocation=CPU +
AccessedBy=GPU, through managed_allocator.cu as the moe-um validation allocates them), against the same products
on weights in GPU memory: one Qwen3-30B-A3B layer's experts (128 x fused gate_up [1536, 2048] and down
[2048, 768], bf16, random), T tokens routed top-8 (seeded; over all 128 experts, or over 32 of them as the
validation's later layers route), run as transformers 5 runs them: torch._grouped_mm over the sorted rows (its
default) and F.linear per expert hit (eager). A diagnosis (results/validation/moe-um, the prefill rows), not a
calibration: tiersim's rates come from tiersim_calib's remote_gemm.

  python3 experiments/calibrate/remote_experts_gemm.py --allocator-so /tmp/tiersim_managed_alloc.so --out X.jsonl
"""
import argparse
import ctypes
import json
import sys

import torch
import torch.nn.functional as F

from event_timing import median_seconds

E, H, I, K = 128, 2048, 768, 8




def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--allocator-so", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    lib = ctypes.CDLL(a.allocator_so)
    torch.cuda.memory.change_current_allocator(
        torch.cuda.memory.CUDAPluggableAllocator(a.allocator_so, "tiersim_alloc", "tiersim_free"))
    lib.tiersim_prefetch_to_host.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    weights = {}
    for where, advice in (("host", 2), ("gpu", 0)):
        lib.tiersim_set_advice(ctypes.c_int(advice))
        gu = torch.randn(E, 2 * I, H, dtype=torch.bfloat16, device="cuda")
        dn = torch.randn(E, H, I, dtype=torch.bfloat16, device="cuda")
        torch.cuda.synchronize()
        if where == "host":
            for t in (gu, dn):
                if lib.tiersim_prefetch_to_host(ctypes.c_void_p(t.data_ptr()), t.numel() * 2) != 0:
                    sys.exit("prefetch to host failed")
        weights[where] = (gu, dn)
    lib.tiersim_set_advice(ctypes.c_int(0))
    if lib.tiersim_failed():
        sys.exit("a CUDA call in the managed allocator failed")
    gen = torch.Generator().manual_seed(7)
    out = open(a.out, "w")
    for tokens in (1, 8, 32, 128, 512):
        for pool in (E, 32):
            ids = torch.stack([torch.randperm(pool, generator=gen)[:K] for _ in range(tokens)]).flatten()
            counts = torch.bincount(ids, minlength=E)
            hit = [e for e in range(E) if counts[e] > 0]
            offs = torch.cumsum(counts, 0).to(torch.int32).cuda()
            x = torch.randn(tokens * K, H, dtype=torch.bfloat16, device="cuda")
            starts = [0] + torch.cumsum(counts, 0).tolist()
            for where, (gu, dn) in weights.items():
                def grouped():
                    h = torch._grouped_mm(x, gu.transpose(-2, -1), offs=offs)
                    torch._grouped_mm(h[:, :I].contiguous(), dn.transpose(-2, -1), offs=offs)

                def eager():
                    for e in hit:
                        h = F.linear(x[starts[e]:starts[e + 1]], gu[e])
                        F.linear(h[:, :I], dn[e])
                for impl, fn in (("grouped_mm", grouped), ("eager", eager)):
                    s = median_seconds(fn, warmup=2, reps=7)
                    row = dict(tokens=tokens, pool=pool, experts_hit=len(hit), weights=where, impl=impl, seconds=s,
                               weight_bytes=len(hit) * 3 * I * H * 2, gpu=torch.cuda.get_device_name(),
                               torch=torch.__version__)
                    row["gb_per_s"] = row["weight_bytes"] / s / 1e9
                    print(json.dumps(row), flush=True)
                    out.write(json.dumps(row) + "\n")
    if lib.tiersim_failed():
        sys.exit("a CUDA call in the managed allocator failed")


if __name__ == "__main__":
    main()
