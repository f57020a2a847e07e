#!/usr/bin/env bash
# On a lent GPU: matrix products reading their weights over the link. tiersim_calib --only remote_gemm (cuBLAS GEMM,
# M = 1..8192, weights in device and managed PreferredLocation=CPU + AccessedBy memory) into
# $OUT/remote_gemm.csv, and the experts' diagnosis (experiments/calibrate/remote_experts_gemm.py: torch._grouped_mm and
# eager F.linear over one Qwen3-30B-A3B layer's experts, weights in host or GPU managed memory) into
# $OUT/remote_experts.jsonl; and PyTorch's own Linear on host-resident weights (experiments/calibrate/
# remote_linear_rate.py, the runtime profile's curve) into $OUT/remote_linear.jsonl. SKIP_CALIB=1 and SKIP_EXPERTS=1
# leave out the first two. Managed memory used: < 3 GB (never near the GPU's free memory).
#   bash experiments/calibrate/remote_gemm_lease.sh     (from the repository root, OUT set)
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:?}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,memory.used,memory.free,memory.total,driver_version,pcie.link.gen.current,pcie.link.width.current \
  --format=csv | tee "$out/nvidia_smi.txt"
source experiments/calibrate/cublas_path.sh
find_cublas
nvcc -O2 -std=c++17 -gencode=arch=compute_90,code=sm_90 calib/src/*.cu -lcublas -o /tmp/tiersim_calib || exit 1
[ -z "${SKIP_CALIB:-}" ] && timeout 240 /tmp/tiersim_calib --only remote_gemm --out "$out/remote_gemm.csv" 2>&1 | tee "$out/remote_gemm.log"
nvcc -shared -Xcompiler -fPIC -cudart shared -o /tmp/tiersim_managed_alloc.so experiments/validate/managed_allocator.cu || exit 1
if [ -z "${SKIP_EXPERTS:-}" ]; then
timeout 240 python3 experiments/calibrate/remote_experts_gemm.py --allocator-so /tmp/tiersim_managed_alloc.so \
  --out "$out/remote_experts.jsonl" 2>&1 | grep -v -i warn | tee "$out/remote_experts.log"
fi
# PyTorch's own Linear on host-resident weights (the runtime profile's curve), with SKIP_EXPERTS too
timeout 200 python3 experiments/calibrate/remote_linear_rate.py --allocator-so /tmp/tiersim_managed_alloc.so \
  --out "$out/remote_linear.jsonl" 2>&1 | grep -v -i warn | tail -5 | tee "$out/remote_linear.log"
