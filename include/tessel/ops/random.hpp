#pragma once
// Random arrays from a counter-based Philox4x32-10 generator. The same seed gives the same
// numbers on the CPU and on the GPU: uniform and integer draws bit for bit, normal draws to
// within a few ulp (they go through log and cos, whose last bits differ between libm and CUDA).
#include <atomic>
#include <cstdint>

#include "tessel/array/array.hpp"

namespace tessel::random {

class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0) : seed_(seed) {}
  std::uint64_t seed() const { return seed_; }
  // Each draw takes the next Philox stream, so successive draws differ and the whole sequence
  // is reproducible from the seed.
  std::uint64_t offset() const { return offset_.load(); }
  void set_state(std::uint64_t seed, std::uint64_t offset) {
    seed_ = seed;
    offset_ = offset;
  }

  // [low, high); float16, bfloat16, float32 or float64 (computed in float32 for the first three).
  Array uniform(const Shape& shape, double low = 0.0, double high = 1.0, DType dtype = DType::float32,
                Device device = default_device(), const OptionalStream& stream = std::nullopt);
  // mean + stddev * N(0, 1); stddev >= 0.
  Array normal(const Shape& shape, double mean = 0.0, double stddev = 1.0, DType dtype = DType::float32,
               Device device = default_device(), const OptionalStream& stream = std::nullopt);
  // Integers in [low, high) of an integer dtype that holds both bounds.
  Array integers(const Shape& shape, std::int64_t low, std::int64_t high, DType dtype = DType::int64,
                 Device device = default_device(), const OptionalStream& stream = std::nullopt);

 private:
  std::uint64_t seed_;
  std::atomic<std::uint64_t> offset_{0};
};

// The process-wide generator used by the free functions below.
Generator& default_generator();
void seed(std::uint64_t seed);  // resets the default generator

Array uniform(const Shape& shape, double low = 0.0, double high = 1.0, DType dtype = DType::float32,
              Device device = default_device(), const OptionalStream& stream = std::nullopt);
Array normal(const Shape& shape, double mean = 0.0, double stddev = 1.0, DType dtype = DType::float32,
             Device device = default_device(), const OptionalStream& stream = std::nullopt);
Array integers(const Shape& shape, std::int64_t low, std::int64_t high, DType dtype = DType::int64,
               Device device = default_device(), const OptionalStream& stream = std::nullopt);

}  // namespace tessel::random
