#!/usr/bin/env python3
"""Writes stubs from the op rows, each block between its two marker lines:

- the elementwise functions, from include/tessel/ops/elementwise_list.hpp (name, Python name,
  docstring): one def per row, unary rows first, in row order, then NumPy's aliases;
- the reductions, from include/tessel/ops/reduce_list.hpp (name, Python name, shape, docstring):
  one def per row with its shape's parameters, in row order, and the same methods of Array;
- the sorting and searching functions, from include/tessel/ops/sort_list.hpp (name, Python name,
  shape, docstring): one def per row with its Python function's parameters and its shape's result,
  in row order;
- the set functions, from include/tessel/ops/set_ops_list.hpp (name, Python name, shape,
  docstring): one def per row with its Python function's parameters and its shape's result, in
  row order;
- the indexing functions, from include/tessel/ops/indexing_list.hpp (name, Python name, shape,
  docstring): one def per row with its shape's parameters and result, in row order;
- tessel.fft's transforms and helpers, into python/tessel/fft.pyi, from
  include/tessel/ops/fft_list.hpp (name, Python name, shape, docstring): one def per row with its
  shape's parameters, in row order;
- tessel.linalg's factorizations and solvers, into python/tessel/linalg.pyi, from
  include/tessel/ops/linalg_list.hpp (name, Python name, shape, result, docstring): one def per row
  with its shape's parameters and its result, in row order.

    python3 scripts/gen_op_stubs.py           # rewrite the blocks
    python3 scripts/gen_op_stubs.py --check   # exit 1 if a block is out of date

The docs' API reference lists the same rows (docs/_ext/tessel_docs.py reads them with op_rows(),
reduction_rows(), sort_rows(), set_rows(), indexing_rows(), fft_rows() and linalg_rows() below), and the
bindings take their docstrings from the rows too.
"""
from __future__ import annotations

import argparse
import ast
import os
import re
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
ROWS = os.path.join(ROOT, "include", "tessel", "ops", "elementwise_list.hpp")
REDUCTION_ROWS = os.path.join(ROOT, "include", "tessel", "ops", "reduce_list.hpp")
FFT_ROWS = os.path.join(ROOT, "include", "tessel", "ops", "fft_list.hpp")
SORT_ROWS = os.path.join(ROOT, "include", "tessel", "ops", "sort_list.hpp")
SET_ROWS = os.path.join(ROOT, "include", "tessel", "ops", "set_ops_list.hpp")
INDEXING_ROWS = os.path.join(ROOT, "include", "tessel", "ops", "indexing_list.hpp")
LINALG_ROWS = os.path.join(ROOT, "include", "tessel", "ops", "linalg_list.hpp")
FUNCTIONS = os.path.join(ROOT, "python", "tessel", "_functions")
STUBS = os.path.join(ROOT, "python", "tessel", "__init__.pyi")
FFT_STUBS = os.path.join(ROOT, "python", "tessel", "fft.pyi")
LINALG_STUBS = os.path.join(ROOT, "python", "tessel", "linalg.pyi")
BEGIN = "# ---- elementwise functions: generated from the op rows by scripts/gen_op_stubs.py ----"
END = "# ---- end of the generated elementwise functions ----"
REDUCTIONS_BEGIN = "# ---- reductions: generated from the reduction rows by scripts/gen_op_stubs.py ----"
REDUCTIONS_END = "# ---- end of the generated reductions ----"
METHODS_BEGIN = "    # ---- reduction methods: generated from the reduction rows by scripts/gen_op_stubs.py ----"
METHODS_END = "    # ---- end of the generated reduction methods ----"
SORTING_BEGIN = "# ---- sorting and searching functions: generated from the sort rows by scripts/gen_op_stubs.py ----"
SORTING_END = "# ---- end of the generated sorting and searching functions ----"
SETS_BEGIN = "# ---- set functions: generated from the set rows by scripts/gen_op_stubs.py ----"
SETS_END = "# ---- end of the generated set functions ----"
INDEXING_BEGIN = "# ---- indexing functions: generated from the indexing rows by scripts/gen_op_stubs.py ----"
INDEXING_END = "# ---- end of the generated indexing functions ----"
FFT_BEGIN = "# ---- transforms: generated from the fft rows by scripts/gen_op_stubs.py ----"
FFT_END = "# ---- end of the generated transforms ----"
LINALG_BEGIN = "# ---- factorizations and solvers: generated from the linalg rows by scripts/gen_op_stubs.py ----"
LINALG_END = "# ---- end of the generated factorizations and solvers ----"
WIDTH = 100  # docstrings are wrapped to this many columns

