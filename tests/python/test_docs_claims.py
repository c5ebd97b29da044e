"""Claims of CONTRIBUTING.md and docs/architecture.rst that the code can check: the layer order
and table against scripts/check_layers.py, the backend files' layers, and that the macros,
namespaces and files the recipes name exist."""
from __future__ import annotations

import ast
import importlib.util
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
ARCHITECTURE = (ROOT / "docs" / "architecture.rst").read_text(encoding="utf-8")
CONTRIBUTING = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")


def check_layers():
    spec = importlib.util.spec_from_file_location("check_layers", ROOT / "scripts" / "check_layers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def source_text():
    folders = ("include", "src", "python/bindings", "tests/cpp", "cli", "bench")
    return "\n".join(p.read_text(errors="replace") for folder in folders for p in (ROOT / folder).rglob("*")
                     if p.suffix in {".hpp", ".cpp", ".cu", ".cuh", ".h", ".py"} and p.is_file())


def layers_in_order(text):
    """The layer names of "a, b, then c and d, ..." or "a -> b -> c / d", in order, grouped by rank."""
    groups = re.split(r"\s*(?:->|,\s*then|,)\s*", text.strip().rstrip("."))
    return [sorted(re.split(r"\s*(?:/|\band\b)\s*", g.replace("then ", "").strip())) for g in groups if g.strip()]


def script_order(layers):
    ranks = sorted(set(layers.RANK.values()))
    return [sorted(n for n, r in layers.RANK.items() if r == rank and n != "bench") for rank in ranks]


def test_layer_order_is_the_scripts():
    layers = check_layers()
    order = re.search(r"The order, bottom to top:\s*(.+?)\.\n", ARCHITECTURE, re.S).group(1)
    assert layers_in_order(order.replace("\n", " ")) == script_order(layers)
    bold = re.search(r"\*\*(core -> .+?)\*\*", CONTRIBUTING, re.S).group(1)
    assert layers_in_order(bold.replace("\n", " ")) == script_order(layers)


def test_layer_table_has_one_row_per_layer_with_its_headers():
    layers = check_layers()
    table = ARCHITECTURE[ARCHITECTURE.index(".. list-table::"):ARCHITECTURE.index("``include/tessel/tessel.hpp``")]
    rows = re.findall(r"^   \* - (.+)\n     - (?:.|\n)+?\n     - (.+)$", table, re.M)
    named = [n.strip() for row, _ in rows[1:] for n in row.split(",")]
    assert sorted(named) == sorted(n for n in layers.RANK if n != "bench")
    for row, headers in rows[1:]:
        for layer in (n.strip() for n in row.split(",")):
            if (ROOT / "include" / "tessel" / layer).is_dir():
                assert f"include/tessel/{layer}/" in headers, (layer, headers)


def backend_layers(text):
    """{file stem: layer} from "``copy``, ``threads`` and ``grid_stride`` to array, ..." (or `x`)."""
    sentence = re.search(r"A backend file belongs to the layer of what it\s+implements:(.+?)every other", text,
                         re.S).group(1)
    mapping = {}
    for names, layer in re.findall(r"((?:`+\w+`+(?:,\s*|\s+and\s+)?)+)\s+to\s+(\w+)", sentence):
        for stem in re.findall(r"`+(\w+)`+", names):
            mapping[stem] = layer
    return mapping


def test_backend_files_layers_are_the_scripts():
    expected = check_layers().BACKEND_LAYER
    assert backend_layers(ARCHITECTURE) == expected
    assert backend_layers(CONTRIBUTING) == expected


def test_macros_namespaces_and_files_named_in_contributing_exist():
    code = source_text()
    for macro in sorted(set(re.findall(r"`(TESSEL_[A-Z0-9_]+)", CONTRIBUTING))):
        if macro in ("TESSEL_TEST_SEED", "TESSEL_UNDER_SANITIZER"):
            continue  # environment variables
        assert re.search(rf"\b{macro}\b", code), f"CONTRIBUTING.md names {macro}, which the code does not have"
    def declared(namespace):
        return f"namespace {namespace}" in code or f"namespace {namespace.rsplit('::', 1)[1]}" in code

    for name in sorted(set(re.findall(r"`(?:namespace )?(tessel::[a-z_:]+)`", CONTRIBUTING))):
        # A namespace, or a function (`tessel::cx::name`) in one.
        assert declared(name) or declared(name.rsplit("::", 1)[0]), f"CONTRIBUTING.md names {name}, not in the code"
    for path in sorted(set(re.findall(r"`((?:include|src|python|tests|scripts|docs|bench)/[\w/.]+\.\w+)`",
                                      CONTRIBUTING))):
        assert (ROOT / path).exists(), f"CONTRIBUTING.md names {path}, which does not exist"


# ---- the unary op recipe, run on a temporary copy ----
def _insert_at(text, anchor, line, path):
    """text with `line` inserted after the first line containing `anchor` (the recipe's place), or
    before it when the anchor starts with "^"."""
    before = anchor.startswith("^")
    anchor = anchor.lstrip("^")
    lines = text.split("\n")
    for i, current in enumerate(lines):
        if anchor in current:
            at = i if before else i + 1
            return "\n".join(lines[:at] + [line] + lines[at:])
    raise AssertionError(f"the recipe's place {anchor!r} is not in {path}")


# What each step of CONTRIBUTING's "A unary function" adds for an op shaped like sigmoid (real
# floating, no special cases): (file, anchor of the line it goes after, or before with "^", the line).
_UNARY_RECIPE = [
    ("include/tessel/ops/elementwise_list.hpp", 'X(sigmoid, "sigmoid",', '  X(dummy, "dummy", to_float, same, kF, "x.") \\'),
    ("include/tessel/ops/elementwise_list.hpp", "F(sigmoid,", "  F(dummy, x) \\"),
    ("python/tessel/torch/_graph.py", "    name = n.op", '    if name == "dummy":\n        return [g]'),
    ("tests/python/test_array.py", "UNARY = [", '    ("dummy", lambda a: a, "bif"),'),
]


def _unary_recipe_files():
    section = CONTRIBUTING.split("### A unary function", 1)[1].split("### A binary function", 1)[0]
    summary = section.split("The steps:", 1)[0].split("`tests/python/test_docs_claims.py`", 1)[0]
    count = re.search(r"It touches (\d+) files", summary)
    assert count, "CONTRIBUTING.md's unary recipe no longer says how many files it touches"
    optional = set(re.findall(r"a \w+, `([^`]+)`, when", summary))
    files = [f for f in re.findall(r"`([\w./]+\.\w+)`", summary) if f not in optional and "/" in f]
    return int(count.group(1)), files


def test_unary_op_recipe_dry_run(tmp_path):
    count, listed = _unary_recipe_files()
    before = {}
    for rel, _, _ in _UNARY_RECIPE:
        dst = tmp_path / rel
        if rel not in before:
            before[rel] = (ROOT / rel).read_text(encoding="utf-8")
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text(before[rel], encoding="utf-8")
    for rel, anchor, line in _UNARY_RECIPE:
        dst = tmp_path / rel
        dst.write_text(_insert_at(dst.read_text(encoding="utf-8"), anchor, line, rel), encoding="utf-8")
    touched = sorted(rel for rel in before if (tmp_path / rel).read_text(encoding="utf-8") != before[rel])
    assert sorted(listed) == touched, "CONTRIBUTING.md's list of files differs from the steps' files"
    assert len(touched) == count, f"CONTRIBUTING.md says {count} files; the steps touch {len(touched)}"
    for rel in touched:
        assert rel in CONTRIBUTING.split("### A binary function", 1)[0], f"{rel} is not in the recipe's steps"
        if rel.endswith((".py", ".pyi")):  # the edits leave the Python files valid
            ast.parse((tmp_path / rel).read_text(encoding="utf-8"))


def test_unary_op_recipe_touches_the_target_file_count():
    """The op recipe touches the op row (with its formula), its tests and its derivative: 3 files.
    The stubs, the API list, the CPU and CUDA code and the torch names follow from the op list."""
    count, _ = _unary_recipe_files()
    assert count <= 3, f"the unary op recipe touches {count} files, the target is 3"
