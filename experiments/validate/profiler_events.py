"""The events of a finished torch.profiler session: as its Chrome trace lists them (kineto: cat kernel, gpu_memcpy,
gpu_memset for the GPU; ts and dur in microseconds), or summed by name. Shared by the scripts that count and time
kernels."""
import json
import os
import tempfile


def chrome_events(prof):
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    finally:
        os.remove(path)
    return trace["traceEvents"] if isinstance(trace, dict) else trace


def kernels_by_name(prof, device_only=True):
    """Every device kernel, memcpy and memset of the session by name, [name, count, total device microseconds], the
    longest first, with their totals: {"kernels_total", "device_us_total", "kernels"}. A device event's time range is the
    kernel's own. device_only=False: every event (a CPU run's ops, nested ranges counted in each)."""
    table = {}
    for e in prof.events():
        if device_only and not str(getattr(e, "device_type", "")).endswith("CUDA"):
            continue
        k = table.setdefault(e.name, [0, 0.0])
        k[0] += 1
        k[1] += e.time_range.elapsed_us()
    kernels = sorted(([n, c, round(t, 1)] for n, (c, t) in table.items()), key=lambda r: -r[2])
    return {"kernels_total": sum(r[1] for r in kernels), "device_us_total": round(sum(r[2] for r in kernels), 1),
            "kernels": kernels}