# The parameters of each shape of reduction row, as the bindings take them (python/bindings/
# array.cpp): the function's and the Array method's.
REDUCTION_PARAMETERS = {
    "dtype": ("x: Array, /, *, axis: Axis = None, dtype: Optional[DTypeLike] = None, keepdims: bool = False",
              "self, axis: Axis = None, *, dtype: Optional[DTypeLike] = None, keepdims: bool = False"),
    "plain": ("x: Array, /, *, axis: Axis = None, keepdims: bool = False",
              "self, axis: Axis = None, *, keepdims: bool = False"),
    "variance": ("x: Array, /, *, axis: Axis = None, correction: float = 0.0, keepdims: bool = False",
                 "self, axis: Axis = None, *, ddof: float = 0, keepdims: bool = False"),
    "arg": ("x: Array, /, *, axis: Optional[int] = None, keepdims: bool = False",
            "self, axis: Optional[int] = None, *, keepdims: bool = False"),
    "scan": ("x: Array, axis: Optional[int] = None", "self, axis: Optional[int] = None"),
}

# The parameters of each shape of fft row, as the bindings take them (python/bindings/fft.cpp).
FFT_PARAMETERS = {
    "one_axis": 'x: Any, /, *, n: Optional[int] = None, axis: int = -1, norm: Norm = "backward"',
    "n_axes": 'x: Any, /, *, s: Optional[Sequence[int]] = None, axes: Optional[Sequence[int]] = None, norm: Norm = "backward"',
    "two_axes": 'x: Any, /, *, s: Optional[Sequence[int]] = None, axes: Sequence[int] = (-2, -1), norm: Norm = "backward"',
    "freq": "n: int, /, *, d: float = 1.0, dtype: Any = None, device: DeviceLike = None",
    "shift": "x: Any, /, *, axes: Union[int, Sequence[int], None] = None",
}

# The parameters and result of each shape of sort row (the Python functions of
# python/tessel/_functions/sorting.py and searching.py, whose own parameters the stubs take).
SORT_PARAMETERS = {
    "sort": ("x: Array, /, *, axis: int = -1, descending: bool = False, stable: bool = True", "Array"),
    "search": ("x1: Array, x2: Union[Array, Scalar], /, *, side: Literal['left', 'right'] = 'left', "
               "sorter: Optional[Array] = None", "Array"),
}

# The parameters and result of each shape of set row (the Python functions of
# python/tessel/_functions/sets.py, whose own parameters the stubs take).
SET_PARAMETERS = {
    "unique": ("x: Array, /", "Array"),
    "unique_pair": ("x: Array, /", "Tuple[Array, Array]"),
    "unique_all": ("x: Array, /", "Tuple[Array, Array, Array, Array]"),
    "membership": ("x1: Union[Array, Scalar], x2: Union[Array, Scalar], /, *, invert: bool = False", "Array"),
}

# The parameters and result of each shape of indexing row, as the bindings take them
# (python/bindings/indexing.cpp).
INDEXING_PARAMETERS = {
    "gather": ("x: Array, indices: Array, /, *, axis: Optional[int] = None", "Array"),
    "gather_along": ("x: Array, indices: Array, /, *, axis: Optional[int] = -1", "Array"),
    "scatter_along": ("arr: Array, indices: Array, values: ArrayLike, axis: Optional[int]", "None"),
    "per_axis": ("x: Array, /", "Tuple[Array, ...]"),
}

# The parameters of each shape of linalg row, as the Python functions of python/tessel/linalg.py
# take them (positional-only, as the bindings of python/bindings/linalg.cpp are called).
LINALG_PARAMETERS = {
    "matrix": "x: Array, /",
    "upper": "x: Array, /, *, upper: bool = False",
    "two_matrices": "x1: Array, x2: Array, /",
    "mode": 'x: Array, /, *, mode: Literal["reduced", "complete"] = "reduced"',
    "full_matrices": "x: Array, /, *, full_matrices: bool = True",
}

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


# X(name, "python_name", shape, "docstring"): the rows of reduce_list.hpp, fft_list.hpp, set_ops_list.hpp,
# sort_list.hpp and indexing_list.hpp (linalg_list.hpp adds a result type: its own pattern).
_SHAPE_ROW = re.compile(r'X\((\w+),\s*"(\w+)",\s*(\w+),\s*((?:"(?:[^"\\]|\\.)*"\s*)+)\)', re.S)


def _family_rows(path: str, macro: str, family: str, shapes, pattern=_SHAPE_ROW) -> list[tuple]:
    """The rows of `macro` in row order, without the C++ name: (python_name, shape[, result],
    docstring); every shape must be one of `shapes`."""
    text = open(path, encoding="utf-8").read().replace("\\\n", "\n")
    rows = [match[1:-1] + (_c_string(match[-1]),) for match in pattern.findall(_macro_body(text, macro, path))]
    if not rows:
        raise SystemExit(f"gen_op_stubs: no rows of {macro} in {path}")
    unknown = sorted({row[1] for row in rows} - set(shapes))
    if unknown:
        raise SystemExit(f"gen_op_stubs: {family} shapes without parameters here: {unknown}")
    return rows


