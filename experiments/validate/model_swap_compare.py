"""tiersim's price of ComfyUI's swap between Wan 2.2 A14B's experts against the moves measured on an H100
(experiments/validate/model_swap.py -> results/validation/model-swap/model_swap.jsonl).

One swap is what a sampler node does on a card that holds one fp8 expert at a time: the other expert unloaded whole
(model.to("cpu") into fresh pageable memory) and its own loaded whole (leaf by leaf). tiersim prices it in `sim run
--sampler-job` (pipeline/expert_job, pipeline/comfy_stage): the next video's low-noise node on h100-measured with
24.5 GB free (ComfyUI's own code evicts the other expert whole there: tests/fixtures/comfyui_expert_job.jsonl), 832x480
x 81 frames. Writes results/validation/model-swap/table.md.

  /usr/bin/python3 experiments/validate/model_swap_compare.py   (after building)
"""
import json
import os
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.environ.get("TIERSIM_SIM", os.path.join(ROOT, "build", "bin", "sim"))
HERE = os.path.join(ROOT, "results", "validation", "model-swap")
ARGS = ["--model", "traces/models/wan2.2-t2v-a14b.json", "--dtype", "fp8", "--steps", "2", "--cfg", "3.5",
        "--hw", "h100-measured", "--set", "gpu.memory=25052400000 B", "--policy", "resident", "--sampler-job"]


def main():
    rows = [json.loads(line) for line in open(os.path.join(HERE, "model_swap.jsonl"))]
    out = json.loads(subprocess.run([SIM, "--json"] + ARGS, capture_output=True, text=True, check=True, cwd=ROOT).stdout)
    node = out["sampler_job"]["next_video"]["low_noise_sampler"]
    expert = out["sampler_job"]["expert_bytes"]
    assert node["h2d_bytes"] == expert and node["d2h_bytes"] == expert, node
    swaps = [sum(r["seconds"] for r in rows if r["repeat"] == k) for k in sorted({r["repeat"] for r in rows})]
    measured = statistics.median(swaps)
    err = (node["transfer_seconds"] - measured) / measured
    by = {d: [r["seconds"] for r in rows if r["direction"] == d] for d in ("d2h", "h2d")}
    lines = ["# ComfyUI's swap between Wan 2.2 A14B's experts on an H100: tiersim against measured", "",
             f"Measured: `model_swap.jsonl` ({rows[0]['leaves']} leaves, {rows[0]['bytes'] / 1e9:.2f} GB of fp8 weights a "
             f"model; tiersim's expert {expert / 1e9:.2f} GB).", "",
             "| move | measured (each repeat) | median |", "|---|---|---|",
             f"| unload: model.to(\"cpu\"), fresh pageable memory | {' / '.join(f'{s:.2f}' for s in by['d2h'])} s | "
             f"{statistics.median(by['d2h']):.2f} s |",
             f"| load: each leaf .to(\"cuda\"), largest first | {' / '.join(f'{s:.2f}' for s in by['h2d'])} s | "
             f"{statistics.median(by['h2d']):.2f} s |",
             f"| one swap (both) | {' / '.join(f'{s:.2f}' for s in swaps)} s | {measured:.2f} s |", "",
             f"tiersim, one swap (`sim {' '.join(ARGS)}`, the next video's low-noise node: "
             f"{node['h2d_bytes'] / 1e9:.2f} GB in, {node['d2h_bytes'] / 1e9:.2f} GB out): "
             f"**{node['transfer_seconds']:.3f} s, {100 * err:+.1f}%** against the median swap.", ""]
    open(os.path.join(HERE, "table.md"), "w").write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
