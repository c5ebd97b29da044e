#pragma once
// Indexing with NumPy's full rules, and the Array API's indexing functions.
//
// getitem / setitem take an index expression of IndexItem entries: integers, Slices, newaxis,
// one ellipsis, and integer or boolean arrays (advanced indexing):
//  - without index arrays the result is a view (Array::index);
//  - integer arrays (any integer dtype, negative values count from the end) broadcast together;
//    a boolean array of k dimensions stands for the k integer arrays of its nonzero() and must
//    match the shape of the k axes it indexes; integers next to index arrays count as 0-d index
//    arrays;
//  - the broadcast index dimensions replace the indexed axes in place when the index arrays (and
//    integers) are adjacent, and go first when a slice, newaxis or ellipsis separates them.
// Errors: IndexError for too many indices, a boolean index whose shape does not match the axes
// it indexes (naming both shapes), an index array of a non-integer dtype, index arrays that do
// not broadcast, and an index out of range (naming the axis and its size).
//
// Synchronization on CUDA, by design: an index expression with a boolean array needs the number
// of true elements to size its result, and one with integer arrays needs to know whether every
// index was in range before it returns; both come back to the host in one read (one stream
// synchronize): the count of the one-pass mask compaction and the device-side bounds flag of the
// gather land in the same page-locked status words. Expressions with several boolean arrays read
// once per boolean array. setitem with integer arrays checks the indices first (read with the
// mask's count when there is one), then scatters; setitem with a single boolean array and a value
// that does not depend on the count (a scalar, or an array broadcast along the other axes) needs
// no read at all (one fused pass). Basic indexing never synchronizes.
#include <cstdint>
#include <optional>
#include <vector>

#include "tessel/array/array.hpp"

namespace tessel {

// x[items]. A view without index arrays, else a new C-contiguous array.
Array getitem(const Array& x, const std::vector<IndexItem>& items, const OptionalStream& stream = std::nullopt);
// x[items] = value: value is cast to x's dtype and broadcast to the shape x[items] would have.
// With repeated indices one of the values is written (the last one on the CPU; unspecified on
// CUDA, as in CuPy). ValueError when x is read-only or value does not broadcast.
void setitem(const Array& x, const std::vector<IndexItem>& items, const Array& value,
             const OptionalStream& stream = std::nullopt);
void setitem(const Array& x, const std::vector<IndexItem>& items, Scalar value,
             const OptionalStream& stream = std::nullopt);

// Elements of x at `indices` along `axis` (Array API take; with no axis, x is flattened as in
// NumPy). The result has x's shape with `axis` replaced by the indices' shape.
Array take(const Array& x, const Array& indices, std::optional<std::int64_t> axis = std::nullopt,
           const OptionalStream& stream = std::nullopt);
// out[..., j, ...] = x[..., indices[..., j, ...], ...] along `axis`: indices has x's number of
// dimensions and broadcasts against x on the other axes. No axis: x is flattened and indices
// must be 1-D.
Array take_along_axis(const Array& x, const Array& indices, std::optional<std::int64_t> axis = -1,
                      const OptionalStream& stream = std::nullopt);
// NumPy's put_along_axis: x[..., indices[..., j, ...], ...] = values[..., j, ...] along `axis`,
// values broadcast to the indices' (broadcast) shape. Indices are checked before anything is
// written (one read on CUDA).
void put_along_axis(const Array& x, const Array& indices, const Array& values, std::optional<std::int64_t> axis,
                    const OptionalStream& stream = std::nullopt);
void put_along_axis(const Array& x, const Array& indices, Scalar value, std::optional<std::int64_t> axis,
                    const OptionalStream& stream = std::nullopt);

// The indices of x's nonzero elements, one int64 array per axis, in C order (Array API nonzero;
// ValueError for a 0-d array). One compaction pass and one read of its count on CUDA.
std::vector<Array> nonzero(const Array& x, const OptionalStream& stream = std::nullopt);

}  // namespace tessel
