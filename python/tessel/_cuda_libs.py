"""The CUDA libraries of the _tessel extension: found and loaded before it is imported.

The extension links NVRTC by soname. It is taken, as PyTorch and CuPy take their libraries, from
NVIDIA's PyPI wheels in this environment first (``nvidia-cuda-nvrtc``: ``site-packages/nvidia/cu13/lib``),
and from the system second (the CUDA toolkit: ``CUDA_HOME``/``CUDA_PATH``, ``/usr/local/cuda``, then
the loader's own search: ``LD_LIBRARY_PATH`` and ``ldconfig``). It is loaded by absolute path with
``RTLD_GLOBAL``, so the extension's own references resolve to that copy. If it cannot be found, or is
of another CUDA major version, that is an ``ImportError`` that says which wheel to install, never a
crash.

The other libraries are not loaded here, only found: the C++ side opens each on first use (cuBLASLt
by the first matmul, cuSOLVER and cuBLAS by linalg, cuFFT by the FFT, CUPTI by ``ts.profile``, NCCL
by ``ts.distributed`` on GPUs), from the path this module puts in its environment variable
(``TESSEL_CUBLAS_LIBRARY``, ...; unless already set), else the toolkit or the loader's search. A
library missing then is an error naming the op and the wheel to install. MPI is opened by
``ts.distributed.init`` (libmpi.so.40, Open MPI). None of them is needed to import tessel.

``loaded()`` tells ``tessel info`` (``python -m tessel info``) what came from where.
"""
from __future__ import annotations

import ctypes
import glob
import importlib.machinery
import os
import struct
import sys

CUDA_MAJOR = 13

# soname -> (PyPI package, sonames it needs first). The order is a valid load order.
_LIBRARIES = {
    "libnvrtc.so.13": ("nvidia-cuda-nvrtc", ()),
}
# Opened by the C++ side when used: soname -> (PyPI package, the environment variable it reads).
# The math libraries: src/backend/cuda/cuda_libraries.cpp has the same table, and a source build
# opens them from its toolkit first.
_MATH_ON_DEMAND = {
    "libcublasLt.so.13": ("nvidia-cublas", "TESSEL_CUBLASLT_LIBRARY"),
    "libcublas.so.13": ("nvidia-cublas", "TESSEL_CUBLAS_LIBRARY"),
    "libnvJitLink.so.13": ("nvidia-nvjitlink", "TESSEL_NVJITLINK_LIBRARY"),
    "libcusparse.so.12": ("nvidia-cusparse", "TESSEL_CUSPARSE_LIBRARY"),
    "libcusolver.so.12": ("nvidia-cusolver", "TESSEL_CUSOLVER_LIBRARY"),
    "libcufft.so.12": ("nvidia-cufft", "TESSEL_CUFFT_LIBRARY"),
}
_ON_DEMAND = {
    **_MATH_ON_DEMAND,
    "libcupti.so.13": ("nvidia-cuda-cupti", "TESSEL_CUPTI_LIBRARY"),
    "libnccl.so.2": ("nvidia-nccl-cu13", "TESSEL_NCCL_LIBRARY"),
}
# The wheels' folders under site-packages: CUDA 13's shared one, then the per-package ones (NCCL's).
_WHEEL_SUBDIRS = ("nvidia/cu13/lib", "nvidia/nccl/lib", "nvidia/cuda_nvrtc/lib", "nvidia/cublas/lib",
                  "nvidia/cufft/lib", "nvidia/cusolver/lib", "nvidia/cusparse/lib", "nvidia/nvjitlink/lib",
                  "nvidia/cuda_cupti/lib")

# The requirement of each, as pyproject.toml names it (CUDA 13's cuFFT, cuSOLVER and cuSPARSE are 12.x).
_PIP_SPECS = {
    "nvidia-nvjitlink": "nvidia-nvjitlink>=13,<14", "nvidia-cuda-nvrtc": "nvidia-cuda-nvrtc>=13,<14",
    "nvidia-cublas": "nvidia-cublas>=13,<14", "nvidia-cusparse": "nvidia-cusparse>=12.6,<13",
    "nvidia-cusolver": "nvidia-cusolver>=12,<13", "nvidia-cufft": "nvidia-cufft>=12,<13",
    "nvidia-cuda-cupti": "nvidia-cuda-cupti>=13,<14", "nvidia-nccl-cu13": "nvidia-nccl-cu13",
}

