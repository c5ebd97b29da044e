"""Sphinx extension for the tessel docs.

1. The API reference without the compiled extension: the package ``tessel`` is assembled from
   the type stubs ``python/tessel/*.pyi`` (executed statement by statement, with forward
   references retried once the names they need exist), and objects whose stub has no docstring
   take the docstring of the same name in ``python/tessel/*.py``. sphinx.ext.autodoc then
   documents these stand-in objects like any module. The real package is never imported in the
   Sphinx process.
2. The ``elementwise-functions``, ``reduction-functions``, ``sorting-functions``,
   ``set-functions``, ``indexing-functions``, ``fft-functions`` and ``linalg-functions``
   directives: the API reference's entries of the elementwise functions, the reductions, the
   sorting and searching functions, the set functions, the indexing functions, tessel.fft's
   transforms and tessel.linalg's factorizations and solvers, one per op row of
   include/tessel/ops/elementwise_list.hpp, reduce_list.hpp, sort_list.hpp, set_ops_list.hpp,
   indexing_list.hpp, fft_list.hpp and linalg_list.hpp.
3. The ``requires`` directive: examples that need a CUDA GPU (or PyTorch, CuPy...) and so
   cannot run on the CPU backend. It renders a note saying what is needed; the doc tests
   (tests/python/test_docs.py) compile every such block and run it where the requirement holds.
"""
from __future__ import annotations

import __future__
import ast
import inspect
import os
import sys
import types
import typing

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE_DIR = os.path.join(REPO, "python", "tessel")

# The modules of python/tessel/_functions/ (the namespace's Python functions, by category).
FUNCTION_MODULES = tuple(sorted(os.path.join("_functions", f) for f in os.listdir(os.path.join(PACKAGE_DIR, "_functions"))
                                if f.endswith(".py") and not f.startswith("_")))
# Stub module -> the Python sources whose docstrings fill in for the stub's missing ones.
STUB_MODULES = {
    # First: tessel's stub imports jit from it (its own stub imports nothing of tessel).
    "tessel.kernel": ("kernel/__init__.pyi", ("kernel/__init__.py", "kernel/_dispatch.py", "kernel/_compiler.py")),
    "tessel": ("__init__.pyi", ("__init__.py", *FUNCTION_MODULES, "_fuse.py", "linalg.py", "_profile.py")),
    "tessel.cuda": ("cuda.pyi", ("cuda.py",)),
    "tessel.fft": ("fft.pyi", ("fft.py",)),
    "tessel.linalg": ("linalg.pyi", ("linalg.py",)),
    "tessel.random": ("random.pyi", ("random.py",)),
    # In load order: a stub that imports another stub module comes after it (sim uses distributed).
    "tessel.distributed": ("distributed.pyi", ("distributed.py",)),
    "tessel.sim": ("sim.pyi", ("sim.py",)),
    # tessel.torch's stubs import torch (its nn.Linear derives from torch.nn.Linear).
    "tessel.torch": ("torch/__init__.pyi", ("torch/__init__.py", "torch/_linear.py", "torch/_fuse.py",
                                            "torch/_custom.py", "torch/_interop.py")),
    "tessel.torch.nn": ("torch/nn.pyi", ("torch/nn.py",)),
}
# Stub modules that are packages (their submodules are stubs too).
STUB_PACKAGES = {"tessel": PACKAGE_DIR, "tessel.kernel": os.path.join(PACKAGE_DIR, "kernel"),
                 "tessel.torch": os.path.join(PACKAGE_DIR, "torch")}

REQUIREMENTS = {
    "cuda": "a CUDA GPU",
    "torch": "PyTorch",
    "cupy": "CuPy",
    "numba": "Numba",
}


class StubError(RuntimeError):
    pass


def _python_docstrings(paths):
    """{qualified name: docstring} of the top-level functions and classes (and their methods)."""
    docs = {}
    for path in paths:
        full = os.path.join(PACKAGE_DIR, path)
        if not os.path.exists(full):
            continue
        tree = ast.parse(open(full, encoding="utf-8").read(), full)
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                doc = ast.get_docstring(node)
                if doc and not node.name.startswith("_"):
                    docs.setdefault(node.name, doc)
                if isinstance(node, ast.ClassDef):
                    for item in node.body:
                        if isinstance(item, ast.FunctionDef):
                            d = ast.get_docstring(item)
                            if d:
                                docs.setdefault(f"{node.name}.{item.name}", d)
    return docs


def _is_submodule_import(stmt):
    return isinstance(stmt, ast.ImportFrom) and stmt.level == 1 and stmt.module is None


