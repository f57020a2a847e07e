"""tiersim against DisTorch-style offload measured on a lent GPU (experiments/validate/distorch_decode.py).

Each measured row ran the device map DisTorch's own allocation code produced on that machine (written
beside the results); tiersim predicts that placement (--placement device_map:file=...) with per-module
casts from pageable memory on the compute stream (--offload copy:pageable: the casts the harness does),
on the shipped h100-measured + pytorch-hf-h100 (nothing calibrated on these rows). Writes table.md; the
rows measured with current ComfyUI's two offload streams (distorch_decode_offload.jsonl) against the
presets' --offload copy:pageable,stream go to table_offload.md.
  /usr/bin/python3 experiments/frameworks/distorch_compare.py   (after building)
"""
import os

from compare_runs import ROOT, write_table

HERE = os.path.join(ROOT, "results", "frameworks", "distorch")

def strategy(offload):
    return lambda r: ["--placement", "device_map:file=" + os.path.join(HERE, r["device_map_file"]), "--offload", offload]


if __name__ == "__main__":
    write_table(HERE, "distorch_decode.jsonl", lambda r: f"`{r['allocation']}`", strategy("copy:pageable"),
                lambda r: r["offloaded_bytes"])
    write_table(HERE, "distorch_decode_offload.jsonl", lambda r: f"`{r['allocation']}`, offload streams",
                strategy("copy:pageable,stream"), lambda r: r["offloaded_bytes"], "table_offload.md")
