#pragma once
// Every indexing function of the namespace (take, take_along_axis, put_along_axis, nonzero), one
// row each: the one place where its Python name, parameters and docstring are written. The Python
// bindings (python/bindings/indexing.cpp), the stubs (python/tessel/__init__.pyi, by
// scripts/gen_op_stubs.py) and the API reference entries (the indexing-functions directive)
// follow from the rows. x[key] and x[key] = value are syntax, not functions: Array's
// __getitem__ and __setitem__ are bound by hand (python/bindings/array.cpp, keys in indexing.cpp).
//
//   X(name, "python_name", shape, "docstring")
//
// name: the C++ function tessel::name (include/tessel/ops/indexing.hpp), with its shape's
//   parameters, so a row without that declaration does not compile
// shape: the parameters, in C++ (after the array; the stream is last) and in Python, and the
//   Python result:
//   gather         (indices, axis); Python: x, indices, /, *, axis=None (None: x flattened); one array
//   gather_along   (indices, axis); Python: x, indices, /, *, axis=-1; one array
//   scatter_along  (indices, values, axis), values an array or a scalar, in place; Python: arr,
//                  indices, values, axis (values may be a Python scalar); None
//   per_axis       (); Python: x, /; a tuple of int64 arrays, one per axis of x
// docstring: the Python function's (its binding's __doc__, stub and API reference entry).

#define TESSEL_INDEXING_OPS(X) \
  X(take, "take", gather, \
    "Elements of x at integer ``indices`` along ``axis`` (x flattened when None); the result has " \
    "x's shape with ``axis`` replaced by the indices' shape. IndexError names the axis and its size " \
    "for an index out of range; on CUDA that check reads one flag back (one synchronization).") \
  X(take_along_axis, "take_along_axis", gather_along, \
    "out[..., j, ...] = x[..., indices[..., j, ...], ...] along ``axis``; indices has x's rank and " \
    "broadcasts against it on the other axes (axis None: x flattened, indices 1-D).") \
  X(put_along_axis, "put_along_axis", scatter_along, \
    "NumPy's put_along_axis, in place: arr[..., indices[..., j, ...], ...] = values[..., j, ...] " \
    "along ``axis``, values (an array or a Python scalar) broadcast to the indices' shape. The " \
    "indices are checked before anything is written (one read on CUDA).") \
  X(nonzero, "nonzero", per_axis, \
    "Indices of the nonzero elements, one int64 array per axis, in C order; a 0-d x is a " \
    "ValueError. One compaction pass; on CUDA one read of its count.")
