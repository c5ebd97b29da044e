"""What ``cuda.fp16`` and ``cuda.libdevice`` share: module attributes resolved, when first used,
from tessel's kernel compiler (``tessel.kernel.fp16`` / ``tessel.kernel.libdevice``), whose
functions kernels call; a name that is not provided raises an error naming it."""
from __future__ import annotations

from ._unsupported import error


def resolver(module_name, namespace, public, reasons=None, aliases=None):
    """(__getattr__, __dir__) for the module ``tessel.numba.cuda.<module_name>``."""
    reasons = reasons or {}
    aliases = aliases or {}

    def names():
        from tessel.kernel import _libdevice

        return sorted(getattr(_libdevice, public))

    def __getattr__(name):
        if name == "__all__":
            return names()
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(f"module 'tessel.numba.cuda.{module_name}' has no attribute {name!r}")
        try:
            from tessel import kernel
        except ImportError as failure:
            raise error(f"{module_name}.{name}", f"tessel's kernel compiler (tessel.kernel) cannot be imported: "
                                                 f"{failure}") from None
        found = getattr(getattr(kernel, namespace), name, None)
        if found is not None and name in names():
            return found
        if name in reasons:
            raise error(f"{module_name}.{name}", reasons[name])
        if name in aliases:
            raise error(f"{module_name}.{name}", f"Numba's {module_name} has no {name}(); use {aliases[name]}")
        raise error(f"{module_name}.{name}", f"it is not one of Numba's cuda.{module_name} functions that tessel "
                                             "provides (see docs/guide/numba.rst)")

    def __dir__():
        return names()

    return __getattr__, __dir__
