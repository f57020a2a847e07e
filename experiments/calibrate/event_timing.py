"""GPU time of a callable by CUDA events, shared by the calibration scripts that run on the lent GPU."""
import statistics

import torch


def median_seconds(fn, warmup=5, reps=20):
    """Runs fn `warmup` times, then times `reps` runs one by one (an event before and after each); the median."""
    return statistics.median(all_seconds(fn, warmup, reps))


def all_seconds(fn, warmup=5, reps=20):
    """As median_seconds, every timed run's seconds."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    return times
