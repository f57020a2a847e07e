"""How many allocations a Hugging Face decode token makes under seed 000's allocator (one cudaMallocManaged per tensor,
cudaFree per free, experiments/validate/managed_allocator.cu) and the host time inside those calls, per token, with
the model fitting the GPU (no balloon, mode 1: no advice); with --sizes, the second decode token's calls in order
(sizes allocated and freed), to set beside model/inference/inference_allocations' sequence. tiersim prices a per-tensor allocator's calls per tensor of
its trace (managed_memory.alloc_call, free_call): this measures what PyTorch really calls, a runtime fact, not a
validation row.

  python3 experiments/um/allocator_census.py --model traces/models/qwen3-8b.json --allocator-so X.so --out census.jsonl
"""
import argparse
import ctypes
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "validate"))
import torch  # noqa: E402

import decode_latency as dl  # noqa: E402


class Census:
    """decode_latency's recorder: the allocator's counters after the prefill and after each token."""

    def __init__(self, lib):
        self.lib, self.marks = lib, []

    def read(self):
        a, f = ctypes.c_size_t(), ctypes.c_size_t()
        sa, sf = ctypes.c_double(), ctypes.c_double()
        self.lib.tiersim_census(ctypes.byref(a), ctypes.byref(f), ctypes.byref(sa), ctypes.byref(sf))
        return a.value, f.value, sa.value, sf.value

    def start(self, _):
        self.marks = [self.read()]

    def advance(self, _):
        self.marks.append(self.read())
        if len(self.marks) == 3:    # after the prefill and the warm-up token: log the next token's calls
            self.lib.tiersim_size_log(1)
        elif len(self.marks) == 4:
            self.lib.tiersim_size_log(0)

    def stop(self):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--allocator-so", required=True)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=6)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sizes", action="store_true",
                    help="also record the second decode token's calls in order: sizes allocated (+) and freed (-)")
    a = ap.parse_args()
    name, cfg = dl.load_config(a.model)
    lib = ctypes.CDLL(a.allocator_so)
    lib.tiersim_census.argtypes = [ctypes.POINTER(ctypes.c_size_t)] * 2 + [ctypes.POINTER(ctypes.c_double)] * 2
    lib.tiersim_size_log.argtypes = [ctypes.c_int]
    lib.tiersim_size_log_read.argtypes = [ctypes.POINTER(ctypes.c_longlong), ctypes.c_size_t]
    lib.tiersim_size_log_read.restype = ctypes.c_size_t
    alloc = torch.cuda.memory.CUDAPluggableAllocator(a.allocator_so, "tiersim_alloc", "tiersim_free")
    torch.cuda.memory.change_current_allocator(alloc)
    model = dl.build(cfg)
    census = Census(lib)
    _, warm, times = dl.decode(model, cfg.vocab_size, a.prompt, a.tokens, 1, recorder=census)
    m = census.marks  # [start, after prefill, after each token]
    per_token = [dict(allocs=m[i + 1][0] - m[i][0], frees=m[i + 1][1] - m[i][1],
                      alloc_host_s=m[i + 1][2] - m[i][2], free_host_s=m[i + 1][3] - m[i][3])
                 for i in range(2, len(m) - 1)]  # the tokens after the warm-up one
    cap = 1 << 16
    buf = (ctypes.c_longlong * cap)()
    n = lib.tiersim_size_log_read(buf, cap)
    if n > cap:
        raise SystemExit(f"size log: {n} calls, more than the {cap} read")
    row = dict(model=name, prompt=a.prompt, tokens=a.tokens, token_s=times, per_token=per_token,
               prefill_allocs=m[1][0] - m[0][0], gpu=torch.cuda.get_device_name(), torch=torch.__version__)
    if a.sizes:
        row["second_token_calls"] = list(buf[:n])  # allocation sizes (+) and frees (-) in call order
    with open(a.out, "a") as f:
        f.write(json.dumps(row) + "\n")
    t = per_token[-1]
    print(f"{name}: {t['allocs']} allocations and {t['frees']} frees a token, {1e3 * t['alloc_host_s']:.1f} ms in "
          f"cudaMallocManaged, {1e3 * t['free_host_s']:.1f} ms in cudaFree; tokens " + " ".join(f"{x:.3f}" for x in times))


if __name__ == "__main__":
    main()
