#!/usr/bin/env bash
# Installs only what is missing, so it is safe to run on every `make` and works offline
# where everything is already present (the GPU machine cannot reach a package registry).
set -euo pipefail

have_header() { [ -e "/usr/include/$1" ] || [ -e "/usr/local/include/$1" ]; }

missing_debs=()
need_deb() { # need_deb PACKAGE TEST-COMMAND...
  local pkg=$1; shift
  if ! "$@" >/dev/null 2>&1; then missing_debs+=("$pkg"); fi
}
need_deb cmake            command -v cmake
need_deb ninja-build      command -v ninja
# g++ also compiles the CPU backend's kernels at run time (jit/host_compiler.hpp; TESSEL_CXX overrides).
need_deb g++              command -v g++
need_deb libgtest-dev     have_header gtest/gtest.h
need_deb libbenchmark-dev have_header benchmark/benchmark.h
need_deb libcli11-dev     have_header CLI/CLI.hpp
need_deb libfmt-dev       have_header fmt/format.h
need_deb nlohmann-json3-dev have_header nlohmann/json.hpp
need_deb libopenblas-dev  have_header x86_64-linux-gnu/openblas-pthread/cblas.h
need_deb libpng-dev       have_header png.h
# CPU backend libraries (issue 43): Highway's vqsort sorts (libhwy-dev), pocketfft's header-only
# FFT, which Debian ships inside gemmi-dev (gemmi/third_party/pocketfft_hdronly.h; nothing else of
# gemmi is used).
need_deb libhwy-dev       have_header hwy/contrib/sort/vqsort.h
need_deb gemmi-dev        have_header gemmi/third_party/pocketfft_hdronly.h
need_deb zlib1g-dev       have_header zlib.h
# Open MPI: mpirun/srun launch and the CPU collectives of tessel::dist (optional to build; the dist
# tests run under mpirun).
need_deb libopenmpi-dev   test -e /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h
need_deb openmpi-bin      command -v mpirun

if [ ${#missing_debs[@]} -gt 0 ]; then
  echo "install-deps: installing Debian packages: ${missing_debs[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing_debs[@]}"
fi

PY=${PYTHON:-python3}
missing_py=()
# sphinx: `make docs` (also run by `make test`); its theme, alabaster, comes with it.
# dask: tests/python/test_numpy_protocols.py and the doc examples (Dask arrays of tessel chunks).
# matplotlib: ts.profile's memory_timeline (tests/python/test_profile.py) and the docs' trace picture.
# scipy_openblas32: the CPU backend's BLAS and LAPACK (src/CMakeLists.txt; NumPy's own OpenBLAS build).
for spec in scipy_openblas32:scipy-openblas32 numpy:numpy pytest:pytest hypothesis:hypothesis nanobind:nanobind scikit_build_core:scikit-build-core \
            sphinx:sphinx dask:dask matplotlib:matplotlib; do
  mod=${spec%%:*}; pkg=${spec##*:}
  $PY -c "import $mod" >/dev/null 2>&1 || missing_py+=("$pkg")
done
if [ ${#missing_py[@]} -gt 0 ]; then
  echo "install-deps: installing PyPI packages: ${missing_py[*]}"
  $PY -m pip install -q "${missing_py[@]}"
fi

# torch: tests/python/test_torch.py and the tessel.torch guide (docs/guide/torch.rst), from PyPI (the
# only Python registry these machines reach; PyPI's Linux wheel is the CUDA build, which also brings
# NVIDIA's CUDA libraries as wheels).
if ! $PY -c "import torch" >/dev/null 2>&1; then
  echo "install-deps: installing torch (PyPI)"
  $PY -m pip install -q torch
fi
