"""tiersim against the Wan 2.1 VAE's decode measured on a lent H100 (experiments/validate/wan_vae_decode.py, run by
run_wan_vae_lease.sh: ComfyUI a125cd84's own comfy/ldm/wan/vae.py, bf16, random weights): seconds of the GPU part (the
latent in, WanVAE.decode) and peak memory allocated, at Wan's 480p (1-81 frames) and 720p (17) and Qwen-Image's single
frames (1024, 1328). tiersim predicts each with `sim --model traces/models/wan2.1-vae.json --resolution WxH --frames F`
on the shipped h100-measured hardware and pytorch-hf-h100 runtime profiles, resident (prefill_seconds; cuda:0's peak less
the profile's reserve; the allocator replay's reserved). The convolutions' rates come from a separate calibration at other sizes
(results/calib/h100-convolution); nothing is fitted to these rows. Writes results/validation/wan-vae/table.md.

  /usr/bin/python3 experiments/validate/wan_vae_compare.py   (after building)
"""
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.environ.get("TIERSIM_SIM", os.path.join(ROOT, "build", "bin", "sim"))
HERE = os.path.join(ROOT, "results", "validation", "wan-vae")


def predict(row):
    out = subprocess.run([SIM, "--model", "traces/models/wan2.1-vae.json", "--resolution", f"{row['width']}x{row['height']}",
                          "--frames", str(row["frames"]), "--hw", "h100-measured", "--runtime", "pytorch-hf-h100",
                          "--policy", "resident", "--json"], cwd=ROOT, capture_output=True, text=True, check=True)
    j = json.loads(out.stdout)
    # tiersim's cuda:0 peak less the profile's reserve (the CUDA context) = what PyTorch allocates; the allocator
    # replay's reserved for the decode.
    reserve = float(j["inputs"]["hardware"]["gpu"]["reserved"].split()[0])
    mem = j["pytorch_memory"]
    return (j["prefill_seconds"], j["memory_per_tier"]["cuda:0"]["peak_bytes"] - reserve,
            mem.get("iteration_peak_reserved_bytes"))


def main():
    rows = [json.loads(line) for line in open(os.path.join(HERE, "wan_vae_decode.jsonl"))]
    lines = ["# The Wan 2.1 VAE's decode on an H100: tiersim against ComfyUI's own decoder", "",
             "Measured: `wan_vae_decode.jsonl` (`OUT=$OUT bash experiments/validate/run_wan_vae_lease.sh`, one H100 call; "
             "ComfyUI a125cd84's comfy/ldm/wan/vae.py run as it is, bf16, random weights; median of 3 after 1 warm-up). "
             "Predicted: `/usr/bin/python3 experiments/validate/wan_vae_compare.py` (h100-measured, pytorch-hf-h100, "
             "resident; convolution rates calibrated apart, results/calib/h100-convolution).", "",
             "| size | latent frames | measured s | predicted s | error | peak allocated GB: measured | predicted | error "
             "| reserved GB: measured | predicted | error |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    t_err, m_err, r_err = [], [], []
    for r in rows:
        if r.get("tiny"):
            continue
        s, peak, reserved = predict(r)
        et = (s - r["median_s"]) / r["median_s"]
        em = (peak - r["peak_bytes"]) / r["peak_bytes"]
        er = (reserved - r["reserved_bytes"]) / r["reserved_bytes"]
        t_err.append(et)
        m_err.append(em)
        r_err.append(er)
        lines.append(f"| {r['width']}x{r['height']}x{r['frames']} | {r['latent_frames']} | {r['median_s']:.3f} | {s:.3f} | "
                     f"{100 * et:+.1f}% | {r['peak_bytes'] / 1e9:.2f} | {peak / 1e9:.2f} | {100 * em:+.1f}% | "
                     f"{r['reserved_bytes'] / 1e9:.2f} | {reserved / 1e9:.2f} | {100 * er:+.1f}% |")
    mean = lambda v: sum(abs(x) for x in v) / len(v)  # noqa: E731
    lines += ["", f"{len(t_err)} rows: seconds mean |error| {100 * mean(t_err):.1f}% (worst "
              f"{100 * max(t_err, key=abs):+.1f}%); peak allocated {100 * mean(m_err):.1f}% (worst "
              f"{100 * max(m_err, key=abs):+.1f}%); reserved (the allocator's replay of every decoder call) "
              f"{100 * mean(r_err):.1f}% (worst {100 * max(r_err, key=abs):+.1f}%)."]
    open(os.path.join(HERE, "table.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