def _execute_stub(module, path):
    """Runs the stub's statements in `module`, retrying those that name something defined later."""
    source = open(path, encoding="utf-8").read()
    tree = ast.parse(source, path)
    flags = __future__.annotations.compiler_flag
    module.__tessel_assigned__ = {t.id for stmt in tree.body if isinstance(stmt, ast.Assign)
                                  for t in stmt.targets if isinstance(t, ast.Name)}
    pending = list(tree.body)
    while pending:
        deferred, errors = [], []
        for stmt in pending:
            code = compile(ast.Module(body=[stmt], type_ignores=[]), path, "exec", flags=flags, dont_inherit=True)
            try:
                exec(code, module.__dict__)
            except (NameError, ImportError, AttributeError) as e:
                deferred.append(stmt)
                errors.append(f"{path}:{stmt.lineno}: {e}")
        if len(deferred) == len(pending):
            raise StubError("cannot execute the stub statements:\n" + "\n".join(errors))
        pending = deferred


def _fill_docstrings(module, docs):
    for name, value in list(vars(module).items()):
        if name.startswith("_") or getattr(value, "__module__", None) != module.__name__:
            continue
        if isinstance(value, (types.FunctionType, type)) and not value.__doc__ and name in docs:
            value.__doc__ = docs[name]
        if isinstance(value, type):
            for attr, member in vars(value).items():
                key = f"{name}.{attr}"
                if key in docs and isinstance(member, types.FunctionType) and not member.__doc__:
                    member.__doc__ = docs[key]


def _merge_overloads(module):
    """A function documented once for its @overload variants: the first variant's parameters,
    with each annotation that differs between variants joined by "|"."""
    for name, value in list(vars(module).items()):
        if value is not getattr(typing, "_overload_dummy", None):
            continue
        probe = lambda: None  # noqa: E731  (get_overloads looks functions up by module and name)
        probe.__module__, probe.__qualname__ = module.__name__, name
        variants = typing.get_overloads(probe)
        if not variants:
            continue
        signatures = [inspect.signature(v) for v in variants]
        first = signatures[0]

        def joined(annotations):
            unique = list(dict.fromkeys(str(a) for a in annotations))
            if len(unique) > 1 and set(unique) <= {"Literal[False]", "Literal[True]"}:
                return "bool"
            return unique[0] if len(unique) == 1 else " | ".join(unique)

        params = [p.replace(annotation=joined(s.parameters[p.name].annotation for s in signatures
                                              if p.name in s.parameters))
                  for p in first.parameters.values()]
        merged = first.replace(parameters=params, return_annotation=joined(s.return_annotation for s in signatures))
        function = types.FunctionType(variants[0].__code__, module.__dict__, name)
        function.__qualname__ = name
        function.__module__ = module.__name__
        function.__signature__ = merged
        function.__doc__ = variants[0].__doc__
        setattr(module, name, function)


def _name_type_aliases(module):
    """Module-level type aliases (ArrayLike = Union[...]) become placeholder classes of that name,
    so that signatures show "ArrayLike" rather than the expanded union."""
    for name, value in list(vars(module).items()):
        if name not in module.__tessel_assigned__ or isinstance(value, type) or not hasattr(value, "__origin__"):
            continue
        setattr(module, name, type(name, (), {"__module__": module.__name__, "__doc__": f"Type alias: {value}"}))


def load_stub_package():
    """Registers the modules tessel, tessel.cuda, ... built from the stubs in sys.modules."""
    if getattr(sys.modules.get("tessel"), "__tessel_stub__", False):
        return sys.modules["tessel"]
    modules = {}
    for name, (stub, _) in STUB_MODULES.items():
        module = types.ModuleType(name)
        module.__file__ = os.path.join(PACKAGE_DIR, stub)
        module.__package__ = name if name in STUB_PACKAGES else name.rsplit(".", 1)[0]
        module.__tessel_stub__ = True
        if name in STUB_PACKAGES:
            module.__path__ = [STUB_PACKAGES[name]]
        modules[name] = module
    for name, module in modules.items():
        sys.modules[name] = module
        if name != "tessel":
            parent, child = name.rsplit(".", 1)
            setattr(modules[parent], child, module)
    # In STUB_MODULES order: tessel before the submodules that `from . import Array` from it.
    for name in STUB_MODULES:
        _execute_stub(modules[name], modules[name].__file__)
    for name, (_, sources) in STUB_MODULES.items():
        _merge_overloads(modules[name])
        _name_type_aliases(modules[name])
        _fill_docstrings(modules[name], _python_docstrings(sources))
    return modules["tessel"]


def _gen_op_stubs():
    sys.path.insert(0, os.path.join(REPO, "scripts"))
    try:
        import gen_op_stubs
    finally:
        sys.path.pop(0)
    return gen_op_stubs


def elementwise_names():
    """The Python names of the elementwise functions, from the op rows (scripts/gen_op_stubs.py)."""
    return [name for rows in _gen_op_stubs().op_rows().values() for name, _ in rows]


def elementwise_aliases():
    """NumPy's spellings of them, from the op list's aliases."""
    return [alias for alias, _ in _gen_op_stubs().op_aliases()]


