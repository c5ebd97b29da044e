#include "tessel/array/shape.hpp"

#include <algorithm>
#include <string>

#include "core/inline_buffer.hpp"
#include "tessel/core/error.hpp"

namespace tessel {

std::string shape_str(const Shape& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  if (shape.size() == 1) text += ",";
  return text + ")";
}

std::int64_t numel(const Shape& shape) {
  std::int64_t count = 1;
  bool overflowed = false;
  bool has_zero = false;
  for (std::int64_t dim : shape) {
    if (dim < 0) throw ShapeError("negative dimension " + std::to_string(dim) + " in shape " + shape_str(shape));
    has_zero = has_zero || dim == 0;
    if (__builtin_mul_overflow(count, dim, &count)) overflowed = true;
  }
  // A zero anywhere makes the size 0 even when other dimensions overflowed.
  if (has_zero) return 0;
  if (overflowed) throw ValueError("shape " + shape_str(shape) + " has more than 2^63 elements");
  return count;
}

Strides contiguous_strides(const Shape& shape) {
  Strides strides(shape.size());
  std::int64_t stride = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= std::max<std::int64_t>(shape[i], 1);
  }
  return strides;
}

bool is_contiguous(const Shape& shape, const Strides& strides) { return is_contiguous_at(shape, strides.data()); }

bool is_contiguous_at(const Shape& shape, const std::int64_t* strides) {
  if (numel(shape) == 0) return true;
  std::int64_t expected = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

bool is_f_contiguous(const Shape& shape, const Strides& strides) {
  if (numel(shape) == 0) return true;
  std::int64_t expected = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const std::size_t ndim = std::max(a.size(), b.size());
  Shape result(ndim);
  for (std::size_t i = 0; i < ndim; ++i) {
    // Align from the right; a missing axis counts as 1.
    const std::int64_t da = i + a.size() >= ndim ? a[i + a.size() - ndim] : 1;
    const std::int64_t db = i + b.size() >= ndim ? b[i + b.size() - ndim] : 1;
    if (da != db && da != 1 && db != 1) {
      throw ShapeError(std::string(op) + ": shapes " + shape_str(a) + " and " + shape_str(b) +
                       " cannot be broadcast together: axis " + std::to_string(i) + " has sizes " +
                       std::to_string(da) + " and " + std::to_string(db));
    }
    result[i] = da == 1 ? db : da;
  }
  return result;
}

Shape broadcast_shapes(const std::vector<Shape>& shapes, const char* op) {
  detail::InlineBuffer<const Shape*, 8> pointers(shapes.size());
  for (std::size_t i = 0; i < shapes.size(); ++i) pointers[i] = &shapes[i];
  return broadcast_shape_list(pointers.data(), shapes.size(), op);
}

Shape broadcast_shape_list(const Shape* const* shapes, std::size_t count, const char* op) {
  bool same = count > 0;
  for (std::size_t i = 1; i < count && same; ++i) same = *shapes[i] == *shapes[0];
  if (same) return *shapes[0];
  Shape result;
  for (std::size_t i = 0; i < count; ++i) result = broadcast_shapes(result, *shapes[i], op);
  return result;
}

Strides broadcast_strides(const Shape& shape, const Strides& strides, const Shape& target, const char* op) {
  auto fail = [&](std::size_t axis) {
    throw ShapeError(std::string(op) + ": cannot broadcast shape " + shape_str(shape) + " to " +
                     shape_str(target) + ": axis " + std::to_string(axis) + " has size " +
                     (axis + shape.size() >= target.size()
                          ? std::to_string(shape[axis + shape.size() - target.size()])
                          : std::string("(missing)")) +
                     ", target size " + std::to_string(target[axis]));
  };
  if (shape.size() > target.size()) {
    throw ShapeError(std::string(op) + ": cannot broadcast shape " + shape_str(shape) + " to " +
                     shape_str(target) + ": the target has fewer dimensions");
  }
  Strides result(target.size(), 0);
  const std::size_t lead = target.size() - shape.size();
  for (std::size_t i = lead; i < target.size(); ++i) {
    const std::int64_t dim = shape[i - lead];
    if (dim == target[i]) {
      result[i] = target[i] == 1 ? 0 : strides[i - lead];
    } else if (dim == 1) {
      result[i] = 0;
    } else {
      fail(i);
    }
  }
  return result;
}

std::int64_t normalize_axis(std::int64_t axis, std::int64_t ndim, const char* op) {
  if (axis < -ndim || axis >= ndim) {
    throw IndexError(std::string(op) + ": axis " + std::to_string(axis) + " is out of bounds for array of dimension " +
                     std::to_string(ndim));
  }
  return axis < 0 ? axis + ndim : axis;
}

ElementExtent element_extent(const Shape& shape, const Strides& strides) {
  ElementExtent extent{0, 0};
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return ElementExtent{0, -1};
    const std::int64_t reach = (shape[i] - 1) * strides[i];
    (reach < 0 ? extent.lowest : extent.highest) += reach;
  }
  return extent;
}

CollapsedDims collapse_dims(const Shape& shape, const std::vector<Strides>& operand_strides) {
  CollapsedDims result;
  result.strides.resize(operand_strides.size());
  if (numel(shape) == 0) {
    result.shape = {0};
    for (Strides& s : result.strides) s = {0};
    return result;
  }
  for (std::size_t axis = 0; axis < shape.size(); ++axis) {
    if (shape[axis] == 1) continue;
    bool mergeable = !result.shape.empty();
    for (std::size_t op = 0; op < operand_strides.size() && mergeable; ++op) {
      // The previous (outer) merged axis steps over exactly this axis's extent.
      mergeable = result.strides[op].back() == operand_strides[op][axis] * shape[axis];
    }
    if (mergeable) {
      result.shape.back() *= shape[axis];
      for (std::size_t op = 0; op < operand_strides.size(); ++op) result.strides[op].back() = operand_strides[op][axis];
    } else {
      result.shape.push_back(shape[axis]);
      for (std::size_t op = 0; op < operand_strides.size(); ++op) result.strides[op].push_back(operand_strides[op][axis]);
    }
  }
  if (result.shape.empty()) {
    result.shape = {1};
    for (Strides& s : result.strides) s = {0};
  }
  return result;
}

}  // namespace tessel