_loaded: dict = {}      # soname -> {"path", "source", "package"}
_on_demand: dict = {}   # soname -> {"path", "source", "package"} or {"path": None, ...}
_needed: tuple = ()


def _needed_sonames(path):
    """DT_NEEDED of an ELF64 little-endian shared object (the extension), read from its headers only."""
    try:
        with open(path, "rb") as f:
            ident = f.read(64)
            if ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1:
                return ()
            shoff, = struct.unpack_from("<Q", ident, 0x28)
            shentsize, shnum = struct.unpack_from("<HH", ident, 0x3A)
            f.seek(shoff)
            sections = [struct.unpack("<IIQQQQIIQQ", f.read(shentsize)[:64]) for _ in range(shnum)]
            for sh in sections:
                if sh[1] != 6:  # SHT_DYNAMIC
                    continue
                strtab = sections[sh[6]]  # sh_link: its string table
                f.seek(strtab[4])
                strings = f.read(strtab[5])
                f.seek(sh[4])
                dynamic = f.read(sh[5])
                names = []
                for i in range(0, len(dynamic) - 15, 16):
                    tag, value = struct.unpack_from("<qQ", dynamic, i)
                    if tag == 0:
                        break
                    if tag == 1:  # DT_NEEDED
                        names.append(strings[value:strings.index(b"\0", value)].decode())
                return tuple(names)
    except (OSError, struct.error, ValueError, IndexError):
        pass
    return ()


def _wheel_dirs():
    """Folders of NVIDIA's wheels on sys.path (site-packages and what .pth files add), in order."""
    dirs = []
    for entry in sys.path:
        if not entry or not os.path.isdir(os.path.join(entry, "nvidia")):
            continue
        for sub in _WHEEL_SUBDIRS:
            d = os.path.join(entry, sub)
            if d not in dirs and os.path.isdir(d):
                dirs.append(d)
    return dirs


def _toolkit_dirs():
    dirs = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root:
            dirs += [os.path.join(root, "lib64"), os.path.join(root, "lib"),
                     os.path.join(root, "extras", "CUPTI", "lib64")]
    dirs += ["/usr/local/cuda/lib64", "/usr/local/cuda/extras/CUPTI/lib64"]
    return [d for d in dirs if os.path.isdir(d)]


def _package_of(path):
    """The distribution that installed a wheel's file, with its version ('nvidia-cublas 13.1.0.3')."""
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover
        return None
    real = os.path.realpath(path)
    for sub in _WHEEL_SUBDIRS:
        marker = os.sep + sub.replace("/", os.sep) + os.sep
        if marker in real:
            site = real[:real.index(marker)]
            break
    else:
        return None
    rel = os.path.relpath(real, site).replace(os.sep, "/")
    for dist in metadata.distributions(path=[site]):
        if not dist.metadata["Name"].lower().startswith("nvidia"):
            continue
        for f in dist.files or ():
            if str(f) == rel:
                return f"{dist.metadata['Name']} {dist.version}"
    return None


def _other_major(soname, dirs):
    """A library of the same name but another major version in dirs (CUDA 12's, say), or None."""
    stem = soname.split(".so.")[0]
    for d in dirs:
        for candidate in sorted(glob.glob(os.path.join(d, stem + ".so.*"))):
            name = os.path.basename(candidate)
            if name != soname and name.count(".") == 2:
                return candidate
    # CUDA 12's wheels: nvidia/<name>/lib
    for entry in sys.path:
        if entry and os.path.isdir(os.path.join(entry, "nvidia")):
            for candidate in glob.glob(os.path.join(entry, "nvidia", "*", "lib", stem + ".so.*")):
                if os.path.basename(candidate) != soname:
                    return candidate
    return None


def _find(soname):
    """(path, source) of a library: NVIDIA's wheels first, then the toolkit; (None, why) if absent."""
    wheel_dirs = _wheel_dirs()
    for d in wheel_dirs:
        p = os.path.join(d, soname)
        if os.path.exists(p):
            return p, "wheel"
    if os.environ.get("TESSEL_CUDA_LIBRARY_SEARCH") == "wheels":  # scripts/test-wheel.sh: never the toolkit
        return None, wheel_dirs
    toolkit = _toolkit_dirs()
    for d in toolkit:
        p = os.path.join(d, soname)
        if os.path.exists(p):
            return p, "system"
    return None, wheel_dirs + toolkit


