"""The public names of tessel's Python namespaces are declared where the docs and type checkers
read them: each one in its type stub (python/tessel/*.pyi) and, for the main namespace, in the API
reference (docs/api/tessel.rst), and nothing is declared there that does not exist. The Python
functions are defined once each, in the module of their category (python/tessel/_functions/)."""
from __future__ import annotations

import ast
import importlib
import inspect
import pathlib
import pkgutil
import re
import sys
import types

import pytest

import tessel as ts
from tessel import _functions

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "tessel"
sys.path.insert(0, str(ROOT / "scripts"))
import gen_op_stubs  # noqa: E402


def stub_names(path):
    """The public names a stub declares: its functions, classes, annotated and assigned names and
    re-exports (`from . import x as x`), but not its type aliases (`ShapeLike = Union[...]`)."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign) and not isinstance(node.value, ast.Subscript):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.ImportFrom) and node.level == 1:
            names.update(a.asname for a in node.names if a.asname == a.name)
    return {n for n in names if not n.startswith("_") or n.startswith("__array")}


def public_names(module):
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in dir(module) if not n.startswith("_")]  # dir: a module's lazily loaded names too
    return set(names)


def test_import_loads_neither_numpy_nor_the_kernel_compiler():
    """`import tessel` stays quick: tessel.kernel (and NumPy with it) loads on first use of ts.jit."""
    import subprocess
    import sys

    code = ("import sys, tessel as ts; before = ('numpy' in sys.modules, 'tessel.kernel' in sys.modules); "
            "jit = ts.jit; print(before, 'tessel.kernel' in sys.modules, jit is ts.kernel.jit, 'jit' in dir(ts))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == "(False, False) True True True", out.stdout


def test_stub_declares_the_main_namespace():
    # Subpackages imported on demand (tessel.torch, tessel.numba) become attributes once imported.
    on_demand = {n for n in ("torch", "numba") if isinstance(getattr(ts, n, None), types.ModuleType)}
    runtime = public_names(ts) - on_demand | {"__array_namespace_info__", "__array_api_version__"}
    declared = stub_names(PACKAGE / "__init__.pyi")
    assert not runtime - declared, f"public in tessel but not in __init__.pyi: {sorted(runtime - declared)}"
    assert not declared - runtime, f"in __init__.pyi but not in tessel: {sorted(declared - runtime)}"


@pytest.mark.parametrize("name", ["linalg", "fft", "random", "cuda", "sim", "distributed"])
def test_stub_declares_the_submodule(name):
    module = getattr(ts, name)
    runtime = public_names(module)
    declared = stub_names(PACKAGE / f"{name}.pyi")
    assert not runtime - declared, f"public in tessel.{name} but not in {name}.pyi: {sorted(runtime - declared)}"
    assert not declared - runtime, f"in {name}.pyi but not in tessel.{name}: {sorted(declared - runtime)}"


def test_api_page_lists_the_main_namespace():
    """Every public function and class has an entry in docs/api/tessel.rst; the dtypes and constants
    are named in its text; every entry exists."""
    page = (ROOT / "docs" / "api" / "tessel.rst").read_text(encoding="utf-8")
    entries = set(re.findall(r"^\.\. (?:autofunction|autoclass|autodata|py:data|py:function):: (\w+)", page, re.M))
    also = re.search(r"^\.\. elementwise-functions::\n(?:   :also: ([\w ]+)\n)?", page, re.M)
    if also:  # the directive's entries: every op row, and the names after :also:
        entries |= {name for rows in gen_op_stubs.op_rows().values() for name, _ in rows}
        entries |= set((also.group(1) or "").split())
    if re.search(r"^\.\. elementwise-aliases::", page, re.M):
        entries |= {alias for alias, _ in gen_op_stubs.op_aliases()}
    for family, rows in (("reduction", gen_op_stubs.reduction_rows), ("sorting", gen_op_stubs.sort_rows),
                         ("set", gen_op_stubs.set_rows), ("indexing", gen_op_stubs.indexing_rows)):
        if re.search(rf"^\.\. {family}-functions::", page, re.M):
            entries |= {name for name, _, _ in rows()}
    quoted = set(re.findall(r"``(\w+)``", page))
    missing, named_only = [], []
    for name in sorted(public_names(ts)):
        value = getattr(ts, name)
        if isinstance(value, types.ModuleType):
            continue  # each submodule has its own page
        if isinstance(value, (ts.dtype, float, type(None))):
            (named_only if name in quoted else missing).append(name)
        elif name not in entries:
            missing.append(name)
    assert not missing, f"public in tessel but not in docs/api/tessel.rst: {missing}"
    unknown = sorted(n for n in entries if not hasattr(ts, n))
    assert not unknown, f"docs/api/tessel.rst documents names tessel does not have: {unknown}"


def test_elementwise_stubs_and_docstrings_follow_the_op_rows():
    """The generated block of __init__.pyi is what scripts/gen_op_stubs.py writes from the rows,
    and each function's runtime docstring is its row's."""
    stubs = (PACKAGE / "__init__.pyi").read_text(encoding="utf-8")
    rows = gen_op_stubs.op_rows()
    assert gen_op_stubs.updated_stubs(stubs, rows) == stubs, "run python3 scripts/gen_op_stubs.py"
    assert len(rows["unary"]) > 40 and len(rows["binary"]) > 25
    for name, doc in rows["unary"] + rows["binary"]:
        assert doc and doc.split("\n")[0] in getattr(ts, name).__doc__, name
    assert "x1 + x2 with broadcasting" in gen_op_stubs.stub_block(rows)
    aliases = gen_op_stubs.op_aliases()
    assert len(aliases) >= 16 and all(getattr(ts, alias) is getattr(ts, name) for alias, name in aliases)


def test_reductions_follow_their_rows():
    """Each reduction row is bound as a function and an Array method with the row's docstring, and
    the namespace function (the binding or a Python function over it) has that docstring too. The
    stubs of both are in the generated blocks that the test above checks."""
    rows = gen_op_stubs.reduction_rows()
    assert len(rows) >= 22
    assert list(ts._tessel._reduction_functions.items()) == [(name, doc) for name, _, doc in rows]
    for name, _, doc in rows:
        for function in (getattr(ts._tessel, name), getattr(ts.Array, name), getattr(ts, name)):
            assert doc in function.__doc__, (name, function)
    assert "Sum over ``axis``" in ts.sum.__doc__


@pytest.mark.parametrize("family,names,stub_lines", [
    ("sorting", ["sort", "argsort", "searchsorted"],
     ["def searchsorted(x1: Array, x2: Union[Array, Scalar], /, *, side: Literal['left', 'right'] = 'left', "
      "sorter: Optional[Array] = None) -> Array:",
      "def sort(x: Array, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Array:"]),
    ("set", ["unique_values", "unique_counts", "unique_inverse", "unique_all", "isin"],
     ["def isin(x1: Union[Array, Scalar], x2: Union[Array, Scalar], /, *, invert: bool = False) -> Array:"]),
])
def test_python_functions_follow_their_rows(family, names, stub_lines):
    """Each row of sort_list.hpp / set_ops_list.hpp (functions written in Python) is reached from
    the bindings, in row order, with its docstring, which is tessel's function's __doc__ and that of
    the function in python/tessel/_functions/; the stubs are the generated block (its parameters
    those of the Python function); docs/api/tessel.rst lists the rows by the family's directive and
    not by hand."""
    rows = {"sorting": gen_op_stubs.sort_rows, "set": gen_op_stubs.set_rows}[family]()
    assert [name for name, _, _ in rows] == names
    assert list(getattr(ts._tessel, f"_{family}_functions").items()) == [(name, doc) for name, _, doc in rows]
    modules = (_functions.sorting, _functions.searching, _functions.sets)
    for name, _, doc in rows:
        assert getattr(ts, name).__doc__ == doc, name
        assert any(getattr(ts, name) is getattr(module, name, None) for module in modules), name
    assert_generated_stubs_and_api_entries(family, names, stub_lines)


def test_indexing_functions_follow_their_rows():
    """Each row of indexing_list.hpp is bound with the row's docstring and is tessel's function of
    that name; the stubs are the generated block (the shape's parameters and result);
    docs/api/tessel.rst lists the rows by the indexing-functions directive and not by hand."""
    rows = gen_op_stubs.indexing_rows()
    names = [name for name, _, _ in rows]
    assert names == ["take", "take_along_axis", "put_along_axis", "nonzero"]
    for name, _, doc in rows:
        assert getattr(ts, name) is getattr(ts._tessel, name), name
        assert getattr(ts, name).__doc__.endswith(doc), name
    assert_generated_stubs_and_api_entries("indexing", names, [
        "def take(x: Array, indices: Array, /, *, axis: Optional[int] = None) -> Array:",
        "def put_along_axis(arr: Array, indices: Array, values: ArrayLike, axis: Optional[int]) -> None:",
        "def nonzero(x: Array, /) -> Tuple[Array, ...]:"])


def assert_generated_stubs_and_api_entries(family, names, stub_lines):
    """__init__.pyi's generated blocks are up to date and hold stub_lines; docs/api/tessel.rst
    lists names by the family's directive and not by hand."""
    stubs = (PACKAGE / "__init__.pyi").read_text(encoding="utf-8")
    assert gen_op_stubs.updated_stubs(stubs, gen_op_stubs.op_rows()) == stubs, "run python3 scripts/gen_op_stubs.py"
    for line in stub_lines:
        assert line in stubs
    page = (ROOT / "docs" / "api" / "tessel.rst").read_text(encoding="utf-8")
    assert re.search(rf"^\.\. {family}-functions::", page, re.M)
    by_hand = set(re.findall(r"^\.\. autofunction:: (\w+)", page, re.M))
    assert not by_hand & set(names), f"listed by hand and by the {family}-functions directive"


def api_page_entries(page_name, family, names):
    """What docs/api/<page_name> documents: its autofunction and autoclass entries, and names when it
    has the family's directive."""
    page = (ROOT / "docs" / "api" / page_name).read_text(encoding="utf-8")
    entries = set(re.findall(r"^\.\. (?:autofunction|autoclass):: (\w+)", page, re.M))
    if re.search(rf"^\.\. {family}-functions::", page, re.M):
        entries |= set(names)
    return entries


def test_fft_functions_follow_their_rows():
    """Each fft row (include/tessel/ops/fft_list.hpp) is bound with the row's docstring and is
    tessel.fft's function of that name; tessel.fft exports the rows in row order, then the plan and
    its cache controls; fft.pyi's stubs are the generated block; docs/api/fft.rst lists them all."""
    rows = gen_op_stubs.fft_rows()
    names = [name for name, _, _ in rows]
    assert len(rows) >= 18
    assert list(ts._tessel._fft._fft_functions.items()) == [(name, doc) for name, _, doc in rows]
    for name, _, doc in rows:
        assert getattr(ts.fft, name) is getattr(ts._tessel._fft, name), name
        assert doc in getattr(ts.fft, name).__doc__, name
    assert ts.fft.__all__ == names + ["Plan", "plan_cache_info", "set_plan_cache_limits", "clear_plan_cache"]
    stubs = (PACKAGE / "fft.pyi").read_text(encoding="utf-8")
    assert gen_op_stubs.updated_fft_stubs(stubs, rows) == stubs, "run python3 scripts/gen_op_stubs.py"
    entries = api_page_entries("fft.rst", "fft", names)
    assert entries == set(ts.fft.__all__), sorted(entries ^ set(ts.fft.__all__))


def test_linalg_functions_follow_their_rows():
    """Each linalg row (include/tessel/ops/linalg_list.hpp) is bound with the row's docstring, and
    tessel.linalg's function of that name (written in Python over the binding) has that docstring
    and the row shape's parameters; tessel.linalg exports the rows; linalg.pyi's stubs are the
    generated block; docs/api/linalg.rst lists them all (matmul and vecdot are tessel's own, on the
    tessel page)."""
    rows = gen_op_stubs.linalg_rows()
    names = [name for name, _, _, _ in rows]
    assert len(rows) >= 16
    assert list(ts._tessel._linalg._linalg_functions.items()) == [(name, doc) for name, _, _, doc in rows]
    for name, shape, result, doc in rows:
        assert doc in getattr(ts._tessel._linalg, name).__doc__, name
        function = getattr(ts.linalg, name)
        assert function.__doc__ == doc, name
        stub = ast.parse(f"def f({gen_op_stubs.LINALG_PARAMETERS[shape]}): ...").body[0].args
        parameters = inspect.signature(function).parameters.values()
        kinds = {"posonlyargs": inspect.Parameter.POSITIONAL_ONLY, "args": inspect.Parameter.POSITIONAL_OR_KEYWORD,
                 "kwonlyargs": inspect.Parameter.KEYWORD_ONLY}
        expected = [(a.arg, kinds[k]) for k in kinds for a in getattr(stub, k)]
        assert [(p.name, p.kind) for p in parameters] == expected, name
        assert result == "Array" or issubclass(getattr(ts.linalg, result), tuple), name
    assert [n for n in ts.linalg.__all__ if n in names] == names
    stubs = (PACKAGE / "linalg.pyi").read_text(encoding="utf-8")
    assert gen_op_stubs.updated_linalg_stubs(stubs, rows) == stubs, "run python3 scripts/gen_op_stubs.py"
    entries = api_page_entries("linalg.rst", "linalg", names)
    assert entries == set(ts.linalg.__all__) - {"matmul", "vecdot"}, sorted(entries ^ set(ts.linalg.__all__))


def function_modules():
    return [importlib.import_module(f"tessel._functions.{m.name}")
            for m in pkgutil.iter_modules(_functions.__path__) if not m.name.startswith("_")]


@pytest.mark.parametrize("module", function_modules(), ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_each_python_function_is_the_namespace_function(module):
    """A public function of a category module is tessel.<name> itself (imported by name in
    tessel/__init__.py, not shadowed or left out)."""
    for name, value in vars(module).items():
        if name.startswith("_") and name != "__array_namespace_info__" or not inspect.isfunction(value):
            continue
        if value.__module__ != module.__name__:
            continue  # imported from another module
        assert getattr(ts, name, None) is value, f"{module.__name__}.{name} is not tessel.{name}"


def test_namespace_functions_come_from_their_category_modules():
    """The Python functions of the namespace are defined in python/tessel/_functions/ (or in the
    subpackage they belong to), not in tessel/__init__.py."""
    homes = ("tessel._functions.", "tessel.linalg", "tessel._fuse", "tessel._profile", "tessel.kernel")
    for name in public_names(ts):
        value = getattr(ts, name)
        if inspect.isfunction(value):
            assert value.__module__.startswith(homes), f"tessel.{name} is defined in {value.__module__}"


def test_numpy_dispatch_covers_every_bound_reduction():
    """Each reduction row (include/tessel/ops/reduce_list.hpp) runs for np.<name>(x), so adding a
    row without its NumPy entry fails here."""
    from tessel import _numpy_protocols

    reductions = list(ts._tessel._reduction_functions)
    assert reductions
    missing = [n for n in reductions if n not in _numpy_protocols.FUNCTIONS]
    assert not missing, f"reductions without a NumPy dispatch entry in _numpy_protocols.FUNCTIONS: {missing}"
