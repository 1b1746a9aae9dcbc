#!/usr/bin/env bash
# The GPU checks and benchmarks in one command, on a machine with an NVIDIA GPU:
#
#     bash bench/gpu_all.sh
#
# Installs what it needs when vta or CuPy is missing (pip install -e '.[gpu,test]': CuPy's
# prebuilt CUDA 13 wheel, cupy-cuda13x; set VTA_GPU_EXTRA=gpu-cuda12 for a CUDA 12 driver), then
# runs the gpu-marked tests (real kernels against the simulator and numpy; pytest-xdist spreads
# them where it is installed) and the GPU benchmarks: bench/gpu_gemm.py (fp16, bf16, int8 GEMM
# 1024..8192 against cuBLAS) and bench/gpu_conv2d.py (ResNet-18 C2..C11, fused conv2d +
# requantize against the unfused library sequence and the same-shape cuBLAS GEMM). Every timing
# is a median of CUDA-event pairs around 100 launches; each result file records the device and
# its clocks. Results, named by the GPU (<gpu>: CUDA's device name, lower-cased, non-alphanumerics
# as _): bench/results/gpu_tests_<gpu>.txt, bench/results/gpu_gemm_<gpu>.json,
# bench/results/gpu_conv2d_<gpu>.json. Each step has a time limit (GPU_ALL_TIMEOUT seconds,
# default 900); GPU_ALL_NO_INSTALL=1 skips the install. Exit status: 0 when every step passed, 2 without a GPU, 1 otherwise.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
LIMIT=${GPU_ALL_TIMEOUT:-900}
export PYTHONUNBUFFERED=1
if [ -z "${GPU_ALL_NO_INSTALL:-}" ] && ! "$PY" -c "import vta, cupy, pytest, hypothesis" 2>/dev/null; then
    echo "gpu_all: installing the project with the ${VTA_GPU_EXTRA:-gpu} and test extras"
    "$PY" -m pip install -q -e ".[${VTA_GPU_EXTRA:-gpu},test]" || { echo "gpu_all: install failed"; exit 1; }
fi
slug=$("$PY" -c "
import re
from vta.gpu.runtime import gpu_name
print(re.sub(r'[^A-Za-z0-9]+', '_', gpu_name()).strip('_').lower())") || { echo "gpu_all: no GPU/CuPy"; exit 2; }
mkdir -p bench/results
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit \
    --format=csv 2>&1 | tee "bench/results/gpu_env_${slug}.txt"
xdist=()
"$PY" -c "import xdist" 2>/dev/null && xdist=(-n "${GPU_ALL_WORKERS:-8}")
timeout "$LIMIT" "$PY" -m pytest -m gpu tests -q -rs -p no:cacheprovider "${xdist[@]}" 2>&1 \
    | tee "bench/results/gpu_tests_${slug}.txt"
t=${PIPESTATUS[0]}
timeout "$LIMIT" "$PY" bench/gpu_gemm.py; g=$?
timeout "$LIMIT" "$PY" bench/gpu_conv2d.py; c=$?
echo "gpu_all: tests=$t gemm=$g conv2d=$c (0 = passed)"
exit $(( (t || g || c) ? 1 : 0 ))
