#!/usr/bin/env bash
# Diagnoses a crash of the Python extension on a GPU machine: installs the package, then runs
# small CUDA steps one at a time with TESSEL_LOG=debug, and a native backtrace under cuda-gdb.
set -uo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-build-isolation --no-deps . 2>&1 | tail -5
ext=$(python3 -c "import tessel._tessel as m; print(m.__file__)")
echo "== extension: $ext"; ldd "$ext" | grep -Ei "cuda|nvrtc|cublas|cufft|stdc" 
for step in "ts.zeros((4,), device='cuda')" "ts.arange(5, device='cuda')" \
            "ts.arange(0.0, 1.0, 0.25, device='cuda')" "ts.ones((3,), device='cuda') + 1"; do
  echo "== $step"
  TESSEL_LOG=debug timeout 60 python3 -X faulthandler -c "import tessel as ts; r = $step; print('ok', r)" 2>&1 | tail -8
done
echo "== backtrace"
timeout 150 cuda-gdb -q -batch -ex run -ex "bt 40" --args python3 -c \
  "import tessel as ts; print(ts.arange(0.0, 1.0, 0.25, device='cuda'))" 2>&1 | grep -vE "^\[New Thread|^\[Thread|Cuda Driver error" | tail -60
