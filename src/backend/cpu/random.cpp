#include <cmath>
#include <complex>
#include <type_traits>

#include <fmt/format.h>

#include "backend/cpu/threads.hpp"
#include "backend/cuda/device/random_element.cuh"
#include "backend/random.hpp"
#include "tessel/array/dtype_dispatch.hpp"
#include "tessel/core/error.hpp"

namespace tessel::backend::cpu {
namespace {

// Calls value(block_words, lane) for every element, one Philox block per group of per_block elements.
template <class T, class Value>
void fill_blocks(const RandomFill& f, int per_block, Value value) {
  T* out = static_cast<T*>(f.out);
  const std::int64_t blocks = (f.numel + per_block - 1) / per_block;
  const int threads = loop_threads(blocks, 8192);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const philox::U32x4 r = philox::generate(static_cast<unsigned long long>(b), f.offset, f.seed);
    for (int lane = 0; lane < per_block; ++lane) {
      const std::int64_t i = b * per_block + lane;
      if (i < f.numel) out[i] = value(r, lane);
    }
  }
}

template <class T>
void fill_typed(const RandomFill& f) {
  constexpr bool is_int = std::is_integral_v<T> && !std::is_same_v<T, bool>;
  constexpr bool is_small_float = std::is_same_v<T, float> || std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;
  if constexpr (is_int) {
    fill_blocks<T>(f, philox::integer_per_block, [&](const philox::U32x4& r, int lane) {
      return static_cast<T>(f.low + static_cast<std::int64_t>(philox::integer_below(r, lane, f.range)));
    });
  } else if constexpr (std::is_same_v<T, double>) {
    if (f.distribution == RandomDistribution::uniform) {
      fill_blocks<T>(f, philox::uniform_f64_per_block,
                     [&](const philox::U32x4& r, int lane) { return f.a + (f.b - f.a) * philox::uniform_f64(r, lane); });
    } else {
      fill_blocks<T>(f, philox::normal_f64_per_block,
                     [&](const philox::U32x4& r, int lane) { return f.a + f.b * philox::normal_f64(r, lane); });
    }
  } else if constexpr (is_small_float) {
    // Computed in float32 and rounded once, as the CUDA kernel does.
    const float a = static_cast<float>(f.a), b = static_cast<float>(f.b);
    if (f.distribution == RandomDistribution::uniform) {
      fill_blocks<T>(f, philox::uniform_f32_per_block,
                     [&](const philox::U32x4& r, int lane) { return T(a + (b - a) * philox::uniform_f32(r, lane)); });
    } else {
      fill_blocks<T>(f, philox::normal_f32_per_block,
                     [&](const philox::U32x4& r, int lane) { return T(a + b * philox::normal_f32(r, lane)); });
    }
  } else {
    throw DTypeError(fmt::format("random: dtype {} is not supported", dtype_name(dtype_of<T>)));
  }
}

}  // namespace

void random_fill(const RandomFill& fill, const Stream&) {
  dispatch_dtype(fill.dtype, [&](auto tag) { fill_typed<typename decltype(tag)::type>(fill); });
}

}  // namespace tessel::backend::cpu
