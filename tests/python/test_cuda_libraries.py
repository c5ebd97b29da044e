"""cuBLASLt, cuBLAS, cuSOLVER and cuFFT are opened on first use, not at import
(src/backend/cuda/cuda_libraries.cpp; the list of what is found at import: tessel/_cuda_libs.py)."""
import ctypes
import os
import pathlib
import re
import subprocess
import sys

import pytest

import tessel as ts
from tessel import _cuda_libs

ROOT = pathlib.Path(__file__).resolve().parents[2]
LIBRARIES_CPP = ROOT / "src" / "backend" / "cuda" / "cuda_libraries.cpp"
LIBRARIES_HPP = ROOT / "src" / "backend" / "cuda" / "cuda_libraries.hpp"
CUDA_BUILD = ts.cuda_available() or "TESSEL_CUDA=OFF" not in ts.cuda_unavailable_reason()
MATH_LIBRARIES = ("libcublasLt.so", "libcublas.so", "libcusolver.so", "libcusparse.so", "libnvJitLink.so",
                  "libcufft.so")


def _cpp_library_files():
    """soname -> (environment variable, pip requirement) from cuda_libraries.cpp's LibraryFile constants."""
    text = LIBRARIES_CPP.read_text()
    rows = re.findall(r'LibraryFile k\w+\{\s*"([^"]+)",\s*"([^"]+)",\s*"[^"]+",\s*"([^"]+)"\}', text)
    return {soname: (var, spec) for soname, var, spec in rows}


def test_cpp_and_python_agree_on_the_libraries_opened_on_use():
    cpp = _cpp_library_files()
    assert len(cpp) == 6, cpp
    assert set(cpp) == set(_cuda_libs._MATH_ON_DEMAND)
    for soname, (var, spec) in cpp.items():
        package, python_var = _cuda_libs._MATH_ON_DEMAND[soname]
        assert python_var == var, soname
        assert _cuda_libs._PIP_SPECS[package] == spec, soname
    assert not set(cpp) & set(_cuda_libs._LIBRARIES), "a library opened on use is also loaded at import"


def _listed_functions():
    """library stem -> the function names of its TESSEL_<LIB>_FUNCTIONS list in cuda_libraries.hpp."""
    text = LIBRARIES_HPP.read_text()
    lists = {}
    for macro, stem in (("CUBLASLT", "libcublasLt"), ("CUBLAS", "libcublas"), ("CUSOLVER", "libcusolver"),
                        ("CUFFT", "libcufft")):
        body = re.search(rf"#define TESSEL_{macro}_FUNCTIONS\(X\)(.*?)\n\n", text, re.S).group(1)
        lists[stem] = re.findall(r"X\((\w+)\)", body)
    return lists


def _library_path(soname):
    path, source = _cuda_libs._find(soname)
    return path


@pytest.mark.skipif(not CUDA_BUILD, reason="a CPU-only build opens no CUDA library")
def test_every_listed_function_is_in_its_library():
    lists = _listed_functions()
    assert sum(len(names) for names in lists.values()) > 100
    sonames = {"libcublasLt": "libcublasLt.so.13", "libcublas": "libcublas.so.13", "libcusolver": "libcusolver.so.12",
               "libcufft": "libcufft.so.12"}
    missing = []
    for stem, names in lists.items():
        path = _library_path(sonames[stem])
        if path is None:
            pytest.skip(f"{sonames[stem]} is not installed here")
        lib = ctypes.CDLL(path)
        missing += [f"{stem}: {name}" for name in names if not hasattr(lib, name)]
    assert not missing


@pytest.mark.skipif(not CUDA_BUILD, reason="a CPU-only build opens no CUDA library")
def test_import_opens_no_math_library():
    code = ("import tessel, os\n"
            "print('\\n'.join(os.path.basename(l.split()[-1]) for l in open('/proc/self/maps') if '/' in l))\n")
    mapped = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split())
    assert any(name.startswith("_tessel") for name in mapped), "the extension itself must be mapped"
    opened = sorted(name for name in mapped if name.startswith(MATH_LIBRARIES))
    assert not opened


@pytest.mark.skipif(not ts.cuda_available(), reason="needs a CUDA device")
def test_a_missing_library_is_an_error_naming_the_op_and_the_wheel(tmp_path):
    # cuFFT missing: the FFT raises, names itself, the library and what to install; the process goes on.
    code = (
        "import tessel as ts\n"
        "x = ts.ones(64, dtype=ts.complex64, device='cuda')\n"
        "for _ in range(2):\n"
        "    try:\n"
        "        ts.fft.fft(x)\n"
        "    except ts.TesselError as e:\n"
        "        print('ERROR', e)\n"
        "print('after', float(ts.sum(ts.ones(8, device='cuda'))))\n"
    )
    env = dict(os.environ, TESSEL_CUFFT_LIBRARY=str(tmp_path / "libcufft.so.12"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    errors = [line for line in out.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 2 and errors[0] == errors[1], out
    assert "fft" in errors[0] and "libcufft.so.12" in errors[0], errors[0]
    assert "pip install 'nvidia-cufft>=12,<13'" in errors[0] and "TESSEL_CUFFT_LIBRARY" in errors[0], errors[0]
    assert "after 8.0" in out


@pytest.mark.skipif(not ts.cuda_available(), reason="needs a CUDA device")
def test_first_use_opens_the_library_it_needs():
    code = (
        "import os, tessel as ts\n"
        "def mapped():\n"
        "    return {os.path.basename(l.split()[-1]).split('.so')[0] for l in open('/proc/self/maps') if '/' in l}\n"
        "x = ts.ones(64, dtype=ts.complex64, device='cuda')\n"
        "ts.fft.fft(x); ts.synchronize()\n"
        "print('fft', 'libcufft' in mapped(), 'libcusolver' in mapped())\n"
        "ts.linalg.eigh(ts.eye(600, device='cuda') + 1.0); ts.synchronize()\n"
        "print('eigh', 'libcusolver' in mapped())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "fft True False" in out and "eigh True" in out, out
