#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and CuPy: the gpu-marked tests and both GPU benchmarks.
# Results: bench/results/gpu_tests.txt, bench/results/gpu_gemm_<gpu>.json,
# bench/results/gpu_conv2d_<gpu>.json, bench/results/emulator_speed.json.
set -u
cd "$(dirname "$0")/.."
mkdir -p bench/results
python -c "import cupy; cupy.cuda.runtime.getDeviceCount()" || { echo "no GPU/CuPy"; exit 2; }
python -m pytest -m gpu tests/gpu -q -rs 2>&1 | tee bench/results/gpu_tests.txt
t=${PIPESTATUS[0]}
python bench/gpu_gemm.py; g=$?
python bench/gpu_conv2d.py; c=$?
python bench/emulator_speed.py; e=$?
echo "tests=$t gemm=$g conv2d=$c emulator=$e"
exit $(( t || g || c || e ))
