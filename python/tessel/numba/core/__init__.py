"""The parts of ``numba.core`` that programs import: ``numba.core.errors``' warning and error
classes, ``numba.core.types`` (tessel.numba.types) and ``numba.core.config`` (tessel.numba.config). Numba's compiler internals are not here: importing
another ``tessel.numba.core`` module raises an error that says so."""
from __future__ import annotations

import sys as _sys

from .. import config  # noqa: F401
from .. import types  # noqa: F401
from . import errors  # noqa: F401

_sys.modules[__name__ + ".config"] = config
_sys.modules[__name__ + ".types"] = types
