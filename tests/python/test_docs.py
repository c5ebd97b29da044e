"""The examples of the documentation run as tests, so the docs cannot go stale silently.

Sources: docs/**/*.rst, README.md and CONTRIBUTING.md.

- ``>>>`` examples (reST ``.. code-block:: pycon`` blocks, Markdown ``pycon`` fences) run as
  doctests, one namespace per page, on the default device: the CPU backend on a machine
  without a GPU, CUDA where there is one.
- Python examples that need a GPU (or PyTorch, CuPy, Numba) sit under ``.. requires:: cuda``
  in reST, or after ``<!-- requires: cuda -->`` in Markdown. Each is compiled here, and run
  where its requirements hold; otherwise the test skips and says why.
- A Python block that is neither is an error: every example is either run or marked.
- C++ examples in the guide are ``literalinclude``s of docs/examples/cpp/*.cpp, which
  docs/examples/run_cpp_examples.sh builds against the installed library and runs (``make
  test``). A C++ block in the README must be a verbatim excerpt of one of those files.
"""
from __future__ import annotations

import doctest
import importlib.util
import pathlib
import re
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
RST_FILES = sorted((ROOT / "docs").rglob("*.rst"))
MD_FILES = [p for p in (ROOT / "README.md", ROOT / "CONTRIBUTING.md") if p.exists()]
CPP_EXAMPLES = sorted((ROOT / "docs" / "examples" / "cpp").glob("*.cpp"))
# Pages that may show C++ excerpts of the library itself (declarations, not runnable examples).
CPP_EXCERPT_PAGES = {"docs/architecture.rst", "CONTRIBUTING.md"}
OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def rel(path: pathlib.Path) -> str:
    return path.relative_to(ROOT).as_posix()


class Block:
    def __init__(self, path, line, language, code, requires):
        self.path, self.line, self.language, self.code, self.requires = path, line, language, code, requires

    @property
    def id(self):
        return f"{rel(self.path)}:{self.line}"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _rst_directive_body(lines, start):
    """The indented lines after the directive at lines[start]: (end index, body lines)."""
    base = _indent(lines[start])
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > base):
        end += 1
    return end, lines[start + 1:end]


CODE_BLOCK = re.compile(r"^\s*\.\. (?:code-block|code|sourcecode):: *(\S+)")
REQUIRES = re.compile(r"^\s*\.\. requires:: *(.+)$")


def _rst_code(body):
    """Source of a code-block body: the options and the common indentation removed."""
    lines = list(body)
    while lines and (not lines[0].strip() or lines[0].strip().startswith(":")):
        lines.pop(0)
    text = [l for l in lines if l.strip()]
    cut = min((_indent(l) for l in text), default=0)
    return "\n".join(l[cut:] for l in lines).strip("\n") + "\n"


def parse_rst(path):
    """(doctest text with the requires blocks blanked, requires blocks, problems)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, problems = [], []
    text = list(lines)
    i = 0
    while i < len(lines):
        m = REQUIRES.match(lines[i])
        if m:
            end, body = _rst_directive_body(lines, i)
            found = False
            for j, line in enumerate(body):
                c = CODE_BLOCK.match(line)
                if c:
                    _, code_body = _rst_directive_body(body, j)
                    if c.group(1) != "python":
                        problems.append(f"{rel(path)}:{i + j + 2}: a requires block holds {c.group(1)} code; "
                                        "use a python block")
                    blocks.append(Block(path, i + j + 2, "python", _rst_code(code_body), m.group(1).split()))
                    found = True
            if ">>>" in "\n".join(body):
                problems.append(f"{rel(path)}:{i + 1}: no >>> prompts inside a requires block (it is not a doctest)")
            if not found:
                problems.append(f"{rel(path)}:{i + 1}: a requires block without a python code block")
            for k in range(i, end):
                text[k] = ""
            i = end
            continue
        c = CODE_BLOCK.match(lines[i])
        if c:
            language = c.group(1)
            if language in ("python", "python3", "py"):
                problems.append(f"{rel(path)}:{i + 1}: a python block that is not run: write it as a pycon "
                                "doctest, or put it under '.. requires::'")
            if language in ("cpp", "c++") and rel(path) not in CPP_EXCERPT_PAGES:
                problems.append(f"{rel(path)}:{i + 1}: C++ examples are literalincludes of docs/examples/cpp/*.cpp "
                                "(built and run by make test)")
        i += 1
    return "\n".join(text) + "\n", blocks, problems


FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
MD_REQUIRES = re.compile(r"^\s*<!--\s*requires:\s*(.+?)\s*-->\s*$")


def parse_markdown(path):
    """(doctest text, requires blocks, C++ blocks, problems)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    text = [""] * len(lines)
    blocks, cpp, problems = [], [], []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        language = m.group(2)
        end = i + 1
        while end < len(lines) and not FENCE.match(lines[end]):
            end += 1
        body = "\n".join(lines[i + 1:end]) + "\n"
        previous = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        requires = MD_REQUIRES.match(previous)
        if language == "pycon":
            for k in range(i + 1, end):
                text[k] = lines[k]
        elif language in ("python", "py"):
            if requires:
                blocks.append(Block(path, i + 2, "python", body, requires.group(1).split()))
            else:
                problems.append(f"{rel(path)}:{i + 1}: a python block that is not run: use a pycon doctest, "
                                "or put '<!-- requires: cuda -->' before it")
        elif language in ("cpp", "c++"):
            cpp.append(Block(path, i + 2, "cpp", body, []))
        i = end + 1
    return "\n".join(text) + "\n", blocks, cpp, problems


