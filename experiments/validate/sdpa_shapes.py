"""Host cost of torch's scaled_dot_product_attention at a sequence length it has not run before,
per backend, at decode shapes (one query token, GQA as HF Qwen3 calls it).

    python3 sdpa_shapes.py --heads 32 --kv-heads 8 --head-dim 128 --out sdpa_shapes.json

For each backend (the default choice first), for 8 new key lengths: the wall time of the first call
at that length and of a second call at the same length, both followed by a device sync. Backends
that cannot run these shapes are reported as such.
"""
import argparse
import json
import statistics
import time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel


def one_call(q, k, v):
    t = time.perf_counter()
    torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    torch.cuda.synchronize()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    backends = [("default", None), ("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION),
                ("efficient", SDPBackend.EFFICIENT_ATTENTION), ("math", SDPBackend.MATH)]
    result = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, heads=a.heads, kv_heads=a.kv_heads,
                  head_dim=a.head_dim, backends={})
    base = 1000
    for name, backend in backends:
        base += 100  # lengths no earlier backend has run
        first, again = [], []
        try:
            for length in range(base, base + 8):
                q = torch.randn(1, a.heads, 1, a.head_dim, device="cuda", dtype=torch.bfloat16)
                k = torch.randn(1, a.kv_heads, length, a.head_dim, device="cuda", dtype=torch.bfloat16)
                v = torch.randn_like(k)
                torch.cuda.synchronize()
                if backend is None:
                    first.append(one_call(q, k, v))
                    again.append(one_call(q, k, v))
                else:
                    with sdpa_kernel([backend]):
                        first.append(one_call(q, k, v))
                        again.append(one_call(q, k, v))
        except RuntimeError as e:
            result["backends"][name] = dict(error=str(e).splitlines()[0][:200])
            print(f"{name:>9}: cannot run these shapes ({str(e).splitlines()[0][:100]})", flush=True)
            continue
        result["backends"][name] = dict(first_call_s=first, second_call_s=again)
        print(f"{name:>9}: first call at a new length median {statistics.median(first) * 1e3:8.3f} ms, "
              f"second call {statistics.median(again) * 1e3:8.3f} ms", flush=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
