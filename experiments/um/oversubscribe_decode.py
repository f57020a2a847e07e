"""Decode of a Hugging Face dense decoder in CUDA managed memory past the GPU's memory, as seed 000's allocator
runs it: every tensor from its own cudaMallocManaged through a CUDAPluggableAllocator (no caching, cudaFree per
tensor; experiments/validate/managed_allocator.cu), the mode's advice on every allocation, modes cumulative:

  mode 1  cudaMallocManaged, no advice
  mode 2  + cudaMemAdviseSetPreferredLocation = CPU
  mode 3  + cudaMemAdviseSetReadMostly (on top of mode 2, as the seed's code applies them)
  mode 4  PreferredLocation = CPU + AccessedBy = GPU (not one of the seed's modes: the advice that spares the
          mapping faults; numbered after them here)

The GPU is shrunk first with a device-memory balloon (tiersim_balloon: a plain cudaMalloc of all free memory but
--leave-gib, outside PyTorch, before any managed allocation), so that the model oversubscribes what is left.
Safety: the managed budget is 60% of host memory (MemTotal) and a model whose weights would pass it is refused
before anything is allocated; the caller bounds each run with `timeout`.

Weights are random (built by decode_latency.build, on the GPU, with no advice unless --build-advice says; then each
weight's range gets the mode's advice and is prefetched to host memory, where a freshly loaded checkpoint is). The
default build leaves GPU pages behind that a mode-2 or mode-4 decode's small allocations can land on (their tokens then
alternate fast and slow at long prompts: results/validation/um-oversubscription/diagnosis-s32); `--build-advice 2`
builds under PreferredLocation=CPU, as a checkpoint loaded through seed 000's allocator is: use it for new rows of
those modes (the lease script's parts before session 32 ran without it); every later allocation (KV
cache, activations) gets the advice at cudaMallocManaged, as the seed's allocator does. Batch 1, bf16, greedy, a
host sync per token. One JSON line per run: the per-token seconds in order (the pattern at mild oversubscription),
the GPU memory the balloon left and what was free before the decode.

  python3 experiments/um/oversubscribe_decode.py --model traces/models/qwen3-8b.json --allocator-so X.so \
      --mode 1 --leave-gib 12 --tokens 4 --warmup 1 --out rows.jsonl
"""
import argparse
import ctypes
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "validate"))
import torch  # noqa: E402

import decode_latency as dl  # noqa: E402

# The allocator's advice codes (managed_allocator.cu g_advice) for each mode.
ADVICE = {1: 0, 2: 1, 3: 4, 4: 2}
MODE_NAMES = {1: "managed", 2: "managed+PreferredLocation=CPU", 3: "managed+PreferredLocation=CPU+ReadMostly",
              4: "managed+PreferredLocation=CPU+AccessedBy=GPU"}


