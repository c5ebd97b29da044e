#!/usr/bin/env python3
"""Writes the elementwise functions' stubs into python/tessel/__init__.pyi from the op rows of
include/tessel/ops/elementwise_list.hpp (name, Python name, docstring): one def per row, between
the two marker lines, unary rows first, in row order, then NumPy's aliases.

    python3 scripts/gen_op_stubs.py           # rewrite the block
    python3 scripts/gen_op_stubs.py --check   # exit 1 if the block is out of date

The docs' API reference lists the same rows (docs/_ext/tessel_docs.py reads them with
op_rows() below), and the bindings take their docstrings from the rows too.
"""
from __future__ import annotations

import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
ROWS = os.path.join(ROOT, "include", "tessel", "ops", "elementwise_list.hpp")
STUBS = os.path.join(ROOT, "python", "tessel", "__init__.pyi")
BEGIN = "# ---- elementwise functions: generated from the op rows by scripts/gen_op_stubs.py ----"
END = "# ---- end of the generated elementwise functions ----"

_ROW = re.compile(r'X\((\w+),\s*"(\w+)",\s*\w+,\s*\w+,\s*[\w|]+,\s*(?:/\*.*?\*/\s*)?((?:"(?:[^"\\]|\\.)*"\s*)+)\)',
                  re.S)
_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')
_ESCAPES = {"n": "\n", "\\": "\\", '"': '"', "t": "\t"}


def _c_string(literals: str) -> str:
    """The value of adjacent C string literals (the escapes the rows use: \\n \\\\ \\" \\t)."""
    out = []
    for body in _LITERAL.findall(literals):
        out.append(re.sub(r"\\(.)", lambda m: _ESCAPES[m.group(1)], body))
    return "".join(out)


def _macro_body(text: str, macro: str, path: str) -> str:
    if f"#define {macro}(X)" not in text:
        raise SystemExit(f"gen_op_stubs: no {macro} in {path}")
    return text.split(f"#define {macro}(X)", 1)[1].split("\n\n", 1)[0]


def op_rows(path: str = ROWS) -> dict[str, list[tuple[str, str]]]:
    """{"binary": [(python_name, docstring), ...], "unary": [...]}, in row order."""
    text = open(path, encoding="utf-8").read().replace("\\\n", "\n")
    rows = {}
    for kind, macro in (("binary", "TESSEL_BINARY_OPS"), ("unary", "TESSEL_UNARY_OPS")):
        rows[kind] = [(python_name, _c_string(doc)) for _, python_name, doc in _ROW.findall(_macro_body(text, macro, path))]
        if not rows[kind]:
            raise SystemExit(f"gen_op_stubs: no rows of {macro} in {path}")
    return rows


def op_aliases(path: str = ROWS) -> list[tuple[str, str]]:
    """[(alias, python_name), ...]: NumPy's spellings, in row order."""
    text = open(path, encoding="utf-8").read().replace("\\\n", "\n")
    return re.findall(r'X\((\w+),\s*"(\w+)"\)', _macro_body(text, "TESSEL_ELEMENTWISE_ALIASES", path))


def _docstring(doc: str) -> str:
    lines = doc.split("\n")
    if len(lines) == 1:
        return f'    """{doc}"""'
    body = "\n".join(("    " + line) if line else "" for line in lines[1:])
    return f'    """{lines[0]}\n{body}\n    """'


def stub_block(rows: dict[str, list[tuple[str, str]]]) -> str:
    defs = [BEGIN]
    for name, doc in rows["unary"]:
        defs += [f"def {name}(x: ArrayLike, /) -> Array:", _docstring(doc)]
    for name, doc in rows["binary"]:
        defs += [f"def {name}(x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None) -> Array:",
                 _docstring(doc)]
    unary = {name for name, _ in rows["unary"]}
    for alias, name in op_aliases():
        head = "x: ArrayLike, /" if name in unary else "x1: ArrayLike, x2: ArrayLike, /, *, out: Optional[Array] = None"
        defs += [f"def {alias}({head}) -> Array:", f'    """Alias of :func:`{name}`."""']
    defs.append(END)
    return "\n".join(defs)


def updated_stubs(stubs: str, rows) -> str:
    if BEGIN not in stubs or END not in stubs:
        raise SystemExit(f"gen_op_stubs: the marker lines are not in {STUBS}")
    head, rest = stubs.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    return head + stub_block(rows) + tail


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the stubs are out of date")
    args = parser.parse_args()
    stubs = open(STUBS, encoding="utf-8").read()
    new = updated_stubs(stubs, op_rows())
    if args.check:
        if new != stubs:
            print(f"gen_op_stubs: {STUBS} is out of date with {ROWS}: run python3 scripts/gen_op_stubs.py",
                  file=sys.stderr)
            return 1
        return 0
    if new != stubs:
        with open(STUBS, "w", encoding="utf-8") as f:
            f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
