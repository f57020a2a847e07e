"""The events of a finished torch.profiler session, as its Chrome trace lists them (kineto: cat kernel, gpu_memcpy,
gpu_memset for the GPU; ts and dur in microseconds). Shared by the scripts that count and time kernels."""
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
