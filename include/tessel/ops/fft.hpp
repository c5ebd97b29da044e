#pragma once
// Discrete Fourier transforms with NumPy / Array API semantics (numpy.fft, the Array API fft
// extension): `n` / `s` pad with zeros or crop along the transformed axes, `axis` / `axes`
// count from the end when negative, `norm` is "backward" (default: 1/n on the inverse),
// "ortho" (1/sqrt(n) both ways) or "forward" (1/n on the forward transform).
//
// Dtypes: complex transforms run in complex64 or complex128; real transforms read or write
// float32 or float64. Other inputs are cast as NumPy does (integers and bool to float64 /
// complex128; float16 and bfloat16 to float32 / complex64). rfft/ihfft/rfftn of a complex input
// is a DTypeError. On CUDA devices transforms go through cuFFT with a per-device plan cache
// (bounded LRU by plan count and workspace bytes); on the CPU through a mixed-radix
// implementation in double precision (Bluestein for large prime factors).
//
// Every function takes the stream last (default: the current stream of the array's device).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "tessel/array/array.hpp"

namespace tessel::fft {

using OptionalLength = std::optional<std::int64_t>;
using OptionalAxes = std::optional<std::vector<std::int64_t>>;

enum class Norm : std::uint8_t { backward, ortho, forward };
// "backward", "ortho" or "forward"; ValueError naming `op` otherwise.
Norm parse_norm(std::string_view norm, const char* op = "fft");

// ---- one axis ----
Array fft(const Array& x, OptionalLength n = std::nullopt, std::int64_t axis = -1, std::string_view norm = "backward",
          const OptionalStream& stream = std::nullopt);
Array ifft(const Array& x, OptionalLength n = std::nullopt, std::int64_t axis = -1, std::string_view norm = "backward",
           const OptionalStream& stream = std::nullopt);
// Real input; n / 2 + 1 complex outputs along axis.
Array rfft(const Array& x, OptionalLength n = std::nullopt, std::int64_t axis = -1, std::string_view norm = "backward",
           const OptionalStream& stream = std::nullopt);
// Hermitian input of n / 2 + 1 values; n real outputs (default n = 2 * (m - 1)).
Array irfft(const Array& x, OptionalLength n = std::nullopt, std::int64_t axis = -1, std::string_view norm = "backward",
            const OptionalStream& stream = std::nullopt);
// The FFT of a signal with Hermitian symmetry (real spectrum): irfft(conj(x)) with the norm swapped.
Array hfft(const Array& x, OptionalLength n = std::nullopt, std::int64_t axis = -1, std::string_view norm = "backward",
           const OptionalStream& stream = std::nullopt);
// The inverse of hfft: conj(rfft(x)) with the norm swapped.
Array ihfft(const Array& x, OptionalLength n = std::nullopt, std::int64_t axis = -1, std::string_view norm = "backward",
            const OptionalStream& stream = std::nullopt);

// ---- several axes (default: all axes, or the last len(s) axes when only s is given) ----
// ValueError when s and axes differ in length.
Array fftn(const Array& x, const OptionalAxes& s = std::nullopt, const OptionalAxes& axes = std::nullopt,
           std::string_view norm = "backward", const OptionalStream& stream = std::nullopt);
Array ifftn(const Array& x, const OptionalAxes& s = std::nullopt, const OptionalAxes& axes = std::nullopt,
            std::string_view norm = "backward", const OptionalStream& stream = std::nullopt);
Array rfftn(const Array& x, const OptionalAxes& s = std::nullopt, const OptionalAxes& axes = std::nullopt,
            std::string_view norm = "backward", const OptionalStream& stream = std::nullopt);
Array irfftn(const Array& x, const OptionalAxes& s = std::nullopt, const OptionalAxes& axes = std::nullopt,
             std::string_view norm = "backward", const OptionalStream& stream = std::nullopt);
// The 2-D forms default to axes (-2, -1).
Array fft2(const Array& x, const OptionalAxes& s = std::nullopt, const OptionalAxes& axes = std::vector<std::int64_t>{-2, -1},
           std::string_view norm = "backward", const OptionalStream& stream = std::nullopt);
Array ifft2(const Array& x, const OptionalAxes& s = std::nullopt, const OptionalAxes& axes = std::vector<std::int64_t>{-2, -1},
            std::string_view norm = "backward", const OptionalStream& stream = std::nullopt);
Array rfft2(const Array& x, const OptionalAxes& s = std::nullopt, const OptionalAxes& axes = std::vector<std::int64_t>{-2, -1},
            std::string_view norm = "backward", const OptionalStream& stream = std::nullopt);
Array irfft2(const Array& x, const OptionalAxes& s = std::nullopt, const OptionalAxes& axes = std::vector<std::int64_t>{-2, -1},
             std::string_view norm = "backward", const OptionalStream& stream = std::nullopt);

// ---- helpers ----
// Sample frequencies [0, 1, ..., ceil(n/2)-1, -floor(n/2), ..., -1] / (d * n). dtype must be
// floating (float32 or float64).
Array fftfreq(std::int64_t n, double d = 1.0, DType dtype = DType::float64, Device device = default_device(),
              const OptionalStream& stream = std::nullopt);
// [0, 1, ..., n/2] / (d * n).
Array rfftfreq(std::int64_t n, double d = 1.0, DType dtype = DType::float64, Device device = default_device(),
               const OptionalStream& stream = std::nullopt);
// Rolls each of `axes` (default: all) by size / 2 so the zero frequency is in the middle
// (fftshift) and back (ifftshift, which rolls by -(size / 2)). Returns a new array.
Array fftshift(const Array& x, const OptionalAxes& axes = std::nullopt, const OptionalStream& stream = std::nullopt);
Array ifftshift(const Array& x, const OptionalAxes& axes = std::nullopt, const OptionalStream& stream = std::nullopt);

// ---- a stateful plan (as nvmath-python's): plan once, execute on new data many times ----
enum class Transform : std::uint8_t { fft, ifft, rfft, irfft };
// "fft", "ifft", "rfft" or "irfft"; ValueError otherwise.
Transform parse_transform(std::string_view name);

class Plan {
 public:
  // Plans `transform` over `axes` (default: all axes; the real axis of rfft/irfft is the last
  // one) with lengths `s` (default: the input's; for irfft the last defaults to 2 * (m - 1))
  // for arrays with exactly the layout of `like`: shape, strides, dtype and device. Validates
  // everything once; on CUDA the cuFFT plans are created now and held by this object.
  Plan(const Array& like, Transform transform, const OptionalAxes& s = std::nullopt,
       const OptionalAxes& axes = std::nullopt, std::string_view norm = "backward");
  ~Plan();
  Plan(Plan&&) noexcept;
  Plan& operator=(Plan&&) noexcept;

  // Transforms `x`, which must have the planned layout: ValueError naming both layouts otherwise.
  Array execute(const Array& x, const OptionalStream& stream = std::nullopt) const;
  // "shape (8, 16) strides (16, 1) complex64 on cuda:0"
  std::string layout() const;
  Transform transform() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// ---- the cuFFT plan cache of a CUDA device (all zero without CUDA) ----
struct PlanCacheInfo {
  std::size_t plans = 0, max_plans = 0;
  std::size_t workspace_bytes = 0, max_workspace_bytes = 0;
  std::uint64_t hits = 0, misses = 0, evictions = 0;
};
PlanCacheInfo plan_cache_info(Device device);
// Defaults: 64 plans, 1 GiB of workspaces. Shrinking evicts least recently used plans.
void set_plan_cache_limits(Device device, std::size_t max_plans, std::size_t max_workspace_bytes);
void clear_plan_cache(Device device);

}  // namespace tessel::fft

namespace tessel {
using FFTPlan = fft::Plan;
}
