#pragma once
// Random fills, implemented by backend/cpu/random.cpp and backend/cuda/random.cu with the same
// signature. Both compute element i from (seed, offset, i) with Philox4x32-10, so they agree.
#include <cstdint>

#include "backend/dispatch.hpp"
#include "tessel/array/dtype.hpp"
#include "tessel/core/stream.hpp"

namespace tessel::backend {

enum class RandomDistribution { uniform, normal, integers };

struct RandomFill {
  void* out = nullptr;               // contiguous, numel elements of dtype
  DType dtype = DType::float32;
  std::int64_t numel = 0;
  RandomDistribution distribution = RandomDistribution::uniform;
  double a = 0, b = 1;               // uniform: [a, b); normal: mean a, standard deviation b
  std::int64_t low = 0;              // integers: low + [0, range)
  std::uint64_t range = 1;
  std::uint64_t seed = 0;
  std::uint64_t offset = 0;          // Philox stream: advanced per draw so draws differ
};

#define TESSEL_RANDOM_BACKEND(X) X(void, random_fill, (const RandomFill& fill, const Stream& stream))
TESSEL_BACKEND_FAMILY(TESSEL_RANDOM_BACKEND)

}  // namespace tessel::backend
