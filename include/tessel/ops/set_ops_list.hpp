#pragma once
// Every set function of the Array API (unique_all and its parts, isin), one row each: the one
// place where its Python name, parameters and docstring are written. The namespace functions are
// written in Python (python/tessel/_functions/sets.py, over the C++ functions bound in
// python/bindings/set_ops.cpp) and take the row's docstring; their stubs (python/tessel/__init__.pyi,
// by scripts/gen_op_stubs.py) and API reference entries (the set-functions directive) follow
// from the rows.
//
//   X(name, "python_name", shape, "docstring")
//
// name: the C++ function the Python function calls (include/tessel/ops/set_ops.hpp); set_ops.cpp
//   takes its address, so a row without that declaration does not compile
// shape: the Python parameters and result:
//   unique       x, /; one array (the values)
//   unique_pair  x, /; a named tuple of two arrays
//   unique_all   x, /; a named tuple of four arrays
//   membership   x1, x2, /, *, invert=False (either may be a Python scalar); a bool array
// docstring: the Python function's (its __doc__, stub and API reference entry): the Array API
//   standard's description, then what tessel adds.

#define TESSEL_SET_OPS(X) \
  X(unique_all, "unique_values", unique, \
    "Returns the unique elements of the flattened x, ascending (complex: by real, then imaginary " \
    "part). NaNs are distinct; -0.0 and +0.0 are one value. Radix sort and a scan on the device; " \
    "the number of values is read back (one synchronization).") \
  X(unique_all, "unique_counts", unique_pair, \
    "Returns ``(values, counts)``: the unique elements of the flattened x (as :func:`unique_values`) " \
    "and how often each occurs (int64).") \
  X(unique_all, "unique_inverse", unique_pair, \
    "Returns ``(values, inverse_indices)``: the unique elements of the flattened x (as " \
    ":func:`unique_values`) and the indices into them that reconstruct x (int64, shape of x).") \
  X(unique_all, "unique_all", unique_all, \
    "Returns ``(values, indices, inverse_indices, counts)``: the unique elements of the flattened x " \
    "(as :func:`unique_values`), the index of each one's first occurrence, the indices that " \
    "reconstruct x (shape of x) and the counts (int64).") \
  X(isin, "isin", membership, \
    "Tests whether each element of x1 is in x2 (bool, shape of x1), compared in the promoted " \
    "dtype; NaN is in nothing. At least one is an array. x2 is sorted on the device, then every " \
    "x1 element is binary-searched.")
