#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and CuPy: the gpu-marked tests and the GPU benchmarks (issue 13's
# targets: fp16 and int8 GEMM 4096^3 >= 0.8x the library, fused conv2d + requant >= 1.5x the
# unfused sequence on ResNet-18 C2-C11). Results, named by the GPU (<gpu>: CUDA's device name,
# lower-cased, non-alphanumerics as _): bench/results/gpu_tests_<gpu>.txt,
# bench/results/gpu_gemm_<gpu>.json, bench/results/gpu_conv2d_<gpu>.json; and the CPU-side
# bench/results/emulator_speed.json and bench/results/gpu_profile.json.
set -u
cd "$(dirname "$0")/.."
mkdir -p bench/results
slug=$(python -c "
import re
from vta.gpu.runtime import gpu_name
print(re.sub(r'[^A-Za-z0-9]+', '_', gpu_name()).strip('_').lower())") || { echo "no GPU/CuPy"; exit 2; }
python -m pytest -m gpu tests/gpu -q -rs 2>&1 | tee "bench/results/gpu_tests_${slug}.txt"
t=${PIPESTATUS[0]}
python bench/gpu_gemm.py; g=$?
python bench/gpu_conv2d.py; c=$?
python bench/emulator_speed.py; e=$?
python bench/gpu_profile.py; p=$?
echo "tests=$t gemm=$g conv2d=$c emulator=$e profile=$p"
exit $(( t || g || c || e || p ))
