#!/usr/bin/env python3
"""Fails when an #include goes up a layer, or when cli/ or bench/ reach a private header.

The layers, bottom to top: core, profile, memory, array, jit, ops, dist, then pipeline and sim
(which may use ops and dist but not each other; sim's DistributedParticles runs over dist), then the programs: python/bindings, cli and bench. A file
belongs to the layer of its folder (include/tessel/<layer>/, src/<layer>/); a backend file
(src/backend/...) to the layer of what it implements: copy, its strided loop, the CPU thread
count and the grid-stride launch shape -> array, particles -> sim, dist -> dist, anything else -> ops. A layer may include its own headers
and those of the layers below it. cli/ and bench/
include only the public headers (include/tessel/...), with one exception: a standalone CUDA
micro-benchmark in bench/peers (*.cu, built by nvcc alone, no tessel library) may include the
device headers of src/backend/cuda/device/, the plain CUDA that NVRTC also compiles, to time
tessel's kernels without its host path. Tests are not checked.

Usage: scripts/check_layers.py [repository root]. Prints each offending line; exit status 1 if any.
"""
import pathlib
import re
import sys

RANK = {"core": 0, "profile": 1, "memory": 2, "array": 3, "jit": 4, "ops": 5,
        "dist": 6, "pipeline": 7, "sim": 7, "bindings": 8, "cli": 8, "bench": 8}
# Layers of one rank that must not include each other.
SIBLINGS = {"pipeline", "sim"}
BACKEND_LAYER = {"copy": "array", "strided_loop": "array", "threads": "array", "grid_stride": "array", "particles": "sim", "particles_physics": "sim", "dist": "dist"}
PROGRAMS = {"cli", "bench"}
SOURCE_SUFFIXES = {".hpp", ".cpp", ".cu", ".cuh", ".h", ".in"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path: pathlib.Path, root: pathlib.Path):
    """The layer of a file under root, or None for files outside the layered tree."""
    parts = path.relative_to(root).parts
    if parts[:2] == ("include", "tessel") and len(parts) > 3:
        return parts[2]
    if parts[0] == "src" and len(parts) > 2:
        if parts[1] == "backend":
            stem = path.stem
            return BACKEND_LAYER.get(stem, "ops")
        return parts[1]
    if parts[:2] == ("python", "bindings"):
        return "bindings"
    if parts[0] in PROGRAMS:
        return parts[0]
    return None


def resolve(include: str, including: pathlib.Path, root: pathlib.Path):
    """The file an include names: beside the includer, then under include/ or src/."""
    for base in (including.parent, root / "include", root / "src"):
        candidate = (base / include).resolve()
        if candidate.is_file():
            return candidate
    return None


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent).resolve()
    problems = []
    files = [p for folder in ("include", "src", "python/bindings", "cli", "bench")
             for p in sorted((root / folder).rglob("*")) if p.suffix in SOURCE_SUFFIXES and p.is_file()]
    for path in files:
        layer = layer_of(path, root)
        if layer is None:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            target = resolve(match.group(1), path, root)
            if target is None or root not in target.parents:
                continue  # a generated or third-party header
            where = f"{path.relative_to(root)}:{number}: {line.strip()}"
            if (path.suffix == ".cu" and path.parent == root / "bench" / "peers" and
                    target.parent == root / "src" / "backend" / "cuda" / "device"):
                continue  # a standalone kernel micro-benchmark (see the module's docstring)
            if layer in PROGRAMS and target.relative_to(root).parts[0] == "src":
                problems.append(f"{where}: {layer}/ includes a private header; use include/tessel/")
                continue
            target_layer = layer_of(target, root)
            if target_layer is None or target_layer == layer:
                continue
            if RANK[target_layer] > RANK[layer] or (RANK[target_layer] == RANK[layer] and
                                                    {layer, target_layer} <= SIBLINGS):
                problems.append(f"{where}: layer '{layer}' includes layer '{target_layer}', which is not below it")
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_layers: {len(problems)} include(s) break the layer order "
              "core -> profile -> memory -> array -> jit -> ops -> pipeline/sim/dist -> bindings/cli/bench")
        return 1
    print(f"check_layers: {len(files)} files, every include goes down or stays in its layer")
    return 0


if __name__ == "__main__":
    sys.exit(main())
