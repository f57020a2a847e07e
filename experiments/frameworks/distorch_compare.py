"""tiersim against DisTorch-style offload measured on a lent GPU (experiments/validate/distorch_decode.py).

Each measured row ran the device map DisTorch's own allocation code produced on that machine (written
beside the results); tiersim predicts that placement (--placement device_map:file=...) with per-module
casts from pageable memory on the compute stream (--offload copy:pageable: the casts the harness does),
on the shipped h100-measured + pytorch-hf-h100 (nothing calibrated on these rows). Writes table.md.
  /usr/bin/python3 experiments/frameworks/distorch_compare.py   (after building)
"""
import os

from compare_runs import ROOT, write_table

HERE = os.path.join(ROOT, "results", "frameworks", "distorch")

if __name__ == "__main__":
    write_table(HERE, "distorch_decode.jsonl", lambda r: f"`{r['allocation']}`",
                lambda r: ["--placement", "device_map:file=" + os.path.join(HERE, r["device_map_file"]),
                           "--offload", "copy:pageable"],
                lambda r: r["offloaded_bytes"])
