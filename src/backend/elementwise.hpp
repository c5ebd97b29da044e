#pragma once
// Backend entry point of the elementwise ops (src/backend/{cpu,cuda}/elementwise.cpp).
// The ops layer has already validated and promoted everything: every input has the compute
// dtype of the op (where: input 0 is bool) and the output's shape, as a (possibly broadcast,
// strided, negative-stride) view; `out` has the result dtype, and does not overlap any input
// unless it is the identical view. The backend only loops.
#include <vector>

#include "tessel/array/array.hpp"
#include "tessel/ops/elementwise.hpp"

namespace tessel::detail {
// The dtypes an op computes in and returns for promoted input dtype `promoted` (where: the
// promotion of its two value inputs), from the op's dtype table. DTypeError when unsupported.
struct ElementwiseTypes {
  DType compute;
  DType result;
};
ElementwiseTypes elementwise_types(ElementwiseOp op, DType promoted);

namespace cpu {
void elementwise(ElementwiseOp op, const std::vector<Array>& inputs, const Array& out);
}
namespace cuda {
void elementwise(ElementwiseOp op, const std::vector<Array>& inputs, const Array& out, const Stream& stream);
// The CUDA source of one op for a compute dtype and result dtype (for tests: NVRTC compiles it
// without a GPU). Layout contiguous.
std::string elementwise_source(ElementwiseOp op, const std::vector<DType>& input_dtypes, DType out_dtype);
}  // namespace cuda
}  // namespace tessel::detail
