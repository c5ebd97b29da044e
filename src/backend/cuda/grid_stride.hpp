#pragma once
// The launch shape of the ahead-of-time grid-stride kernels (copy, fill, arange, linspace).
#include <algorithm>
#include <cstdint>

#include "tessel/core/device.hpp"

namespace tessel::backend::cuda {

constexpr int threads_per_block = 256;

// Enough blocks for `count` elements, at most 16 resident blocks per SM: a few waves, and the
// grid-stride loop covers the rest.
inline unsigned grid_stride_blocks(std::int64_t count, Device device) {
  const std::int64_t blocks_needed = (count + threads_per_block - 1) / threads_per_block;
  const std::int64_t resident = static_cast<std::int64_t>(device_properties(device.index).multiprocessors) * 16;
  return static_cast<unsigned>(std::max<std::int64_t>(1, std::min(blocks_needed, resident)));
}

}  // namespace tessel::backend::cuda