def reduction_rows(path: str = REDUCTION_ROWS) -> list[tuple[str, str, str]]:
    """[(python_name, shape, docstring), ...] of TESSEL_REDUCTION_OPS, in row order."""
    return _family_rows(path, "TESSEL_REDUCTION_OPS", "reduction", REDUCTION_PARAMETERS)


def sort_rows(path: str = SORT_ROWS) -> list[tuple[str, str, str]]:
    """[(python_name, shape, docstring), ...] of TESSEL_SORT_OPS, in row order."""
    return _family_rows(path, "TESSEL_SORT_OPS", "sort", SORT_PARAMETERS)


def set_rows(path: str = SET_ROWS) -> list[tuple[str, str, str]]:
    """[(python_name, shape, docstring), ...] of TESSEL_SET_OPS, in row order."""
    return _family_rows(path, "TESSEL_SET_OPS", "set", SET_PARAMETERS)


def indexing_rows(path: str = INDEXING_ROWS) -> list[tuple[str, str, str]]:
    """[(python_name, shape, docstring), ...] of TESSEL_INDEXING_OPS, in row order."""
    return _family_rows(path, "TESSEL_INDEXING_OPS", "indexing", INDEXING_PARAMETERS)


def fft_rows(path: str = FFT_ROWS) -> list[tuple[str, str, str]]:
    """[(python_name, shape, docstring), ...] of TESSEL_FFT_OPS, in row order."""
    return _family_rows(path, "TESSEL_FFT_OPS", "fft", FFT_PARAMETERS)


def _split_parameters(parameters: str) -> list[str]:
    """The parameters of a stub's parameter list, split at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(parameters):
        depth += c in "([" and 1 or c in ")]" and -1 or 0
        if c == "," and depth == 0:
            parts.append(parameters[start:i].strip())
            start = i + 1
    return parts + [parameters[start:].strip()]


# X(name, "python_name", shape, Result, "docstring"): the rows of linalg_list.hpp.
_RESULT_ROW = re.compile(r'X\((\w+),\s*"(\w+)",\s*(\w+),\s*(\w+),\s*((?:"(?:[^"\\]|\\.)*"\s*)+)\)', re.S)


def linalg_rows(path: str = LINALG_ROWS) -> list[tuple[str, str, str, str]]:
    """[(python_name, shape, result, docstring), ...] of TESSEL_LINALG_OPS, in row order."""
    return _family_rows(path, "TESSEL_LINALG_OPS", "linalg", LINALG_PARAMETERS, _RESULT_ROW)


def _python_parameters(name: str, shape_parameters: str):
    """The parameters of the namespace function `name` where it is written in Python (a def in
    python/tessel/_functions/, which replaces the binding in the namespace), each annotated as the
    parameter of that name in `shape_parameters`; None where there is no such def."""
    annotations = {}
    for parameter in _split_parameters(shape_parameters):
        if ":" in parameter:
            parameter_name, rest = parameter.split(":", 1)
            annotations[parameter_name] = rest.split("=", 1)[0].strip()
    for file in sorted(os.listdir(FUNCTIONS)):
        if not file.endswith(".py"):
            continue
        tree = ast.parse(open(os.path.join(FUNCTIONS, file), encoding="utf-8").read())
        node = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
        if node is None:
            continue
        args = node.args
        if args.vararg or args.kwarg:
            raise SystemExit(f"gen_op_stubs: {file}: {name} takes *args or **kwargs, which a stub cannot follow")

        def one(arg, default):
            if arg.arg not in annotations:
                raise SystemExit(f"gen_op_stubs: {file}: {name}'s parameter {arg.arg} is not one of its row's shape")
            text = f"{arg.arg}: {annotations[arg.arg]}"
            return text if default is None else f"{text} = {ast.unparse(default)}"

        positional = args.posonlyargs + args.args
        defaults = [None] * (len(positional) - len(args.defaults)) + args.defaults
        parts = []
        for i, (arg, default) in enumerate(zip(positional, defaults)):
            parts.append(one(arg, default))
            if i + 1 == len(args.posonlyargs):
                parts.append("/")
        if args.kwonlyargs:
            parts.append("*")
        parts += [one(arg, default) for arg, default in zip(args.kwonlyargs, args.kw_defaults)]
        return ", ".join(parts)
    return None


def _docstring(doc: str, indent: str = "    ") -> str:
    """A docstring at `indent`, each line of `doc` wrapped to WIDTH columns."""
    if "\n" not in doc and len(indent) + len(doc) + 6 <= WIDTH:
        return f'{indent}"""{doc}"""'
    lines = []
    for line in doc.split("\n"):
        lines += textwrap.wrap(line, WIDTH - len(indent) - 3, break_long_words=False, break_on_hyphens=False) or [""]
    body = "".join(((indent + line) if line else "") + "\n" for line in lines[1:])
    return f'{indent}"""{lines[0]}\n{body}{indent}"""'


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


def reduction_block(rows: list[tuple[str, str, str]]) -> str:
    """The namespace functions: the parameters of their Python def where they have one, else their
    shape's."""
    defs = [REDUCTIONS_BEGIN]
    for name, shape, doc in rows:
        function = REDUCTION_PARAMETERS[shape][0]
        defs += [f"def {name}({_python_parameters(name, function) or function}) -> Array:", _docstring(doc)]
    defs.append(REDUCTIONS_END)
    return "\n".join(defs)


