"""tiersim against ComfyUI-style partial loading measured on a lent GPU (experiments/validate/comfyui_decode.py).

Each measured row ran the partial load ComfyUI's own code decided for a card of that size (the fixture's
modules); tiersim predicts it with its own comfy.lowvram rule given the same free VRAM (the last column
checks that the offloaded bytes agree) and the comfyui preset's path (--offload copy:pinned,stream: pinned
casts on two offload streams), on the shipped h100-measured + pytorch-hf-h100 (nothing calibrated on
these rows). Writes results/frameworks/comfyui/table.md.
  /usr/bin/python3 experiments/frameworks/comfyui_compare.py   (after building)
"""
import os

from compare_runs import ROOT, write_table

HERE = os.path.join(ROOT, "results", "frameworks", "comfyui")


def strategy(r):
    return ["--placement", f"comfy.lowvram:free={r['vram_free']} B", "--offload", "copy:pinned,stream"]


def label(r):
    return f"{r['model']} {r['case']} ({r['offloaded_bytes'] / 2**30:.2f} GiB off)"


if __name__ == "__main__":
    # Call 1 (results/frameworks/comfyui): five partial loads, cudaMallocAsync as ComfyUI sets it.
    write_table(HERE, "comfyui_decode.jsonl", label, strategy, lambda r: r["offloaded_bytes"])
    # Call 2, another machine of the same kind: Qwen3-8B's full load (linux-24g: resident) first, then the
    # partial loads, linux-16g twice; and PyTorch's native allocator for two of them (call2/native).
    write_table(os.path.join(HERE, "call2"), "comfyui_decode.jsonl", label, strategy, lambda r: r["offloaded_bytes"])
    write_table(os.path.join(HERE, "call2", "native"), "comfyui_decode.jsonl", label, strategy,
                lambda r: r["offloaded_bytes"])
