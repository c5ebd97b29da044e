#!/usr/bin/env python3
"""Fails when the ops layer chooses a backend by preprocessor: src/ops must hold no
`#if`/`#ifdef`/`#elif` that tests TESSEL_HAVE_CUDA, and no hand-written "built without CUDA" error.

The backend seam (src/backend/dispatch.hpp) is the one place an op is sent to the backend of its
array's device; in a build without CUDA its generated stubs (src/backend/dispatch.cpp) raise the
one "<entry>: tessel was built without CUDA" DeviceError. Run by ctest as `layers.backend_seam`.

Usage: scripts/check_backend_seam.py [repository root]. Prints each offending line and the count;
exit status 1 when the count is above zero.
"""
import pathlib
import re
import sys

CONDITIONAL = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif)\b.*\bTESSEL_HAVE_CUDA\b")
# A string literal (outside // comments) that says so.
HAND_WRITTEN = re.compile(r'"[^"]*(built without CUDA|has no CUDA backend)')
COMMENT = re.compile(r"//.*$")
SUFFIXES = {".hpp", ".cpp", ".h", ".cu", ".cuh"}


def offending_lines(root: pathlib.Path):
    """(path, line number, line) of every CUDA conditional and hand-written no-CUDA error in src/ops."""
    for path in sorted((root / "src" / "ops").rglob("*")):
        if path.suffix not in SUFFIXES or not path.is_file():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if CONDITIONAL.match(line) or HAND_WRITTEN.search(COMMENT.sub("", line)):
                yield path.relative_to(root), number, line.strip()


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent).resolve()
    found = list(offending_lines(root))
    for path, number, line in found:
        print(f"{path}:{number}: {line}")
    print(f"{len(found)} CUDA conditionals or hand-written no-CUDA errors in src/ops (the limit is 0: "
          "dispatch through src/backend/dispatch.hpp)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
