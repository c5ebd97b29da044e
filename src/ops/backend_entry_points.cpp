// The internal backend calls of tessel/ops/backend_entry_points.hpp, forwarded to the CUDA backend
// (whose entries throw the one "built without CUDA" error of backend/dispatch.hpp in a build without it).
#include "tessel/ops/backend_entry_points.hpp"

#include <string>

#include <fmt/format.h>

#include "backend/elementwise.hpp"
#include "backend/fft.hpp"
#include "backend/sort.hpp"
#include "tessel/core/error.hpp"

namespace tessel::internal {

void cuda_elementwise(ElementwiseOp op, int count, const Array* const* inputs, const Scalar* const* scalars,
                      const DType* in_dtypes, const Array& out, const Stream& stream) {
  backend::cuda::elementwise(op, count, inputs, scalars, in_dtypes, out, stream);
}

struct CufftC2C::Problem : backend::FFTProblem {};

CufftC2C::CufftC2C(const Array& in, const Array& out, const Stream& stream) : stream_(stream) {
  const bool complex = in.dtype() == DType::complex64 || in.dtype() == DType::complex128;
  if (!complex || in.dtype() != out.dtype() || in.shape() != out.shape() || in.ndim() < 1 || in.ndim() > 2 ||
      !in.is_contiguous() || !out.is_contiguous()) {
    throw ValueError(fmt::format("CufftC2C: in and out must be contiguous complex64 or complex128 arrays of one shape "
                                 "(n) or (batch, n), got {} {} and {} {}",
                                 dtype_name(in.dtype()), shape_str(in.shape()), dtype_name(out.dtype()),
                                 shape_str(out.shape())));
  }
  if (in.device() != stream.device() || out.device() != stream.device()) {
    throw DeviceError(fmt::format("CufftC2C: in is on {}, out on {} and the stream on {}", in.device().str(),
                                  out.device().str(), stream.device().str()));
  }
  auto p = std::make_shared<Problem>();
  p->kind = backend::FFTKind::c2c;
  p->dtype = in.dtype();
  p->n = in.dim(-1);
  p->batch = in.ndim() == 2 ? in.dim(0) : 1;
  p->in = in.data();
  p->in_stride = 1;
  p->in_dist = p->n;
  p->out = out.data();
  p->out_stride = 1;
  p->out_dist = p->n;
  problem_ = std::move(p);
}

std::shared_ptr<void> CufftC2C::plan() const {
  return backend::cuda::fft_plan(*problem_, stream_);
}

void CufftC2C::exec_raw(const std::shared_ptr<void>& plan) const {
  backend::cuda::fft_exec_raw(plan, *problem_, stream_);
}

void cub_sort_pairs_int32(void* temp, std::size_t& temp_bytes, const std::int32_t* keys_in, std::int32_t* keys_out,
                          const std::int64_t* values_in, std::int64_t* values_out, std::int64_t n,
                          const Stream& stream) {
  backend::cuda::cub_sort_pairs_int32(temp, temp_bytes, keys_in, keys_out, values_in, values_out, n, stream);
}

}  // namespace tessel::internal
