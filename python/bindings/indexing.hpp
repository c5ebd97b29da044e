#pragma once
// Python index keys (ints, slices, None, Ellipsis, bools, lists, NumPy and tessel arrays) as
// tessel IndexItems, for Array.__getitem__ / __setitem__ (array.cpp).
#include <vector>

#include "common.hpp"

namespace tessel::python {

// The entries of `key` for indexing `x`: a tuple is a sequence of entries, anything else one
// entry. Index arrays land on x's device; IndexError for what NumPy refuses as an index.
std::vector<IndexItem> index_items(nb::handle key, const Array& x);

}  // namespace tessel::python