def _missing_message(soname, package, searched, error=None):
    other = _other_major(soname, searched if isinstance(searched, list) else [])
    lines = [f"tessel: cannot load {soname} ({package}, CUDA {CUDA_MAJOR})"
             + (f": {error}" if error else "") + "."]
    if other:
        lines.append(f"Found {other}, which is another CUDA major version; tessel's wheel needs CUDA {CUDA_MAJOR}'s.")
    lines.append("Searched NVIDIA's wheels in site-packages (nvidia/cu13/lib), the CUDA toolkit (CUDA_HOME, "
                 "/usr/local/cuda) and the loader's path (LD_LIBRARY_PATH, ldconfig)"
                 + (": " + ", ".join(searched) if isinstance(searched, list) and searched else "") + ".")
    lines.append(f"Install it with: pip install '{_PIP_SPECS.get(package, package)}' (tessel's wheel depends on it: "
                 f"pip install tessel installs it), or install the CUDA {CUDA_MAJOR} toolkit. A machine without a "
                 "GPU needs it too to import tessel, and then runs on the CPU backend.")
    return "\n".join(lines)


def load(extension_path):
    """Loads what the extension at extension_path needs; ImportError naming what is missing."""
    global _needed
    needed = _needed_sonames(extension_path)
    _needed = needed
    wanted = [s for s in _LIBRARIES if s in needed]
    order = []

    def visit(soname):
        if soname in order:
            return
        for dep in _LIBRARIES[soname][1]:
            visit(dep)
        order.append(soname)

    for s in wanted:
        visit(s)
    for soname in order:
        if soname in _loaded:
            continue
        package = _LIBRARIES[soname][0]
        path, source = _find(soname)
        mode = getattr(os, "RTLD_GLOBAL", 0x100) | getattr(os, "RTLD_NOW", 2)
        try:
            if path is None and os.environ.get("TESSEL_CUDA_LIBRARY_SEARCH") == "wheels":
                raise OSError("not in NVIDIA's wheels (TESSEL_CUDA_LIBRARY_SEARCH=wheels)")
            if path is None:
                # The loader's own search (LD_LIBRARY_PATH, the ldconfig cache).
                lib = ctypes.CDLL(soname, mode=mode)
                path, source = _loaded_path(lib, soname), "system"
            else:
                ctypes.CDLL(path, mode=mode)
        except OSError as e:
            raise ImportError(_missing_message(soname, package, source if path is None else [path],
                                               str(e) if path else None)) from None
        _loaded[soname] = {"path": path, "source": source, "package": package}
        if soname == "libnvrtc.so.13":
            # NVRTC opens its builtins library by name at the first compile: the copy beside it.
            for builtins in sorted(glob.glob(os.path.join(os.path.dirname(path), "libnvrtc-builtins.so.*"))):
                if ".alt." not in builtins:
                    try:
                        ctypes.CDLL(builtins, mode=mode)
                    except OSError:
                        pass
    # The on-demand ones: found now, opened by the C++ side when first used.
    for soname, (package, var) in _ON_DEMAND.items():
        if os.environ.get(var):
            _on_demand[soname] = {"path": os.environ[var], "source": f"${var}", "package": package}
            continue
        path, source = _find(soname)
        if path is not None and source == "wheel":
            os.environ[var] = path
        elif path is None and os.environ.get("TESSEL_CUDA_LIBRARY_SEARCH") == "wheels":
            # Never the toolkit: the C++ side tries only where the wheel would have put it.
            os.environ[var] = os.path.join((source or ["site-packages/nvidia/cu13/lib"])[0], soname)
        _on_demand[soname] = {"path": path, "source": source if path else "not found", "package": package}


def _source_build_path(soname):
    """(path, "system") where a source build's C++ side opens a math library first (its toolkit), or None."""
    try:
        from . import _build_config as config
    except ImportError:
        return None
    folder = getattr(config, "CUDA_LIBRARY_DIR", "")
    path = os.path.join(folder, soname)
    return (path, "system") if folder and not config.WHEEL and os.path.exists(path) else None


def _loaded_path(lib, soname):
    """The file a ctypes handle came from (dlinfo through a symbol of the library), or the soname."""
    try:
        with open("/proc/self/maps") as maps:
            stem = soname.split(".so")[0] + ".so"
            for line in maps:
                parts = line.split()
                if len(parts) >= 6 and os.path.basename(parts[5]).startswith(stem):
                    return parts[5]
    except OSError:
        pass
    return soname


