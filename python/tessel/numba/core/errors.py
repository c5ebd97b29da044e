"""Numba's warning classes (``from numba.core.errors import NumbaPerformanceWarning``), so that
programs' warning filters work. tessel.numba issues none of them; its compile errors are
``tessel.kernel.KernelCompileError``."""
from __future__ import annotations

__all__ = ["NumbaWarning", "NumbaPerformanceWarning", "NumbaDeprecationWarning", "NumbaPendingDeprecationWarning",
           "NumbaParallelSafetyWarning", "NumbaTypeSafetyWarning", "NumbaExperimentalFeatureWarning",
           "NumbaInvalidConfigWarning", "NumbaPedanticWarning", "NumbaIRAssumptionWarning", "NumbaDebugInfoWarning",
           "NumbaSystemWarning"]


class NumbaWarning(Warning):
    """The base of Numba's warnings."""


class NumbaPerformanceWarning(NumbaWarning):
    pass


class NumbaDeprecationWarning(NumbaWarning, DeprecationWarning):
    pass


class NumbaPendingDeprecationWarning(NumbaWarning, PendingDeprecationWarning):
    pass


class NumbaParallelSafetyWarning(NumbaWarning):
    pass


class NumbaTypeSafetyWarning(NumbaWarning):
    pass


class NumbaExperimentalFeatureWarning(NumbaWarning):
    pass


class NumbaInvalidConfigWarning(NumbaWarning):
    pass


class NumbaPedanticWarning(NumbaWarning):
    pass


class NumbaIRAssumptionWarning(NumbaPedanticWarning):
    pass


class NumbaDebugInfoWarning(NumbaWarning):
    pass


class NumbaSystemWarning(NumbaWarning):
    pass
