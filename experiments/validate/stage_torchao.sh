#!/usr/bin/env bash
# Stages torchao's CPUOffloadOptimizer for the GPU machine (which has no torchao and no internet): its own file,
# torchao/optim/cpu_offload.py, verbatim from the pytorch/ao snapshot, with the one torchao helper it imports
# (torchao.utils.get_available_devices) re-stated, so `import torchao.optim.cpu_offload` runs the framework's code
# without torchao's compiled extensions. Output: .ext/torchao-offload/ (git-ignored; carry it with the run).
#   experiments/validate/stage_torchao.sh [/work/.mirror/pytorch+ao/repo]
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=${1:-/work/.mirror/pytorch+ao/repo}
commit=36027d82d  # pytorch/ao main, 2026-08-21 (the snapshot read for sim/model/training/optimizer_offload.hpp)
dst=.ext/torchao-offload/torchao
rm -rf .ext/torchao-offload
mkdir -p "$dst/optim"
git --git-dir="$repo/.git" show "$commit:torchao/optim/cpu_offload.py" > "$dst/optim/cpu_offload.py" 2>/dev/null ||
  git --git-dir="$repo" show "$commit:torchao/optim/cpu_offload.py" > "$dst/optim/cpu_offload.py"
: > "$dst/optim/__init__.py"
echo "# staged by experiments/validate/stage_torchao.sh: pytorch/ao $commit, torchao/optim/cpu_offload.py only" > "$dst/__init__.py"
cat > "$dst/utils.py" <<'PY'
# torchao.utils.get_available_devices as pytorch/ao 36027d82d defines it (the only torchao import of cpu_offload.py).
import torch


def get_available_devices():
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices.append("cuda")
    elif torch.xpu.is_available():
        devices.append("xpu")
    if torch.mps.is_available():
        devices.append("mps")
    return devices
PY
echo "$commit" > .ext/torchao-offload/COMMIT
echo "staged: $(wc -l < "$dst/optim/cpu_offload.py") lines of cpu_offload.py at pytorch/ao $commit"
