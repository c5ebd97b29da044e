#pragma once
// Every sorting and searching function of the Array API (sort, argsort, searchsorted), one row
// each: the one place where its Python name, parameters and docstring are written. The namespace
// functions are written in Python (python/tessel/_functions/sorting.py and searching.py, over the
// C++ functions bound in python/bindings/array.cpp) and take the row's docstring; their stubs
// (python/tessel/__init__.pyi, by scripts/gen_op_stubs.py) and API reference entries (the
// sorting-functions directive) follow from the rows.
//
//   X(name, "python_name", shape, "docstring")
//
// name: the C++ function the Python function calls (include/tessel/ops/sort.hpp); array.cpp
//   takes its address, so a row without that declaration does not compile
// shape: the Python parameters and result:
//   sort    x, /, *, axis=-1, descending=False, stable=True; one array
//   search  x1, x2, /, *, side="left", sorter=None (x2 may be a Python scalar); one int64 array
// docstring: the Python function's (its __doc__, stub and API reference entry).

#define TESSEL_SORT_OPS(X) \
  X(sort, "sort", sort, \
    "A sorted copy along axis; stable; ``descending=True`` for the reverse order.") \
  X(argsort, "argsort", sort, \
    "int64 indices that sort x along axis; stable (equal keys keep their order).") \
  X(searchsorted, "searchsorted", search, \
    "Insertion points (int64) of x2 (an array or a Python scalar) into the ascending 1-D x1 " \
    "('left' or 'right'). With sorter, the indices that sort x1, x1 is sorted on the device " \
    "instead (a stable sort gives the values of x1[sorter]).")
