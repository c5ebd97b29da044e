// getitem / setitem with NumPy's indexing rules, take, take_along_axis, put_along_axis and
// nonzero: validation, the layout of every indexing form as one gather/scatter problem
// (backend/indexing.hpp), and the status read that reports sizes and out-of-range indices.
#include "tessel/ops/indexing.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "array/backend.hpp"
#include "backend/indexing.hpp"
#include "ops/index_status.hpp"
#include "ops/op_stream.hpp"
#include "tessel/core/error.hpp"
#include "tessel/profile/range.hpp"
#include "tessel/memory/capture.hpp"
#include "tessel/ops/backend_entry_points.hpp"
#include "tessel/ops/cast.hpp"
#include "tessel/ops/elementwise.hpp"

namespace tessel {
namespace {

using detail::Status;

// Waits for pending writes of `a` on `stream` (the CPU waits on the host).
void use(const Array& a, const Stream& stream) {
  if (a.defined() && a.size() > 0) a.storage()->wait_on_stream(stream);
}
void wrote(const Array& a, const Stream& stream) {
  if (a.device().is_cuda()) a.storage()->record_pending_write(stream);
}

// Contiguous bool flags of `a` (nonzero elements), on `stream`.
Array flags_of(const Array& a, const Stream& stream) {
  if (a.dtype() == DType::bool_) return a.contiguous(stream);
  return not_equal(a, Scalar(0), std::nullopt, stream).contiguous(stream);
}

// Positions of the true flags (flat, C order) as an int64 array of `count` elements; the count
// is read through `status` (one read on CUDA).
Array flat_positions(const Array& mask, Status& status, const Stream& stream, const char* op) {
  const Array flags = flags_of(mask, stream);
  const std::int64_t n = flags.size();
  Array positions = empty({n}, DType::int64, mask.device(), stream);
  std::int64_t count = 0;
  if (n > 0) {
    use(flags, stream);
    backend::dispatch::flat_nonzero(mask.device(), flags.data_as<bool>(), n, positions.data_as<std::int64_t>(),
                                    status.words(), stream);
    wrote(positions, stream);
    count = status.read()[0];
  }
  (void)op;
  return positions.index({Slice(0, count)});
}

std::string shape_text(const Shape& s) { return shape_str(s); }

// ---- the index expression, laid out ----
struct Advanced {
  Array index;              // int array; a mask until resolved, then its flat positions
  std::int64_t first_dim;   // first axis of the view it indexes
  std::int64_t ndim;        // axes it indexes (a mask's rank, else 1)
  bool mask = false;
  std::int64_t original_axis = -1;  // for messages; -1 for the axis a 0-d bool adds
  Shape mask_shape;
};

struct Layout {
  Array view;  // x after the basic entries; indexed axes kept whole
  std::vector<Advanced> advanced;
  bool adjacent = true;
  std::int64_t insert_at = 0;  // view axis where the index dimensions go when adjacent
  bool basic_only = true;
};

bool is_int_or_bool(DType d) { return is_integer(d) || d == DType::bool_; }

Layout lay_out(const Array& x, const std::vector<IndexItem>& items, const char* op) {
  Layout layout;
  std::int64_t consumed = 0, ellipses = 0;
  for (const IndexItem& item : items) {
    const auto& value = item.value();
    if (const Array* a = item.array()) {
      layout.basic_only = false;
      if (!a->defined()) throw IndexError(fmt::format("{}: an index array is undefined", op));
      if (!is_int_or_bool(a->dtype())) {
        throw IndexError(fmt::format("{}: arrays used as indices must be of integer (or boolean) type, got {} of shape {}",
                                     op, dtype_name(a->dtype()), shape_text(a->shape())));
      }
      if (a->device() != x.device()) {
        throw DeviceError(fmt::format("{}: the index array is on {} but the indexed array is on {}", op,
                                      a->device().str(), x.device().str()));
      }
      consumed += a->dtype() == DType::bool_ ? a->ndim() : 1;
    } else if (std::holds_alternative<std::int64_t>(value) || std::holds_alternative<Slice>(value)) {
      ++consumed;
    } else if (std::holds_alternative<Ellipsis>(value)) {
      ++ellipses;
    }
  }
  if (ellipses > 1) throw IndexError(fmt::format("{}: an index can only have a single ellipsis ('...')", op));
  if (consumed > x.ndim()) {
    throw IndexError(fmt::format("{}: too many indices for array: array is {}-dimensional, but {} were indexed", op,
                                 x.ndim(), consumed));
  }
  if (layout.basic_only) {
    layout.view = x.index(items);
    return layout;
  }
  // Walk the entries: basic ones build the view, index arrays keep their axes whole. `runs`
  // counts the stretches of advanced entries (integers count here) to decide adjacency.
  std::vector<IndexItem> basic;
  std::int64_t axis = 0, view_dims = 0, runs = 0;
  bool in_run = false;
  auto advanced_entry = [&] {
    if (!in_run) {
      ++runs;
      if (runs == 1) layout.insert_at = view_dims;
    }
    in_run = true;
  };
  for (const IndexItem& item : items) {
    const auto& value = item.value();
    if (const Array* a = item.array()) {
      advanced_entry();
      if (a->dtype() != DType::bool_) {
        basic.emplace_back(Slice());
        layout.advanced.push_back({*a, view_dims, 1, false, axis, {}});
        ++axis;
        ++view_dims;
      } else if (a->ndim() == 0) {
        // A 0-d boolean adds an axis of length 1 and selects it (True) or nothing (False).
        basic.emplace_back(newaxis);
        layout.advanced.push_back({a->reshape({1}), view_dims, 1, true, -1, Shape{1}});
        ++view_dims;
      } else {
        const Shape indexed(x.shape().begin() + axis, x.shape().begin() + axis + a->ndim());
        // The Array API standard: each mask dimension equals the array's or is 0 (selecting
        // nothing); a 0 one takes an empty slice of its axis, so the view has the mask's shape.
        for (std::int64_t i = 0; i < a->ndim(); ++i) {
          const std::int64_t size = a->shape()[i];
          if (size != indexed[i] && size != 0) {
            throw IndexError(fmt::format(
                "{}: boolean index of shape {} does not match the indexed array's shape {} at axes {}..{} (array shape {})",
                op, shape_text(a->shape()), shape_text(indexed), axis, axis + a->ndim() - 1, shape_text(x.shape())));
          }
          basic.emplace_back(size == indexed[i] ? Slice() : Slice(0, 0));
        }
        layout.advanced.push_back({*a, view_dims, a->ndim(), true, axis, a->shape()});
        axis += a->ndim();
        view_dims += a->ndim();
      }
    } else if (const auto* integer = std::get_if<std::int64_t>(&value)) {
      advanced_entry();
      basic.emplace_back(*integer);
      ++axis;
    } else if (std::holds_alternative<Slice>(value)) {
      in_run = false;
      basic.push_back(item);
      ++axis;
      ++view_dims;
    } else if (std::holds_alternative<NewAxis>(value)) {
      in_run = false;
      basic.push_back(item);
      ++view_dims;
    } else {  // the ellipsis: whole axes; as in NumPy it separates advanced indices even when it stands for none
      const std::int64_t count = x.ndim() - consumed;
      in_run = false;
      for (std::int64_t i = 0; i < count; ++i) basic.emplace_back(Slice());
      axis += count;
      view_dims += count;
    }
  }
  layout.adjacent = runs <= 1;
  // Integers raise their own IndexError (axis, index, size) here.
  layout.view = x.index(basic);
  return layout;
}

// Broadcast shape of the index arrays (masks as their count).
Shape index_shape(const std::vector<Advanced>& advanced, const char* op) {
  std::vector<Shape> shapes;
  for (const Advanced& a : advanced) shapes.push_back(a.index.shape());
  try {
    return broadcast_shapes(shapes, op);
  } catch (const ShapeError&) {
    std::string list;
    for (const Shape& s : shapes) list += (list.empty() ? "" : " ") + shape_text(s);
    throw IndexError(fmt::format("{}: shape mismatch: indexing arrays could not be broadcast together with shapes {}",
                                 op, list));
  }
}

// The gather/scatter problem of a resolved layout (masks replaced by their positions).
struct Planned {
  backend::GatherProblem problem;
  Shape shape;  // the result shape
};

Planned plan(const Layout& layout, const char* op) {
  const Array& view = layout.view;
  const Shape b = index_shape(layout.advanced, op);
  std::vector<bool> indexed(static_cast<std::size_t>(view.ndim()), false);
  for (const Advanced& a : layout.advanced) {
    for (std::int64_t d = 0; d < a.ndim; ++d) indexed[static_cast<std::size_t>(a.first_dim + d)] = true;
  }
  // Result axes: (view axis or -1 for an index dimension), in order.
  std::vector<std::int64_t> axes;
  auto add_rest = [&](std::int64_t from, std::int64_t to) {
    for (std::int64_t d = from; d < to; ++d) {
      if (!indexed[static_cast<std::size_t>(d)]) axes.push_back(d);
    }
  };
  if (layout.adjacent) {
    add_rest(0, layout.insert_at);
    for (std::size_t i = 0; i < b.size(); ++i) axes.push_back(-1 - static_cast<std::int64_t>(i));
    add_rest(layout.insert_at, view.ndim());
  } else {
    for (std::size_t i = 0; i < b.size(); ++i) axes.push_back(-1 - static_cast<std::int64_t>(i));
    add_rest(0, view.ndim());
  }
  Planned planned;
  backend::GatherProblem& p = planned.problem;
  p.dtype = view.dtype();
  p.base = view.data();
  for (std::int64_t a : axes) {
    if (a >= 0) {
      planned.shape.push_back(view.shape()[static_cast<std::size_t>(a)]);
      p.base_strides.push_back(view.strides()[static_cast<std::size_t>(a)]);
    } else {
      planned.shape.push_back(b[static_cast<std::size_t>(-1 - a)]);
      p.base_strides.push_back(0);
    }
  }
  p.shape = planned.shape;
  for (const Advanced& a : layout.advanced) {
    backend::IndexOperand operand;
    operand.data = a.index.data();
    operand.dtype = a.index.dtype();
    operand.from_mask = a.mask;
    const Strides in_b = broadcast_strides(a.index.shape(), a.index.strides(), b, op);
    for (std::int64_t ax : axes) operand.strides.push_back(ax >= 0 ? 0 : in_b[static_cast<std::size_t>(-1 - ax)]);
    for (std::int64_t d = 0; d < a.ndim; ++d) {
      const auto at = static_cast<std::size_t>(a.first_dim + d);
      operand.axes.push_back({view.shape()[at], view.strides()[at]});
    }
    p.indices.push_back(std::move(operand));
  }
  return planned;
}

// Raises the IndexError a status reports (after clearing it). `axis_of(slot)` gives the original
// axis and the size of the failing index operand's axis.
template <class AxisOf>
void raise_if_failed(const std::int64_t* words, Status& status, AxisOf axis_of, const char* op) {
  if (words[1] == 0) return;
  const auto slot = static_cast<std::size_t>(words[1] - 1);
  const std::int64_t value = words[2];
  status.clear_failure();
  const auto [axis, size] = axis_of(slot);
  // Several failing threads may leave one's slot with another's value: name the value only when
  // it is out of range for that axis.
  if (value < -size || value >= size) {
    throw IndexError(fmt::format("{}: index {} is out of bounds for axis {} with size {}", op, value, axis, size));
  }
  throw IndexError(fmt::format("{}: an index is out of bounds for axis {} with size {}", op, axis, size));
}

// The (original axis, size) of advanced entry k of a layout.
std::pair<std::int64_t, std::int64_t> layout_axis(const Layout& layout, std::size_t k) {
  const Advanced& a = layout.advanced.at(k);
  return {a.original_axis, layout.view.shape()[static_cast<std::size_t>(a.first_dim)]};
}

// Replaces the masks of a layout by their positions. `status` is read once per mask; checks
// launched before (the integer arrays' bounds) are read with the first.
void resolve_masks(Layout& layout, Status& status, const Stream& stream, const char* op) {
  for (Advanced& a : layout.advanced) {
    if (a.mask) a.index = flat_positions(a.index, status, stream, op);
  }
}

bool has_mask(const Layout& layout) {
  return std::any_of(layout.advanced.begin(), layout.advanced.end(), [](const Advanced& a) { return a.mask; });
}
bool has_int_array(const Layout& layout) {
  return std::any_of(layout.advanced.begin(), layout.advanced.end(), [](const Advanced& a) { return !a.mask; });
}

// Launches one bounds check of the integer index arrays (broadcast among themselves); its
// status is read with the masks' counts. Returns the layout slot of each checked operand.
std::vector<std::size_t> launch_int_checks(const Layout& layout, Status& status, const Stream& stream, const char* op) {
  std::vector<Advanced> ints;
  std::vector<std::size_t> slots;
  for (std::size_t k = 0; k < layout.advanced.size(); ++k) {
    if (layout.advanced[k].mask) continue;
    ints.push_back(layout.advanced[k]);
    slots.push_back(k);
  }
  const Shape b = index_shape(ints, op);
  if (numel(b) == 0) return slots;
  backend::GatherProblem p;
  p.dtype = layout.view.dtype();
  p.shape = b;
  for (const Advanced& a : ints) {
    backend::IndexOperand operand;
    operand.data = a.index.data();
    operand.dtype = a.index.dtype();
    operand.strides = broadcast_strides(a.index.shape(), a.index.strides(), b, op);
    const auto at = static_cast<std::size_t>(a.first_dim);
    operand.axes.push_back({layout.view.shape()[at], layout.view.strides()[at]});
    p.indices.push_back(std::move(operand));
    use(a.index, stream);
  }
  p.status = status.words();
  backend::dispatch::check_indices(layout.view.device(), p, stream);
  return slots;
}

Array gather_layout(Layout& layout, const Stream& stream, const char* op, bool check_bounds) {
  const Device device = layout.view.device();
  Status status(device, stream);
  const bool masks = has_mask(layout);
  const bool ints = has_int_array(layout);
  // With masks the count is read anyway: integer arrays are checked before that read, and the
  // gather runs unchecked.
  if (masks && ints && check_bounds) {
    const std::vector<std::size_t> slots = launch_int_checks(layout, status, stream, op);
    resolve_masks(layout, status, stream, op);  // the first count read brings the check's flag too
    raise_if_failed(status.read(), status, [&](std::size_t slot) { return layout_axis(layout, slots.at(slot)); }, op);
  } else {
    resolve_masks(layout, status, stream, op);
  }
  Planned planned = plan(layout, op);
  backend::GatherProblem& p = planned.problem;
  Array out = empty(planned.shape, layout.view.dtype(), device, stream);
  if (out.size() == 0) return out;
  p.out = out.data();
  p.check_bounds = check_bounds && ints && !masks;
  use(layout.view, stream);
  for (const Advanced& a : layout.advanced) use(a.index, stream);
  if (p.check_bounds) p.status = status.words();  // an unchecked gather is not read back
  backend::dispatch::gather(device, p, stream);
  wrote(out, stream);
  if (p.check_bounds) raise_if_failed(status.read(), status, [&](std::size_t slot) { return layout_axis(layout, slot); }, op);
  return out;
}

// x[m] for a boolean m over every axis of the view: one compaction pass.
Array select_all(const Array& view, const Array& mask, const Stream& stream) {
  const Array values = view.contiguous(stream);
  const Array flags = mask.contiguous(stream);
  const std::int64_t n = values.size();
  Array out = empty({n}, view.dtype(), view.device(), stream);
  if (n == 0) return out;
  use(values, stream);
  use(flags, stream);
  std::int64_t count = 0;
  {
    Status status(view.device(), stream);
    backend::dispatch::select_flagged(view.device(), values.data(), values.itemsize(), flags.data_as<bool>(), n,
                                      out.data(), status.words(), stream);
    wrote(out, stream);
    count = status.read()[0];
  }
  Array result = out.index({Slice(0, count)});
  // Keep at most 4x the memory the result needs (the buffer was sized for all of x).
  if (count * 4 < n) result = result.copy(stream);
  return result;
}

// The value of setitem, prepared: cast to x's dtype, a private copy when it shares x's memory.
Array prepare_value(const Array& x, const Array& value, const Stream& stream, const char* op) {
  if (value.device() != x.device()) {
    throw DeviceError(fmt::format("{}: the value is on {} but the array is on {}", op, value.device().str(),
                                  x.device().str()));
  }
  Array v = value.dtype() == x.dtype() ? value : astype(value, x.dtype(), stream);
  if (v.storage() == x.storage()) v = v.copy(stream);
  return v;
}

// x[m] = value with one mask and a value that does not vary along the selected elements: one
// fused where(m, value, x) over the view, no count needed. Returns false when it does not apply.
bool set_by_where(const Layout& layout, const Array* value, const Scalar* scalar, const Stream& stream) {
  if (layout.advanced.size() != 1 || !layout.advanced[0].mask) return false;
  const Advanced& a = layout.advanced[0];
  const Array& view = layout.view;
  // The result shape with the selected-count dimension as 1.
  Shape rest_before(view.shape().begin(), view.shape().begin() + a.first_dim);
  Shape rest_after(view.shape().begin() + a.first_dim + a.ndim, view.shape().end());
  // Adjacent: the count axis sits where the mask's axes were; else it goes first. Either way the
  // other axes keep the view's order.
  const std::int64_t count_axis = layout.adjacent ? a.first_dim : 0;
  Shape with_one = rest_before;
  with_one.insert(with_one.end(), rest_after.begin(), rest_after.end());
  with_one.insert(with_one.begin() + count_axis, 1);
  Array v;
  if (value) {
    if (value->ndim() > static_cast<std::int64_t>(with_one.size())) return false;
    const std::int64_t pos = count_axis - (static_cast<std::int64_t>(with_one.size()) - value->ndim());
    if (pos >= 0 && value->shape()[static_cast<std::size_t>(pos)] != 1) return false;
    try {
      if (broadcast_shapes(value->shape(), with_one) != with_one) return false;
    } catch (const ShapeError&) {
      return false;
    }
    v = value->broadcast_to(with_one);
  } else {
    // The CPU's where() takes the scalar as a 0-d array; CUDA passes it by value below.
    v = (view.device().is_cpu() ? full({}, *scalar, view.dtype(), view.device(), stream)
                                : empty({}, view.dtype(), view.device(), stream))
            .broadcast_to(with_one);
  }
  // Back into the view's axes: drop the count axis, put the mask's axes (size 1) in its place.
  Shape v_shape = v.shape();
  Strides v_strides = v.strides();
  v_shape.erase(v_shape.begin() + count_axis);
  v_strides.erase(v_strides.begin() + count_axis);
  v_shape.insert(v_shape.begin() + a.first_dim, static_cast<std::size_t>(a.ndim), 1);
  v_strides.insert(v_strides.begin() + a.first_dim, static_cast<std::size_t>(a.ndim), 0);
  const Array v_view = v.as_strided(v_shape, v_strides, v.offset()).broadcast_to(view.shape());
  Shape m_shape(static_cast<std::size_t>(a.first_dim), 1);
  m_shape.insert(m_shape.end(), a.mask_shape.begin(), a.mask_shape.end());
  m_shape.resize(static_cast<std::size_t>(view.ndim()), 1);
  const Array m = a.index.reshape(m_shape, stream).broadcast_to(view.shape());
  if (view.device().is_cpu()) {
    where(m, v_view, view, view, stream);
    return true;
  }
  // One generated pass, the scalar by value (no broadcast operand, so contiguous x and m get
  // vector loads and stores).
  backend::MaskedAssignProblem p;
  p.dtype = view.dtype();
  p.shape = view.shape();
  p.x = view.data();
  p.x_strides = view.strides();
  p.mask = m.data_as<bool>();
  p.mask_strides = m.strides();
  if (value) {
    p.values = v_view.data();
    p.value_strides = v_view.strides();
  } else {
    scalar->store(view.dtype(), p.scalar);
  }
  if (view.size() == 0) return true;
  use(view, stream);
  use(m, stream);
  if (value) use(v_view, stream);
  backend::cuda::masked_assign(p, stream);
  wrote(view, stream);
  return true;
}

void set_layout(Layout& layout, const Array* value_arg, const Scalar* scalar, const Stream& stream, const char* op,
                bool check_bounds = true) {
  const Array& x = layout.view;
  Array value;
  if (value_arg) value = prepare_value(x, *value_arg, stream, op);
  if (layout.basic_only) {
    if (value_arg) {
      copyto(x, value, stream);
    } else {
      fill(x, *scalar, stream);
    }
    return;
  }
  if (set_by_where(layout, value_arg ? &value : nullptr, scalar, stream)) return;
  const Device device = x.device();
  Status status(device, stream);
  const bool ints = has_int_array(layout);
  bool checked = false;
  if (ints && check_bounds && has_mask(layout)) {
    // The integer arrays' check is read with the first mask's count: one read.
    const std::vector<std::size_t> slots = launch_int_checks(layout, status, stream, op);
    resolve_masks(layout, status, stream, op);
    raise_if_failed(status.read(), status, [&](std::size_t slot) { return layout_axis(layout, slots.at(slot)); }, op);
    checked = true;
  } else {
    resolve_masks(layout, status, stream, op);
  }
  Planned planned = plan(layout, op);
  backend::GatherProblem& p = planned.problem;
  if (value_arg) {
    try {
      p.value_strides = broadcast_strides(value.shape(), value.strides(), planned.shape, op);
    } catch (const ShapeError&) {
      throw ValueError(fmt::format("{}: shape mismatch: value array of shape {} could not be broadcast to indexing result of shape {}",
                                   op, shape_text(value.shape()), shape_text(planned.shape)));
    }
    p.values = value.data();
  } else {
    p.value_is_scalar = true;
    scalar->store(x.dtype(), p.scalar);
  }
  if (numel(planned.shape) == 0) return;
  for (const Advanced& a : layout.advanced) use(a.index, stream);
  if (ints && check_bounds && !checked) {
    // Check first (nothing is written when an index is out of range): one read.
    p.status = status.words();
    backend::dispatch::check_indices(device, p, stream);
    raise_if_failed(status.read(), status, [&](std::size_t slot) { return layout_axis(layout, slot); }, op);
  }
  use(x, stream);
  if (value_arg) use(value, stream);
  backend::dispatch::scatter(device, p, stream);
  wrote(x, stream);
}

void check_index_dtype(const Array& indices, const char* op) {
  if (!is_integer(indices.dtype())) {
    throw IndexError(fmt::format("{}: indices must be an integer array, got {} of shape {}", op,
                                 dtype_name(indices.dtype()), shape_text(indices.shape())));
  }
}

// The gather/scatter problem of take_along_axis / put_along_axis.
struct AlongAxis {
  Array x;
  Array indices;
  std::int64_t axis;
  Layout layout;  // for messages: one advanced entry on `axis`
  Planned planned;
};

AlongAxis plan_along_axis(const Array& x_arg, const Array& indices, std::optional<std::int64_t> axis_arg,
                          const char* op) {
  check_index_dtype(indices, op);
  if (indices.device() != x_arg.device()) {
    throw DeviceError(fmt::format("{}: the indices are on {} but the array is on {}", op, indices.device().str(),
                                  x_arg.device().str()));
  }
  AlongAxis r;
  r.x = x_arg;
  if (!axis_arg) {
    if (indices.ndim() != 1) {
      throw ValueError(fmt::format("{}: with axis=None the indices must be 1-D, got shape {}", op, shape_text(indices.shape())));
    }
    r.x = x_arg.reshape({x_arg.size()});
  }
  if (indices.ndim() != r.x.ndim()) {
    throw ValueError(fmt::format("{}: indices and array must have the same number of dimensions, got indices of shape {} "
                                 "and an array of shape {}", op, shape_text(indices.shape()), shape_text(r.x.shape())));
  }
  if (r.x.ndim() == 0) throw ValueError(fmt::format("{}: the array must have at least one dimension", op));
  r.axis = normalize_axis(axis_arg.value_or(0), r.x.ndim(), op);
  r.indices = indices;
  // Broadcast the other axes; the indices' extent along `axis`.
  Shape shape;
  for (std::int64_t d = 0; d < r.x.ndim(); ++d) {
    const std::int64_t xs = r.x.shape()[static_cast<std::size_t>(d)], is = indices.shape()[static_cast<std::size_t>(d)];
    if (d == r.axis) {
      shape.push_back(is);
    } else if (xs == is || is == 1 || xs == 1) {
      shape.push_back(xs == 1 ? is : xs);
    } else {
      throw ValueError(fmt::format("{}: shape mismatch: indices of shape {} do not broadcast against the array of shape {} "
                                   "outside axis {}", op, shape_text(indices.shape()), shape_text(r.x.shape()), r.axis));
    }
  }
  backend::GatherProblem& p = r.planned.problem;
  r.planned.shape = shape;
  p.shape = shape;
  p.dtype = r.x.dtype();
  p.base = r.x.data();
  backend::IndexOperand operand;
  operand.data = indices.data();
  operand.dtype = indices.dtype();
  for (std::int64_t d = 0; d < r.x.ndim(); ++d) {
    const auto at = static_cast<std::size_t>(d);
    const bool x_broadcast = r.x.shape()[at] == 1 && shape[at] != 1;
    p.base_strides.push_back(d == r.axis || x_broadcast ? 0 : r.x.strides()[at]);
    const bool i_broadcast = indices.shape()[at] == 1 && shape[at] != 1;
    operand.strides.push_back(i_broadcast ? 0 : indices.strides()[at]);
  }
  const auto at = static_cast<std::size_t>(r.axis);
  operand.axes.push_back({r.x.shape()[at], r.x.strides()[at]});
  p.indices.push_back(std::move(operand));
  r.layout.view = r.x;
  r.layout.basic_only = false;
  r.layout.advanced.push_back({indices, r.axis, 1, false, axis_arg ? r.axis : 0, {}});
  return r;
}

void put_along(const Array& x, const Array& indices, const Array* values_arg, const Scalar* scalar,
               std::optional<std::int64_t> axis, const OptionalStream& stream_arg) {
  const char* op = "put_along_axis";
  check_writable(x, op);
  const Stream stream = detail::op_stream(x, stream_arg, op);
  if (!axis && !x.is_contiguous()) {
    throw ValueError("put_along_axis: axis=None needs a C-contiguous array (it writes through the flattened view)");
  }
  AlongAxis r = plan_along_axis(x, indices, axis, op);
  backend::GatherProblem& p = r.planned.problem;
  Array values;
  if (values_arg) {
    values = prepare_value(x, *values_arg, stream, op);
    try {
      p.value_strides = broadcast_strides(values.shape(), values.strides(), r.planned.shape, op);
    } catch (const ShapeError&) {
      throw ValueError(fmt::format("{}: values of shape {} do not broadcast to the indices' shape {}", op,
                                   shape_text(values.shape()), shape_text(r.planned.shape)));
    }
    p.values = values.data();
  } else {
    p.value_is_scalar = true;
    scalar->store(x.dtype(), p.scalar);
  }
  if (numel(r.planned.shape) == 0) return;
  Status status(x.device(), stream);
  use(indices, stream);
  p.status = status.words();
  backend::dispatch::check_indices(x.device(), p, stream);
  raise_if_failed(status.read(), status, [&](std::size_t slot) { return layout_axis(r.layout, slot); }, op);
  use(x, stream);
  if (values_arg) use(values, stream);
  backend::dispatch::scatter(x.device(), p, stream);
  wrote(x, stream);
}

}  // namespace

Array getitem(const Array& x, const std::vector<IndexItem>& items, const OptionalStream& stream_arg) {
  const char* op = "getitem";
  Layout layout = lay_out(x, items, op);
  if (layout.basic_only) return layout.view;
  TESSEL_RANGE("getitem");
  const Stream stream = detail::op_stream(x, stream_arg, op);
  if (layout.advanced.size() == 1 && layout.advanced[0].mask && layout.advanced[0].first_dim == 0 &&
      layout.advanced[0].ndim == layout.view.ndim()) {
    return select_all(layout.view, layout.advanced[0].index, stream);
  }
  return gather_layout(layout, stream, op, true);
}

void setitem(const Array& x, const std::vector<IndexItem>& items, const Array& value, const OptionalStream& stream_arg) {
  const char* op = "setitem";
  check_writable(x, op);
  Layout layout = lay_out(x, items, op);
  TESSEL_RANGE("setitem");
  const Stream stream = detail::op_stream(x, stream_arg, op);
  set_layout(layout, &value, nullptr, stream, op);
}

void setitem(const Array& x, const std::vector<IndexItem>& items, Scalar value, const OptionalStream& stream_arg) {
  const char* op = "setitem";
  check_writable(x, op);
  Layout layout = lay_out(x, items, op);
  TESSEL_RANGE("setitem");
  const Stream stream = detail::op_stream(x, stream_arg, op);
  set_layout(layout, nullptr, &value, stream, op);
}

namespace {
Array take_impl(const Array& x_arg, const Array& indices, std::optional<std::int64_t> axis_arg,
                const OptionalStream& stream_arg, bool check_bounds) {
  const char* op = "take";
  check_index_dtype(indices, op);
  const Stream stream = detail::op_stream(x_arg, stream_arg, op);
  const Array x = axis_arg ? x_arg : x_arg.reshape({x_arg.size()}, stream);
  if (x.ndim() == 0) throw ValueError("take: x must have at least one dimension, got a 0-d array");
  const std::int64_t axis = normalize_axis(axis_arg.value_or(0), x.ndim(), op);
  std::vector<IndexItem> items(static_cast<std::size_t>(axis), IndexItem(Slice()));
  items.emplace_back(indices);
  Layout layout = lay_out(x, items, op);
  return gather_layout(layout, stream, op, check_bounds);
}
}  // namespace

Array take(const Array& x, const Array& indices, std::optional<std::int64_t> axis, const OptionalStream& stream) {
  TESSEL_RANGE("take");
  return take_impl(x, indices, axis, stream, true);
}

Array take_along_axis(const Array& x, const Array& indices, std::optional<std::int64_t> axis,
                      const OptionalStream& stream_arg) {
  TESSEL_RANGE("take_along_axis");
  const char* op = "take_along_axis";
  const Stream stream = detail::op_stream(x, stream_arg, op);
  AlongAxis r = plan_along_axis(x, indices, axis, op);
  Array out = empty(r.planned.shape, x.dtype(), x.device(), stream);
  if (out.size() == 0) return out;
  backend::GatherProblem& p = r.planned.problem;
  Status status(x.device(), stream);
  p.out = out.data();
  p.status = status.words();
  use(r.x, stream);
  use(indices, stream);
  backend::dispatch::gather(x.device(), p, stream);
  wrote(out, stream);
  raise_if_failed(status.read(), status, [&](std::size_t slot) { return layout_axis(r.layout, slot); }, op);
  return out;
}

void put_along_axis(const Array& x, const Array& indices, const Array& values, std::optional<std::int64_t> axis,
                    const OptionalStream& stream) {
  TESSEL_RANGE("put_along_axis");
  put_along(x, indices, &values, nullptr, axis, stream);
}

void put_along_axis(const Array& x, const Array& indices, Scalar value, std::optional<std::int64_t> axis,
                    const OptionalStream& stream) {
  TESSEL_RANGE("put_along_axis");
  put_along(x, indices, nullptr, &value, axis, stream);
}

std::vector<Array> nonzero(const Array& x, const OptionalStream& stream_arg) {
  TESSEL_RANGE("nonzero");
  if (x.ndim() == 0) {
    throw ValueError("nonzero: 0-d arrays are not supported (Array API); use nonzero(atleast_1d(x)) or x.reshape(1)");
  }
  const Stream stream = detail::op_stream(x, stream_arg, "nonzero");
  Status status(x.device(), stream);
  const Array flat = flat_positions(x, status, stream, "nonzero");
  if (x.ndim() == 1) return {flat.size() * 4 < x.size() ? flat.copy(stream) : flat};
  const std::int64_t count = flat.size();
  std::vector<Array> out;
  std::vector<std::int64_t*> pointers;
  for (std::int64_t d = 0; d < x.ndim(); ++d) {
    out.push_back(empty({count}, DType::int64, x.device(), stream));
    pointers.push_back(out.back().data_as<std::int64_t>());
  }
  if (count == 0) return out;
  backend::dispatch::unravel(x.device(), flat.data_as<std::int64_t>(), count, x.shape(), pointers, stream);
  for (const Array& a : out) wrote(a, stream);  // nothing to record on the CPU
  return out;
}

namespace internal {
void setitem_unchecked(const Array& x, const std::vector<IndexItem>& items, Scalar value, const OptionalStream& stream_arg) {
  const char* op = "setitem";
  check_writable(x, op);
  Layout layout = lay_out(x, items, op);
  const Stream stream = detail::op_stream(x, stream_arg, op);
  set_layout(layout, nullptr, &value, stream, op, false);
}

Array take_unchecked(const Array& x, const Array& indices, std::optional<std::int64_t> axis,
                     const OptionalStream& stream) {
  return take_impl(x, indices, axis, stream, false);
}

}  // namespace internal

}  // namespace tessel