def method_block(rows: list[tuple[str, str, str]]) -> str:
    defs = [METHODS_BEGIN]
    for name, shape, doc in rows:
        defs += [f"    def {name}({REDUCTION_PARAMETERS[shape][1]}) -> Array:", _docstring(doc, " " * 8)]
    defs.append(METHODS_END)
    return "\n".join(defs)


def shape_block(rows: list[tuple[str, str, str]], parameters: dict, begin: str, end: str) -> str:
    """Rows whose shapes give (parameters, result): each stub takes its shape's result and its
    shape's parameters, or those of its def where the function is written in Python (sets.py,
    sorting.py, searching.py)."""
    defs = [begin]
    for name, shape, doc in rows:
        shape_parameters, result = parameters[shape]
        defs += [f"def {name}({_python_parameters(name, shape_parameters) or shape_parameters}) -> {result}:",
                 _docstring(doc)]
    defs.append(end)
    return "\n".join(defs)


def fft_block(rows: list[tuple[str, str, str]]) -> str:
    defs = [FFT_BEGIN]
    for name, shape, doc in rows:
        defs += [f"def {name}({FFT_PARAMETERS[shape]}) -> Array:", _docstring(doc)]
    defs.append(FFT_END)
    return "\n".join(defs)


def linalg_block(rows: list[tuple[str, str, str, str]]) -> str:
    defs = [LINALG_BEGIN]
    for name, shape, result, doc in rows:
        defs += [f"def {name}({LINALG_PARAMETERS[shape]}) -> {result}:", _docstring(doc)]
    defs.append(LINALG_END)
    return "\n".join(defs)


def _replace_block(stubs: str, begin: str, end: str, block: str, path: str = STUBS) -> str:
    if begin not in stubs or end not in stubs:
        raise SystemExit(f"gen_op_stubs: the marker lines {begin.strip()!r} ... are not in {path}")
    head, rest = stubs.split(begin, 1)
    return head + block + rest.split(end, 1)[1]


def updated_stubs(stubs: str, rows, reductions=None, sets=None, sorting=None, indexing=None) -> str:
    reductions = reduction_rows() if reductions is None else reductions
    sets = set_rows() if sets is None else sets
    sorting = sort_rows() if sorting is None else sorting
    indexing = indexing_rows() if indexing is None else indexing
    stubs = _replace_block(stubs, BEGIN, END, stub_block(rows))
    for rows_of, parameters, begin, end in ((sorting, SORT_PARAMETERS, SORTING_BEGIN, SORTING_END),
                                            (sets, SET_PARAMETERS, SETS_BEGIN, SETS_END),
                                            (indexing, INDEXING_PARAMETERS, INDEXING_BEGIN, INDEXING_END)):
        stubs = _replace_block(stubs, begin, end, shape_block(rows_of, parameters, begin, end))
    stubs = _replace_block(stubs, REDUCTIONS_BEGIN, REDUCTIONS_END, reduction_block(reductions))
    return _replace_block(stubs, METHODS_BEGIN, METHODS_END, method_block(reductions))


def updated_fft_stubs(stubs: str, rows=None) -> str:
    rows = fft_rows() if rows is None else rows
    return _replace_block(stubs, FFT_BEGIN, FFT_END, fft_block(rows), FFT_STUBS)


def updated_linalg_stubs(stubs: str, rows=None) -> str:
    rows = linalg_rows() if rows is None else rows
    return _replace_block(stubs, LINALG_BEGIN, LINALG_END, linalg_block(rows), LINALG_STUBS)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the stubs are out of date")
    args = parser.parse_args()
    stale = []
    for path, update in ((STUBS, lambda text: updated_stubs(text, op_rows())), (FFT_STUBS, updated_fft_stubs),
                         (LINALG_STUBS, updated_linalg_stubs)):
        stubs = open(path, encoding="utf-8").read()
        new = update(stubs)
        if new == stubs:
            continue
        if args.check:
            stale.append(path)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
    for path in stale:
        print(f"gen_op_stubs: {path} is out of date with the op rows: run python3 scripts/gen_op_stubs.py",
              file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
