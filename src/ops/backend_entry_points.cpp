// The internal backend calls of tessel/ops/backend_entry_points.hpp, forwarded to the CUDA backend.
#include "tessel/ops/backend_entry_points.hpp"

#include <string>

#include <fmt/format.h>

#include "backend/elementwise.hpp"
#include "backend/fft.hpp"
#include "backend/sort.hpp"
#include "tessel/core/error.hpp"

namespace tessel::internal {
namespace {

[[noreturn, maybe_unused]] void throw_no_cuda(const char* op) {
  throw DeviceError(std::string(op) + ": tessel was built without CUDA");
}

}  // namespace

void cuda_elementwise(ElementwiseOp op, int count, const Array* const* inputs, const Scalar* const* scalars,
                      const DType* in_dtypes, const Array& out, const Stream& stream) {
#if defined(TESSEL_HAVE_CUDA)
  backend::cuda::elementwise(op, count, inputs, scalars, in_dtypes, out, stream);
#else
  (void)op, (void)count, (void)inputs, (void)scalars, (void)in_dtypes, (void)out, (void)stream;
  throw_no_cuda("cuda_elementwise");
#endif
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
#if defined(TESSEL_HAVE_CUDA)
  return backend::cuda::fft_plan(*problem_, stream_);
#else
  throw_no_cuda("CufftC2C");
#endif
}

void CufftC2C::exec_raw(const std::shared_ptr<void>& plan) const {
#if defined(TESSEL_HAVE_CUDA)
  backend::cuda::fft_exec_raw(plan, *problem_, stream_);
#else
  (void)plan;
  throw_no_cuda("CufftC2C");
#endif
}

void cub_sort_pairs_int32(void* temp, std::size_t& temp_bytes, const std::int32_t* keys_in, std::int32_t* keys_out,
                          const std::int64_t* values_in, std::int64_t* values_out, std::int64_t n,
                          const Stream& stream) {
#if defined(TESSEL_HAVE_CUDA)
  backend::cuda::cub_sort_pairs_int32(temp, temp_bytes, keys_in, keys_out, values_in, values_out, n, stream);
#else
  (void)temp, (void)temp_bytes, (void)keys_in, (void)keys_out, (void)values_in, (void)values_out, (void)n, (void)stream;
  throw_no_cuda("cub_sort_pairs_int32");
#endif
}

}  // namespace tessel::internal
