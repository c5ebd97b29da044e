#pragma once
// The permutation that moves one axis last (so rows along it are contiguous after a copy), and
// its inverse, to put results back in the caller's axis order.
#include <cstdint>
#include <vector>

namespace tessel::detail {

struct AxisLastPermutation {
  std::vector<std::int64_t> order;    // permute(order) moves `axis` last
  std::vector<std::int64_t> inverse;  // permute(inverse) undoes it
};

inline AxisLastPermutation move_axis_last(std::int64_t ndim, std::int64_t axis) {
  AxisLastPermutation p;
  p.inverse.resize(static_cast<std::size_t>(ndim));
  for (std::int64_t i = 0; i < ndim; ++i) {
    if (i != axis) p.order.push_back(i);
  }
  p.order.push_back(axis);
  for (std::int64_t i = 0; i < ndim; ++i) p.inverse[static_cast<std::size_t>(p.order[static_cast<std::size_t>(i)])] = i;
  return p;
}

}  // namespace tessel::detail
