"""`tessel info [--json]` (the wheel's console script, also `python -m tessel info`).

The environment check of the Python package: tessel's version and build, whether CUDA is usable
(and if not, why), the devices, and every CUDA library: loaded or opened on use, from which file
and which wheel (or the system). The C++ program of a source build (build/cli/tessel) has the
same command with the device details and benchmarks.
"""
from __future__ import annotations

import argparse
import json
import sys


def info() -> dict:
    """The facts `tessel info` prints, as a dict."""
    import tessel as ts
    from tessel import _cuda_libs, _tessel

    try:
        from tessel import _build_config as config
        build = {"wheel": config.WHEEL, "cuda": config.CUDA, "cuda_architectures": config.CUDA_ARCHITECTURES,
                 "cuda_compiler": config.CUDA_COMPILER_VERSION}
    except ImportError:
        build = {}

    def version(v):
        return f"{v // 1000}.{(v % 1000) // 10}" if v > 0 else "none"

    out = {
        "version": ts.__version__,
        "python": sys.version.split()[0],
        "build": build,
        "cuda_available": bool(_tessel.cuda_available()),
        "cuda_unavailable_reason": "" if _tessel.cuda_available() else _tessel.cuda_unavailable_reason(),
        "driver_cuda_version": version(_tessel.driver_version()),
        "runtime_cuda_version": version(_tessel.runtime_version()),
        "devices": [{"index": i, "name": _tessel.device_name(i)} for i in range(_tessel.device_count())],
        "libraries": _cuda_libs.loaded(),
    }
    try:
        import scipy_openblas32 as blas
        out["cpu_blas"] = {"package": "scipy-openblas32", "version": getattr(blas, "__version__", "?"),
                           "library_dir": blas.get_lib_dir()}
    except ImportError:
        out["cpu_blas"] = {"package": "the system's OpenBLAS"}
    return out


def _print(facts: dict) -> None:
    b = facts["build"]
    kind = "wheel" if b.get("wheel") else "source build"
    cuda = f"CUDA {b.get('cuda_compiler') or '?'}, architectures {b.get('cuda_architectures')}" if b.get("cuda") \
        else "CPU only"
    print(f"tessel {facts['version']} ({kind}, {cuda}), Python {facts['python']}")
    if facts["cuda_available"]:
        print(f"CUDA: available, driver supports CUDA {facts['driver_cuda_version']}, "
              f"runtime {facts['runtime_cuda_version']}")
        for d in facts["devices"]:
            print(f"  cuda:{d['index']}  {d['name']}")
    else:
        print(f"CUDA: unavailable ({facts['cuda_unavailable_reason']}); running on the CPU backend")
    if facts["libraries"]:
        print("CUDA libraries:")
        for row in facts["libraries"]:
            state = "loaded" if row["loaded"] else "on use"
            where = row["path"] or "-"
            print(f"  {row['library']:<20} {state:<7} {row['source']:<7} {where}"
                  + (f"  ({row['package']})" if row.get("package") else ""))
    blas = facts["cpu_blas"]
    print(f"CPU BLAS: {blas['package']} {blas.get('version', '')} {blas.get('library_dir', '')}".rstrip())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="tessel", description="tessel's environment check")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("info", help="versions, devices, and which CUDA libraries were loaded from where")
    p.add_argument("--json", action="store_true", help="the same as JSON")
    args = parser.parse_args(argv)
    if args.command == "info":
        facts = info()
        if args.json:
            print(json.dumps(facts, indent=2))
        else:
            _print(facts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