def _load_openblas():
    """A wheel's CPU BLAS/LAPACK, PyPI's scipy-openblas32 (a dependency of the wheel), loaded from
    wherever it is importable: the extension's run path only finds it in the same site-packages."""
    import importlib.util

    soname = "libscipy_openblas.so"
    spec = importlib.util.find_spec("scipy_openblas32")
    dirs = list(spec.submodule_search_locations or []) if spec is not None else []
    path = next((p for p in (os.path.join(d, "lib", soname) for d in dirs) if os.path.exists(p)), None)
    if path is None:
        raise ImportError("tessel: the CPU BLAS/LAPACK library (libscipy_openblas.so) was not found; "
                          "install it with: pip install scipy-openblas32")
    mode = getattr(os, "RTLD_GLOBAL", 0x100) | getattr(os, "RTLD_NOW", 2)
    try:
        ctypes.CDLL(path, mode=mode)
    except OSError as e:
        raise ImportError(f"tessel: could not load the CPU BLAS/LAPACK library {path}: {e}") from None
    _loaded[soname] = {"path": path, "source": "wheel", "package": "scipy-openblas32"}


def prepare():
    """Called by tessel/__init__.py before the extension is imported. A wheel (tessel/_build_config.py:
    WHEEL) loads its CUDA libraries as described above; a source build keeps what its extension links
    (the toolkit it was built with) and only reports it."""
    try:
        from . import _build_config as config
    except ImportError:  # an extension built before _build_config.py existed
        return
    if not config.WHEEL:
        return
    _load_openblas()
    if not config.CUDA:
        return
    here = os.path.dirname(os.path.abspath(__file__))
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(here, "_tessel" + suffix)
        if os.path.exists(path):
            load(path)
            break
    if not os.environ.get("TESSEL_CCCL_INCLUDE"):
        # CCCL's headers (nvidia-cuda-cccl) for NVRTC kernels that include them (src/jit/compiler.cpp).
        for entry in sys.path:
            d = os.path.join(entry, "nvidia", "cu13", "include", "cccl") if entry else ""
            if d and os.path.isdir(d):
                os.environ["TESSEL_CCCL_INCLUDE"] = d
                break


def _mapped():
    """soname-like basename -> path of every library mapped into this process."""
    found = {}
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                parts = line.split()
                if len(parts) >= 6 and parts[5].startswith("/"):
                    found.setdefault(os.path.basename(parts[5]), parts[5])
    except OSError:
        pass
    return found


def loaded():
    """What tessel loaded and will load, for `tessel info`: one dict per library (library, path, source:
    wheel / system / not found, loaded: mapped into the process now, package: the wheel and its version)."""
    mapped = _mapped()
    rows = []
    names = list(_LIBRARIES) + ["libscipy_openblas.so"] + list(_ON_DEMAND) + ["libmpi.so.40"]
    for soname in names:
        info = _loaded.get(soname) or _on_demand.get(soname)
        path = mapped.get(soname)
        if path is None:
            stem = soname.split(".so")[0] + ".so"
            path = next((p for base, p in mapped.items() if base.startswith(stem + ".")), None)
        is_loaded = path is not None
        if info is None and path is None:
            if soname == "libmpi.so.40":
                info = {"path": None, "source": "opened by ts.distributed.init (Open MPI)", "package": "Open MPI"}
            elif soname in _ON_DEMAND:
                p, src = (soname in _MATH_ON_DEMAND and _source_build_path(soname)) or _find(soname)
                info = {"path": p, "source": src if p else "not found", "package": _ON_DEMAND[soname][0]}
            else:
                continue  # not linked by this build (a CPU-only one)
        if path is None:
            path = info["path"]
        source = info["source"] if info else ("wheel" if os.sep + "nvidia" + os.sep in path else "system")
        if is_loaded and os.sep + "nvidia" + os.sep in path:
            source = "wheel"
        package = (_package_of(path) if path and source == "wheel" else None) or (info or {}).get("package") \
            or _LIBRARIES.get(soname, ("",))[0] or _ON_DEMAND.get(soname, ("",))[0]
        rows.append({"library": soname, "path": path, "source": source, "loaded": is_loaded, "package": package})
    return rows
