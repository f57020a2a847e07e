"""GPU time of a callable by CUDA events, shared by the calibration scripts that run on the lent GPU."""
import statistics

import torch


def median_seconds(fn, warmup=5, reps=20):
    """Runs fn `warmup` times, then times `reps` runs one by one (an event before and after each); the median."""
    return statistics.median(all_seconds(fn, warmup, reps))


def all_seconds(fn, warmup=5, reps=20, setup=None):
    """As median_seconds, every timed run's seconds. `setup`, when given, runs before every run (the warm-up ones too),
    untimed: what each run needs made new (a fresh input)."""
    for _ in range(warmup):
        if setup:
            setup()
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        if setup:
            setup()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    return times
