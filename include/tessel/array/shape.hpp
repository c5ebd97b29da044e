#pragma once
// Shapes and strides: 64-bit, strides in elements (negative allowed), NumPy broadcasting, and
// dimension collapsing for strided loops.
#include <cstdint>
#include <string>
#include <vector>

namespace tessel {

using Shape = std::vector<std::int64_t>;
using Strides = std::vector<std::int64_t>;  // in elements, not bytes

// "(2, 3)", "(5,)", "()" as Python prints tuples.
std::string shape_str(const Shape& shape);

// Product of the dimensions. ShapeError for a negative dimension, ValueError when the product
// overflows int64.
std::int64_t numel(const Shape& shape);

// C-order (row-major) strides of a contiguous array, in elements.
Strides contiguous_strides(const Shape& shape);

// Dimensions of size one (and any layout of a zero-size array) do not break contiguity.
bool is_contiguous(const Shape& shape, const Strides& strides);    // C order
// The same over a raw strides pointer (one per axis of shape); its own name, so that a braced
// {0} never picks it over the Strides form.
bool is_contiguous_at(const Shape& shape, const std::int64_t* strides);
bool is_f_contiguous(const Shape& shape, const Strides& strides);  // Fortran order

// NumPy broadcasting. ShapeError names the op, both shapes and the failing axis (counted from
// the start of the broadcast result, as NumPy reports it).
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op = "broadcast_shapes");
Shape broadcast_shapes(const std::vector<Shape>& shapes, const char* op = "broadcast_shapes");
// broadcast_shapes over `count` shapes by pointer (callers need not copy their arrays' shapes
// into a vector); equal shapes, the common case, cost one copy.
Shape broadcast_shape_list(const Shape* const* shapes, std::size_t count, const char* op = "broadcast_shapes");
// Strides that view (shape, strides) as `target` (0 for broadcast axes). ShapeError if it can't.
Strides broadcast_strides(const Shape& shape, const Strides& strides, const Shape& target,
                          const char* op = "broadcast_to");

// An axis in [-ndim, ndim) made non-negative; IndexError names the op, axis and ndim otherwise.
std::int64_t normalize_axis(std::int64_t axis, std::int64_t ndim, const char* op);

// The lowest and highest element offsets (relative to element 0) an array touches; {0, -1}
// for a zero-size array.
struct ElementExtent {
  std::int64_t lowest = 0;
  std::int64_t highest = -1;
};
ElementExtent element_extent(const Shape& shape, const Strides& strides);

// Several operands of one shape, with their dimensions merged where that keeps every operand's
// addressing the same: drop size-one axes, and merge axis i into i+1 when, for every operand,
// stride[i] == stride[i+1] * shape[i+1]. The result has at least one axis ({0} for zero-size,
// {1} with stride 0 for a single element), innermost axis last.
struct CollapsedDims {
  Shape shape;
  std::vector<Strides> strides;  // one per operand
  std::int64_t ndim() const { return static_cast<std::int64_t>(shape.size()); }
};
CollapsedDims collapse_dims(const Shape& shape, const std::vector<Strides>& operand_strides);

}  // namespace tessel
