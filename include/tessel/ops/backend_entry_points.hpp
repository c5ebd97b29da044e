#pragma once
// INTERNAL, not part of tessel's API (tessel.hpp does not include it; signatures follow the
// backends). Single backend calls below the public ops, for the benchmarks that time one part of
// an op (the CUDA elementwise launch alone) or the bare library call an op wraps (cufftExec, CUB's
// SortPairs) next to the op itself. Without a CUDA build they raise DeviceError.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessel/array/array.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/ops/elementwise.hpp"

namespace tessel::internal {

// ---- elementwise: the CUDA backend's part of op(inputs..., out=out) ----
// Kernel-cache lookup, parameter packing and launch, without the ops layer's validation,
// promotion and stream bookkeeping. `count` inputs (at most 3) as the ops layer passes them:
// inputs[i] an array of in_dtypes[i] and out's shape, or scalars[i] set (inputs[i] null) for a
// weak scalar passed by value; out of the op's result dtype.
void cuda_elementwise(ElementwiseOp op, int count, const Array* const* inputs, const Scalar* const* scalars,
                      const DType* in_dtypes, const Array& out, const Stream& stream);

// ---- fft: tessel's cuFFT plan and the bare cufftExec for one layout ----
// Forward complex-to-complex transforms over the last axis of `in` into `out`: contiguous arrays
// of one shape (n) or (batch, n), both complex64 or both complex128, on the stream's device.
// ValueError naming the shapes, dtypes or devices otherwise.
class CufftC2C {
 public:
  CufftC2C(const Array& in, const Array& out, const Stream& stream);
  // The plan tessel's fft takes from the device's plan cache (a lookup on a hit; a miss makes it).
  std::shared_ptr<void> plan() const;
  // The bare cufftExec call on a plan from plan(), on the stream: no checks beyond cuFFT's status.
  void exec_raw(const std::shared_ptr<void>& plan) const;

 private:
  struct Problem;
  std::shared_ptr<const Problem> problem_;
  Stream stream_;
};

// ---- sort: the bare cub::DeviceRadixSort::SortPairs that argsort of one int32 row makes ----
// int32 keys with int64 values, n items. Two-phase as in CUB: temp == nullptr sets temp_bytes.
void cub_sort_pairs_int32(void* temp, std::size_t& temp_bytes, const std::int32_t* keys_in, std::int32_t* keys_out,
                          const std::int64_t* values_in, std::int64_t* values_out, std::int64_t n,
                          const Stream& stream);

// ---- indexing: take without the bounds check ----
// take(x, indices, axis) with no bounds check and no read-back (an out-of-range index is
// undefined behaviour), for the benchmark that measures what the check costs, and for callers
// whose indices are in range by construction (sim::DistributedParticles' argsort rows).
Array take_unchecked(const Array& x, const Array& indices, std::optional<std::int64_t> axis,
                     const OptionalStream& stream = std::nullopt);
// x[items] = value with integer index arrays, without the check that runs before the scatter
// (and its read-back): the benchmark's other side of that check's cost.
void setitem_unchecked(const Array& x, const std::vector<IndexItem>& items, Scalar value,
                       const OptionalStream& stream = std::nullopt);

}  // namespace tessel::internal