def reduction_names():
    """The Python names of the reductions, in row order (scripts/gen_op_stubs.py)."""
    return [name for name, _, _ in _gen_op_stubs().reduction_rows()]


def sorting_names():
    """The Python names of the sorting and searching functions, in row order (scripts/gen_op_stubs.py)."""
    return [name for name, _, _ in _gen_op_stubs().sort_rows()]


def set_names():
    """The Python names of the set functions, in row order (scripts/gen_op_stubs.py)."""
    return [name for name, _, _ in _gen_op_stubs().set_rows()]


def indexing_names():
    """The Python names of the indexing functions, in row order (scripts/gen_op_stubs.py)."""
    return [name for name, _, _ in _gen_op_stubs().indexing_rows()]


def fft_names():
    """The Python names of tessel.fft's transforms and helpers, in row order (scripts/gen_op_stubs.py)."""
    return [name for name, _, _ in _gen_op_stubs().fft_rows()]


def linalg_names():
    """The Python names of tessel.linalg's factorizations and solvers, in row order (scripts/gen_op_stubs.py)."""
    return [name for name, _, _, _ in _gen_op_stubs().linalg_rows()]


class AutofunctionsDirective(SphinxDirective):
    """An autofunction entry per name of entries()."""

    def entries(self):
        raise NotImplementedError

    def run(self):
        from docutils.statemachine import StringList

        lines = StringList()
        for name in self.entries():
            lines.append(f".. autofunction:: {name}", self.get_source_info()[0])
            lines.append("", self.get_source_info()[0])
        node = nodes.section()
        node.document = self.state.document
        self.state.nested_parse(lines, self.content_offset, node)
        return node.children


class ElementwiseFunctionsDirective(AutofunctionsDirective):
    """.. elementwise-functions::  -- an autofunction entry per op row, with `:also:` names, sorted."""

    option_spec = {"also": lambda text: text.split()}

    names = staticmethod(elementwise_names)

    def entries(self):
        return sorted(set(self.names()) | set(self.options.get("also", [])))


class ElementwiseAliasesDirective(ElementwiseFunctionsDirective):
    """.. elementwise-aliases::  -- an autofunction entry per alias of the op list, sorted."""

    names = staticmethod(elementwise_aliases)


class ReductionFunctionsDirective(AutofunctionsDirective):
    """.. reduction-functions::  -- an autofunction entry per reduction row, in row order."""

    def entries(self):
        return reduction_names()


class SortingFunctionsDirective(AutofunctionsDirective):
    """.. sorting-functions::  -- an autofunction entry per sort row, in row order."""

    def entries(self):
        return sorting_names()


class SetFunctionsDirective(AutofunctionsDirective):
    """.. set-functions::  -- an autofunction entry per set row, in row order."""

    def entries(self):
        return set_names()


class IndexingFunctionsDirective(AutofunctionsDirective):
    """.. indexing-functions::  -- an autofunction entry per indexing row, in row order."""

    def entries(self):
        return indexing_names()


class FftFunctionsDirective(AutofunctionsDirective):
    """.. fft-functions::  -- an autofunction entry per fft row, in row order (under the page's
    ``currentmodule``, tessel.fft)."""

    def entries(self):
        return fft_names()


class LinalgFunctionsDirective(AutofunctionsDirective):
    """.. linalg-functions::  -- an autofunction entry per linalg row, in row order (under the
    page's ``currentmodule``, tessel.linalg)."""

    def entries(self):
        return linalg_names()


class RequiresDirective(SphinxDirective):
    """.. requires:: cuda [torch ...]  -- the nested examples need these to run."""

    required_arguments = 1
    final_argument_whitespace = True
    has_content = True

    def run(self):
        wanted = self.arguments[0].split()
        unknown = [w for w in wanted if w not in REQUIREMENTS]
        if unknown:
            raise self.error(f"requires: unknown requirement(s) {unknown}; known: {sorted(REQUIREMENTS)}")
        names = [REQUIREMENTS[w] for w in wanted]
        title = "Needs " + " and ".join(names) + " (not run on the CPU backend)"
        node = nodes.admonition(classes=["requires"])
        node += nodes.title(text=title)
        self.state.nested_parse(self.content, self.content_offset, node)
        return [node]


def setup(app):
    load_stub_package()
    app.add_directive("requires", RequiresDirective)
    app.add_directive("elementwise-functions", ElementwiseFunctionsDirective)
    app.add_directive("elementwise-aliases", ElementwiseAliasesDirective)
    app.add_directive("reduction-functions", ReductionFunctionsDirective)
    app.add_directive("sorting-functions", SortingFunctionsDirective)
    app.add_directive("set-functions", SetFunctionsDirective)
    app.add_directive("indexing-functions", IndexingFunctionsDirective)
    app.add_directive("fft-functions", FftFunctionsDirective)
    app.add_directive("linalg-functions", LinalgFunctionsDirective)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}

