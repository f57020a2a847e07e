"""tiersim against FLUX.1-dev iterations measured on a lent H100 (experiments/validate/dit_iteration.py).

Each measured row ran ComfyUI's Flux structure (random bf16 weights) resident, or with the leaf modules
ComfyUI-MultiGPU's own DisTorch allocation put on the cpu (its device map is beside the results) cast to
the GPU on the compute stream when their forward runs, from pageable or pinned host memory (older
ComfyUI's casts). tiersim predicts exactly that: `--model traces/models/flux.1-dev.json --resolution WxH`
with `--placement device_map:file=...` and `--offload copy:host=pageable|pinned`, on the shipped
h100-measured hardware and pytorch-hf-h100 runtime profiles (nothing calibrated on these rows). The
last column also places each row with tiersim's own DisTorch rule (`--placement distorch.bytes:offload=X GiB`
with the run's device totals): the bytes it moves to the cpu should equal DisTorch's.
Writes results/validation/diffusion/table.md.

  /usr/bin/python3 experiments/validate/dit_compare.py   (after building)
"""
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.environ.get("TIERSIM_SIM", os.path.join(ROOT, "build", "bin", "sim"))
HERE = os.path.join(ROOT, "results", "validation", "diffusion")
MODEL = "traces/models/flux.1-dev.json"


def command(row):
    args = ["--model", MODEL, "--resolution", row["resolution"], "--text-tokens", str(row["text_tokens"]),
            "--steps", "3", "--hw", "h100-measured", "--runtime", "pytorch-hf-h100"]
    if row["device_map_file"] is None:
        return args + ["--policy", "resident"]
    map_file = os.path.relpath(os.path.join(HERE, row["device_map_file"]), ROOT)
    return args + ["--placement", "device_map:file=" + map_file, "--memory", "device",
                   "--offload", "copy:host=" + row["host_memory"]]


def own_distorch_bytes(row):
    """cpu weight bytes of tiersim's distorch.bytes rule for the row's virtual VRAM (#cuda:0;X;cpu)."""
    if row["allocation"] == "none":
        return 0
    vram = row["allocation"].split(";")[1]
    args = [SIM, "--json", "--model", MODEL, "--resolution", row["resolution"], "--steps", "1", "--hw", "h100-measured",
            "--set", f"gpu.memory={row['totals']['cuda:0']} B", "--set", f"host.memory={row['totals']['cpu']} B",
            "--placement", f"distorch.bytes:offload={vram}GiB", "--memory", "device", "--offload", "copy"]
    out = json.loads(subprocess.run(args, capture_output=True, text=True, check=True, cwd=ROOT).stdout)
    return out["memory_per_tier"].get("cpu", {}).get("weights_bytes", 0)


def main():
    rows = [json.loads(line) for line in open(os.path.join(HERE, "dit_iteration.jsonl"))]
    lines = ["| resolution | offload (DisTorch) | host memory | measured | predicted | error | "
             "cuda:0 peak allocated: run / tiersim | offloaded bytes: run / tiersim (map) / tiersim's distorch.bytes |",
             "|---|---|---|---|---|---|---|---|"]
    errors, mem_errors = [], []
    for r in rows:
        args = command(r)
        out = json.loads(subprocess.run([SIM, "--json"] + args, capture_output=True, text=True, check=True,
                                        cwd=ROOT).stdout)
        predicted = out["step_kinds"]["iteration"]["median_seconds"]
        cpu_bytes = out["memory_per_tier"].get("cpu", {}).get("weights_bytes", 0)
        # tiersim's cuda:0 peak less the driver's reserve = what PyTorch allocates (max_memory_allocated).
        reserve = float(out["inputs"]["hardware"]["gpu"]["reserved"].split()[0])
        allocated = out["memory_per_tier"]["cuda:0"]["peak_bytes"] - reserve
        mem_errors.append(abs(allocated - r["peak_bytes"]) / r["peak_bytes"])
        err = (predicted - r["median_s"]) / r["median_s"]
        errors.append(abs(err))
        alloc = "none" if r["allocation"] == "none" else f"`{r['allocation']}`"
        lines.append(f"| {r['resolution']} | {alloc} | {r['host_memory']} | {r['median_s']:.3f} s | {predicted:.3f} s | "
                     f"{100 * err:+.1f}% | {r['peak_bytes'] / 1e9:.2f} / {allocated / 1e9:.2f} GB | {r['offloaded_bytes']} / {cpu_bytes} / {own_distorch_bytes(r)} |")
    lines += ["", f"{len(errors)} rows, mean absolute error {100 * sum(errors) / len(errors):.1f}%, "
                  f"worst {100 * max(errors):.1f}%; cuda:0 peak allocated (torch.cuda.max_memory_allocated against "
                  f"tiersim's peak less the profile's reserve): mean absolute error "
                  f"{100 * sum(mem_errors) / len(mem_errors):.1f}%, worst {100 * max(mem_errors):.1f}%.", "",
              "Each row: `sim " + " ".join(command(rows[-1])) + "` (that row's resolution, map and host memory)."]
    open(os.path.join(HERE, "table.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