def all_requires_blocks():
    blocks = []
    for path in RST_FILES:
        blocks += parse_rst(path)[1]
    for path in MD_FILES:
        blocks += parse_markdown(path)[1]
    return blocks


def missing(requirements):
    """Why these requirements do not hold here, or None."""
    import tessel as ts

    for r in requirements:
        if r == "cuda" and not ts.cuda.is_available():
            return "no CUDA device"
        if r in ("torch", "cupy", "numba") and importlib.util.find_spec(r) is None:
            return f"{r} is not installed"
        if r not in ("cuda", "torch", "cupy", "numba"):
            return f"unknown requirement {r!r}"
    return None


def run_doctest(name, path, text):
    parser = doctest.DocTestParser()
    test = parser.get_doctest(text, {"__name__": "__docs__"}, name, str(path), 0)
    if not test.examples:
        return
    runner = doctest.DocTestRunner(optionflags=OPTIONS)
    out = []
    runner.run(test, out=out.append)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, "".join(out)


@pytest.mark.parametrize("path", RST_FILES, ids=rel)
def test_rst_page(path):
    text, _, problems = parse_rst(path)
    assert not problems, "\n".join(problems)
    run_doctest(rel(path), path, text)


@pytest.mark.parametrize("path", MD_FILES, ids=rel)
def test_markdown_page(path):
    text, _, cpp, problems = parse_markdown(path)
    assert not problems, "\n".join(problems)
    if path.name == "README.md":
        examples = [p.read_text(encoding="utf-8") for p in CPP_EXAMPLES]
        for block in cpp:
            assert any(block.code.strip() in e for e in examples), (
                f"{block.id}: the README's C++ block must be a verbatim excerpt of a file in docs/examples/cpp "
                "(those are built and run by make test)")
    run_doctest(rel(path), path, text)


@pytest.mark.parametrize("block", all_requires_blocks(), ids=lambda b: b.id)
def test_example_needing_hardware(block):
    code = compile(block.code, block.id, "exec")  # a syntax error fails everywhere
    why = missing(block.requires)
    if why:
        pytest.skip(f"needs {' '.join(block.requires)}: {why}")
    exec(code, {"__name__": "__docs__"})


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 200, f"README.md has {lines} lines; keep it at most 200 and move the rest into docs/"


def test_results_sections_are_generated():
    """The README's and the docs' results tables are scripts/bench_report.py's output."""
    spec = importlib.util.spec_from_file_location("bench_report", ROOT / "scripts" / "bench_report.py")
    report = importlib.util.module_from_spec(spec)
    sys.modules["bench_report"] = report
    spec.loader.exec_module(report)
    stale = report.stale_outputs()
    assert not stale, f"run python3 scripts/bench_report.py: out of date: {', '.join(stale)}"


def test_api_reference_covers_tessel_kernel():
    """Every public name of tessel.kernel has a stub (python/tessel/kernel/__init__.pyi) and an
    entry in its API page (docs/api/kernel.rst); the stub's namespaces have the runtime's members."""
    import ast

    from tessel import kernel as tk

    stub = ast.parse((ROOT / "python" / "tessel" / "kernel" / "__init__.pyi").read_text(encoding="utf-8"))
    declared = {n.name: n for n in stub.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    annotated = {n.target.id for n in stub.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    assert set(tk.__all__) <= set(declared) | annotated, set(tk.__all__) - set(declared) - annotated
    for name in ("threadIdx", "blockIdx", "blockDim", "gridDim", "shared", "local", "const", "atomic"):
        members = {n.target.id if isinstance(n, ast.AnnAssign) else n.name for n in declared[name].body
                   if isinstance(n, (ast.AnnAssign, ast.FunctionDef))}
        runtime = {m for m in vars(getattr(tk, name)) if not m.startswith("_")}
        assert members == runtime, (name, members ^ runtime)
    page = (ROOT / "docs" / "api" / "kernel.rst").read_text(encoding="utf-8")
    entries = set(re.findall(r"^\.\. (?:autofunction|autoclass|py:data):: (\w+)", page, re.M))
    assert set(tk.__all__) <= entries, set(tk.__all__) - entries
