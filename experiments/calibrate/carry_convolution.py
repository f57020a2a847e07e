"""Carries the H100's measured cuDNN convolution rates (calib/profiles/h100-measured.yaml gpu.convolution_efficiency,
fitted from results/calib/h100-convolution) into the datasheet presets, as a share of each preset's datasheet bf16 rate:
the H100's share of its best measured GEMM times that GEMM over the H100 datasheet's bf16 rate (804.15 / 989.4 TFLOP/s),
so a preset's convolution runs at the share of its datasheet rate the H100 reached (floored at 0.01, the schema's
least). Not measured on those GPUs (cuDNN picks other kernels on Ampere and Ada): said in each preset's gpu source.
Rewrites the presets in place; running it again changes nothing.

  /usr/bin/python3 experiments/calibrate/carry_convolution.py
"""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROFILES = os.path.join(ROOT, "calib", "profiles")
PRESETS = ["a100-80gb-sxm", "h100-sxm", "h200", "rtx3090", "rtx3090x2-nvlink", "rtx3090x2-pcie", "rtx4070", "rtx4090",
           "rtx5090"]
NOTE = ("; convolution_efficiency carried from the H100's measurement (h100-measured, results/calib/h100-convolution) "
        "as a share of the datasheet bf16 rate: cuDNN's kernels, not measured on this GPU")


def measured():
    text = open(os.path.join(PROFILES, "h100-measured.yaml")).read()
    best = float(re.search(r'^    bf16: "([0-9.]+) TFLOP/s"', text, re.M).group(1))
    block = text[text.index("  convolution_efficiency:\n"):]
    block = block[:block.index("\nhost:")]
    curves = re.findall(r'^    "([^"]+)": \[(.*)\]$', block, re.M)
    return best, [(key, [(float(p), float(e)) for p, e in re.findall(r"\[([0-9.e+]+), ([0-9.]+)\]", pts)])
                  for key, pts in curves]


def main():
    best, curves = measured()
    datasheet = 989.4  # h100-sxm's bf16, TFLOP/s
    lines = ["  convolution_efficiency:"]
    for key, pts in curves:
        shares = ", ".join("[%.0f, %.4f]" % (p, max(0.01, e * best / datasheet)) for p, e in pts)
        lines.append('    "%s": [%s]' % (key, shares))
    block = "\n".join(lines) + "\n"
    for name in PRESETS:
        path = os.path.join(PROFILES, name + ".yaml")
        text = open(path).read()
        text = re.sub(r"  convolution_efficiency:\n(    \".*\n)+", "", text)
        gpu = text.index("\ngpu:\n")
        source = re.compile(r'^(  source: ".*?)(")$', re.M).search(text, gpu)
        if NOTE not in source.group(1):
            text = text[:source.start()] + source.group(1) + NOTE + '"' + text[source.end():]
        k = re.compile(r'^  kernel_min_time: .*\n', re.M).search(text, gpu)
        text = text[:k.end()] + block + text[k.end():]
        open(path, "w").write(text)
        print("carried into", name)


if __name__ == "__main__":
    main()
