#!/bin/bash
# Standalone device check + timing of the sm90 GEMM against cuBLASLt, outside the tessel build
# (plain cudaMalloc, stub error/check headers in stub/). Used to debug the kernel on the GPU
# machine in a single call; the real tests are tessel_matmul_sm90_tests and matmul_sm90_bench.
set -e
cd "$(dirname "$0")"
SRC=${SRC:-../../../../src}
nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -O3 -I stub -I "$SRC" -I "$SRC/../include" main.cu "$SRC/backend/cuda/matmul_sm90.cu" -o main -lcublasLt
