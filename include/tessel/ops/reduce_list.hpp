#pragma once
// Every reduction and scan of reduce.hpp, one row each: the one place where a reduction's Python
// name, parameters and docstring are written. The C++ definitions (src/ops/reduce.cpp), the Python
// bindings, functions and Array methods (python/bindings/array.cpp), the stubs and the API
// reference (scripts/gen_op_stubs.py) follow from the rows.
//
//   X(name, "python_name", shape, "docstring")
//
// name: the C++ function, declared in reduce.hpp with its shape's parameters (reduce.cpp defines
//   it by its qualified name, so a row without that declaration does not compile)
// shape: the parameters, in C++ (after the array; the stream is last) and in Python:
//   dtype     (axes, keepdims); Python: x, *, axis=None, dtype=None, keepdims=False (dtype casts x)
//   plain     (axes, keepdims); Python: x, *, axis=None, keepdims=False
//   variance  (axes, ddof, keepdims); Python: x, *, axis=None, correction=0.0, keepdims=False
//             (the Array method's is ddof, as NumPy's)
//   arg       (axis, keepdims), one axis or none (the flattened array); Python as plain, one axis
//   scan      (axis), one axis or none; Python: x, axis=None
// The Array methods take axis positionally and the rest by keyword.
// docstring: the Python function's and the Array method's (their bindings' __doc__, stubs and API
//   reference entries). A namespace function written in Python (python/tessel/_functions/) has
//   the row's docstring too, so it describes both where they differ.

#define TESSEL_REDUCTION_OPS(X) \
  X(sum, "sum", dtype, \
    "Sum over ``axis`` (all axes by default). Bool and signed integers sum in int64, unsigned " \
    "integers in uint64, floating-point and complex types in their own dtype (float16 and bfloat16 " \
    "accumulate in float32); a given ``dtype`` is the one computed in and returned.") \
  X(prod, "prod", dtype, "Product over ``axis`` (all axes by default), with the dtypes of :func:`sum`.") \
  X(mean, "mean", dtype, \
    "Arithmetic mean over ``axis`` (all axes by default); NaN for an empty slice, and complex " \
    "inputs average the real and imaginary parts apart. Integer and bool inputs give float32, the " \
    "default real floating-point dtype; the method gives float64, as NumPy's. A given ``dtype`` is " \
    "the one computed in and returned.") \
  X(nansum, "nansum", dtype, \
    "Sum over ``axis`` skipping NaNs (0 for an all-NaN slice), with the dtypes of :func:`sum`; " \
    "a given ``dtype`` is the one computed in and returned.") \
  X(nanprod, "nanprod", dtype, \
    "Product over ``axis`` skipping NaNs (1 for an all-NaN slice), with the dtypes of :func:`sum`; " \
    "a given ``dtype`` is the one computed in and returned.") \
  X(nanmean, "nanmean", dtype, \
    "Mean over ``axis`` skipping NaNs (NaN for an all-NaN slice); integer and bool inputs give " \
    "float64; a given ``dtype`` is the one computed in and returned.") \
  X(min, "min", plain, \
    "Minimum over ``axis`` (all axes by default), in x's dtype; NaN propagates, and an empty slice " \
    "is a ValueError.") \
  X(max, "max", plain, \
    "Maximum over ``axis`` (all axes by default), in x's dtype; NaN propagates, and an empty slice " \
    "is a ValueError.") \
  X(any, "any", plain, \
    "Whether any element over ``axis`` is true (nonzero; a complex NaN is true): a bool array, " \
    "False for an empty slice.") \
  X(all, "all", plain, \
    "Whether every element over ``axis`` is true (nonzero; a complex NaN is true): a bool array, " \
    "True for an empty slice.") \
  X(nanmin, "nanmin", plain, \
    "Minimum over ``axis`` skipping NaNs (NaN for an all-NaN slice); an empty slice is a ValueError.") \
  X(nanmax, "nanmax", plain, \
    "Maximum over ``axis`` skipping NaNs (NaN for an all-NaN slice); an empty slice is a ValueError.") \
  X(var, "var", variance, \
    "Variance over ``axis`` (all axes by default), dividing by (count - ``correction``) for a real " \
    "correction >= 0 (the method's ``ddof``), NaN where that is <= 0; computed in two passes for " \
    "accuracy. Integer and bool inputs give float32, computed in float64 (the method gives " \
    "float64).") \
  X(std, "std", variance, \
    "Standard deviation over ``axis``: the square root of :func:`var`, with its ``correction`` and " \
    "dtypes.") \
  X(nanvar, "nanvar", variance, \
    "Variance over ``axis`` skipping NaNs (NaN for an all-NaN slice), with the ``correction`` of " \
    ":func:`var`; integer and bool inputs give float64.") \
  X(nanstd, "nanstd", variance, \
    "Standard deviation over ``axis`` skipping NaNs: the square root of :func:`nanvar`.") \
  X(argmin, "argmin", arg, \
    "Index (int64) of the first minimum along ``axis``, or into the flattened array (axis None); " \
    "a NaN is the minimum, and an empty slice is a ValueError.") \
  X(argmax, "argmax", arg, \
    "Index (int64) of the first maximum along ``axis``, or into the flattened array (axis None); " \
    "a NaN is the maximum, and an empty slice is a ValueError.") \
  X(nanargmin, "nanargmin", arg, \
    "argmin skipping NaNs; an all-NaN slice is a ValueError, as NumPy (one synchronization).") \
  X(nanargmax, "nanargmax", arg, \
    "argmax skipping NaNs; an all-NaN slice is a ValueError, as NumPy (one synchronization).") \
  X(cumsum, "cumsum", scan, \
    "Inclusive cumulative sum along ``axis``, or over the flattened array (axis None), as NumPy's; " \
    "bool and signed integers give int64, unsigned integers uint64.") \
  X(cumprod, "cumprod", scan, \
    "Inclusive cumulative product along ``axis``, or over the flattened array (axis None), with " \
    "the dtypes of :func:`cumsum`; for real inputs (:func:`cumulative_prod` takes complex ones).")
