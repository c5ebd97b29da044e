#pragma once
// The elementwise ops' shared front half (internal to the ops layer): dtype tables and the
// common path of every op, which fusion's eager fallback uses too.
#include <optional>
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

// One input of an op: an array, or a weak Python scalar (array undefined).
struct ElementwiseOperand {
  Array array;
  std::optional<Scalar> scalar;
};
// The ops' common path, with scalar operands allowed anywhere (fusion's eager fallback uses it).
Array elementwise_operands(ElementwiseOp op, std::vector<ElementwiseOperand> operands, const OptionalArray& out,
                           const OptionalStream& stream);

}  // namespace tessel::detail
