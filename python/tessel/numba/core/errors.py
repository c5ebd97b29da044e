"""Numba's warning and error classes (``from numba.core.errors import NumbaPerformanceWarning,
TypingError``), so that programs' warning filters and ``except`` clauses work. tessel.numba issues
none of the warnings. A kernel that tessel.numba cannot compile raises :class:`KernelTypingError`:
a ``tessel.kernel.KernelCompileError`` that is also Numba's ``TypingError``, ``UnsupportedError``
and ``LoweringError``, so that code catching any of them catches it."""
from __future__ import annotations

__all__ = ["NumbaWarning", "NumbaPerformanceWarning", "NumbaDeprecationWarning", "NumbaPendingDeprecationWarning",
           "NumbaParallelSafetyWarning", "NumbaTypeSafetyWarning", "NumbaExperimentalFeatureWarning",
           "NumbaInvalidConfigWarning", "NumbaPedanticWarning", "NumbaIRAssumptionWarning", "NumbaDebugInfoWarning",
           "NumbaSystemWarning", "NumbaError", "TypingError", "UnsupportedError", "LoweringError",
           "NumbaValueError", "NumbaTypeError", "NumbaAttributeError", "NumbaIndexError",
           "NumbaNotImplementedError", "NumbaRuntimeError", "CompilerError", "InternalError", "KernelTypingError"]


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


class NumbaError(Exception):
    """The base of Numba's errors."""


class TypingError(NumbaError):
    pass


class UnsupportedError(NumbaError):
    pass


class LoweringError(NumbaError):
    pass


class CompilerError(NumbaError):
    pass


class InternalError(NumbaError):
    pass


class NumbaNotImplementedError(NumbaError):
    pass


class NumbaValueError(TypingError):
    pass


class NumbaTypeError(TypingError):
    pass


class NumbaAttributeError(TypingError):
    pass


class NumbaIndexError(TypingError):
    pass


class NumbaRuntimeError(NumbaError):
    pass


def _kernel_typing_error():
    from tessel.kernel import KernelCompileError

    class KernelTypingError(KernelCompileError, TypingError, UnsupportedError, LoweringError):
        """A tessel.numba kernel that cannot be compiled: tessel's KernelCompileError (the message
        names the kernel, the file and the line) and Numba's compile errors."""

    KernelTypingError.__module__ = __name__
    KernelTypingError.__qualname__ = "KernelTypingError"
    return KernelTypingError


def __getattr__(name):
    if name == "KernelTypingError":   # made when first used: it needs tessel's kernel compiler
        value = globals()[name] = _kernel_typing_error()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