def host_memory_bytes():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    sys.exit("no MemTotal in /proc/meminfo")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--allocator-so", required=True)
    ap.add_argument("--mode", type=int, choices=sorted(ADVICE), required=True)
    ap.add_argument("--leave-gib", type=float, required=True, help="GPU memory the balloon leaves free (GiB)")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--label", default="", help="free text recorded with the row")
    ap.add_argument("--out", required=True)
    ap.add_argument("--activation-advice", type=int, choices=sorted(ADVICE),
                    help="diagnosis: the advice of this mode on every allocation after the weights (KV cache, "
                         "activations) instead of the mode's own")
    ap.add_argument("--build-advice", type=int, choices=sorted(ADVICE),
                    help="diagnosis: the advice of this mode on every allocation while the weights are built (default "
                         "none: ReadMostly at allocation crawls), as a checkpoint loaded through the seed's allocator has")
    ap.add_argument("--profile", help="diagnosis: append where each step's GPU time went (step_profile.py) to this "
                                      "JSON-lines file; the profiler adds host time, so the row is not a timing")
    a = ap.parse_args()

    name, cfg = dl.load_config(a.model)
    lib = ctypes.CDLL(a.allocator_so)
    for f, res, args in [("tiersim_set_budget", ctypes.c_size_t, [ctypes.c_size_t]),
                         ("tiersim_balloon", ctypes.c_size_t, [ctypes.c_size_t]),
                         ("tiersim_balloon_bytes", ctypes.c_size_t, []), ("tiersim_in_use", ctypes.c_size_t, []),
                         ("tiersim_advise", ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]),
                         ("tiersim_prefetch_to_host", ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t])]:
        getattr(lib, f).restype = res
        getattr(lib, f).argtypes = args
    host = host_memory_bytes()
    budget = int(host * 0.6)
    # Refuse before allocating: weights (bf16) plus a generous 10% for KV cache and activations.
    params = cfg.vocab_size * cfg.hidden_size * (1 if cfg.tie_word_embeddings else 2) + cfg.num_hidden_layers * (
        cfg.hidden_size * (cfg.num_attention_heads + 2 * cfg.num_key_value_heads) * cfg.head_dim
        + cfg.num_attention_heads * cfg.head_dim * cfg.hidden_size + 3 * cfg.hidden_size * cfg.intermediate_size)
    if params * 2 * 1.1 > budget:
        sys.exit(f"{name}: ~{params * 2 / 2**30:.1f} GiB of weights would pass 60% of host memory ({budget / 2**30:.1f} GiB)")
    lib.tiersim_set_budget(budget)

    # The allocator first: PyTorch refuses to swap it once CUDA is initialised (torch.cuda.mem_get_info does).
    alloc = torch.cuda.memory.CUDAPluggableAllocator(a.allocator_so, "tiersim_alloc", "tiersim_free")
    torch.cuda.memory.change_current_allocator(alloc)
    free0, total = torch.cuda.mem_get_info()
    left = lib.tiersim_balloon(int(a.leave_gib * 2**30))
    if left == 0:
        sys.exit("the balloon failed")
    balloon = lib.tiersim_balloon_bytes()
    print(f"balloon {balloon / 2**30:.2f} GiB; {left / 2**30:.2f} GiB left of {total / 2**30:.1f}", flush=True)

    # Build with no advice (ReadMostly at allocation crawls) unless told otherwise.
    lib.tiersim_set_advice(ctypes.c_int(ADVICE[a.build_advice] if a.build_advice else 0))
    model = dl.build(cfg)
    weight_bytes = 0
    advice = ADVICE[a.mode]
    for p in model.parameters():
        n = p.numel() * p.element_size()
        weight_bytes += n
        if advice and lib.tiersim_advise(ctypes.c_void_p(p.data_ptr()), n, advice, 0) != 0:
            sys.exit("cudaMemAdvise on a weight failed")
        if lib.tiersim_prefetch_to_host(ctypes.c_void_p(p.data_ptr()), n) != 0:
            sys.exit("prefetch to host failed")
    later = ADVICE[a.activation_advice] if a.activation_advice else advice
    lib.tiersim_set_advice(ctypes.c_int(later))  # every later allocation: the mode's advice, as the seed's
    free_before = torch.cuda.mem_get_info()[0]
    print(f"{name} mode {a.mode}: {weight_bytes / 2**30:.2f} GiB of weights in host memory; "
          f"{free_before / 2**30:.2f} GiB free on the GPU", flush=True)
    recorder = None
    if a.profile:
        from step_profile import StepProfiler
        recorder = StepProfiler()
    prefill, warm_up, times = dl.decode(model, cfg.vocab_size, a.prompt, a.tokens, a.warmup, recorder)
    torch.cuda.synchronize()
    if lib.tiersim_failed():
        sys.exit("a CUDA call in the managed allocator failed")
    row = dict(model=name, mode=a.mode, advice=MODE_NAMES[a.mode], advise="all allocations", leave_gib=a.leave_gib,
               gpu_left_bytes=int(left), balloon_bytes=int(balloon), gpu_free_before_decode=int(free_before),
               gpu_total_bytes=int(total), gpu_free_at_start=int(free0), weight_bytes=int(weight_bytes),
               managed_bytes_after=int(lib.tiersim_in_use()), oversubscription=weight_bytes / left,
               prompt=a.prompt, tokens=a.tokens, warmup=a.warmup, prefill_s=prefill, warmup_s=warm_up,
               decode_s=times, decode_median_s=statistics.median(times), label=a.label,
               gpu=torch.cuda.get_device_name(), torch=torch.__version__, host_memory_bytes=host,
               activation_advice=a.activation_advice, build_advice=a.build_advice, profiled=bool(a.profile))
    with open(a.out, "a") as f:
        f.write(json.dumps(row) + "\n")
    if recorder:
        with open(a.profile, "a") as f:
            f.write(json.dumps(dict(model=name, mode=a.mode, activation_advice=a.activation_advice,
                                    leave_gib=a.leave_gib, prompt=a.prompt, label=a.label,
                                    steps=recorder.summary())) + "\n")
    print(f"{name} mode {a.mode} leave {a.leave_gib} GiB (x{row['oversubscription']:.2f}): prefill {prefill:.3f} s, "
          f"tokens " + " ".join(f"{t:.3f}" for t in warm_up + times), flush=True)


if __name__ == "__main__":
    main()
