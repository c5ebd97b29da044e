"""Sphinx configuration of the tessel documentation (built by `make docs` into build/docs).

The API reference is generated from the type stubs python/tessel/*.pyi (with docstrings merged
from python/tessel/*.py) by docs/_ext/tessel_docs.py, so building the docs needs Sphinx but not
the compiled extension. The examples are run by tests/python/test_docs.py, not by Sphinx.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "_ext"))

project = "tessel"
author = "the tessel developers"
copyright = "the tessel developers"
release = "0.1.0"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "tessel_docs",
]

root_doc = "index"
exclude_patterns = ["_build", "examples", "Thumbs.db", ".DS_Store"]
templates_path = []
html_theme = "alabaster"
html_static_path = []
html_title = "tessel"
html_theme_options = {
    "description": "GPU arrays, fused kernels and tuned math, from C++ and Python",
    "fixed_sidebar": True,
    "page_width": "1280px",
    "body_max_width": "none",
    "sidebar_width": "230px",
}
highlight_language = "none"
pygments_style = "sphinx"

autodoc_member_order = "bysource"
autodoc_default_options = {"undoc-members": False}
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
add_module_names = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False
