"""tiersim_calib's raw CSV (the rows tiersim_fit --extra reads), as the calibration scripts on the lent GPU write it:
the machine facts first, then one row per measurement with its median, min and max seconds."""
import datetime
import statistics
import subprocess

import torch


def write_raw_csv(path, rows):
    """rows: (benchmark, variant, work, work_unit, seconds of every timed repetition)."""
    driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                            text=True).stdout.strip().splitlines()
    with open(path, "w") as f:
        f.write("# measured_at: %s\n" % datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
        f.write("# gpu_name: %s\n# gpu_count: %d\n" % (torch.cuda.get_device_name(0), torch.cuda.device_count()))
        f.write("# nvidia_driver: %s\n# torch: %s\n" % (driver[0] if driver else "unknown", torch.__version__))
        f.write("benchmark,variant,work,work_unit,repeats,median_s,min_s,max_s\n")
        for benchmark, variant, work, unit, times in rows:
            f.write("%s,%s,%d,%s,%d,%.9e,%.9e,%.9e\n" % (benchmark, variant, work, unit, len(times),
                                                       statistics.median(times), min(times), max(times)))
