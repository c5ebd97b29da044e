// Ahead-of-time instantiations (linalg_small_aot.hpp): cholesky (both triangles) and lu_solve_batch
// (row-major input, as ops/linalg.cpp passes it), orders 1-16, float and double.
#include <utility>

#include "backend/cuda/device/linalg_small.cuh"
#include "backend/cuda/linalg_small_aot.hpp"

namespace tessel::backend::cuda {
namespace {
template <class T, int... I>
void add(std::vector<AotSmallKernel>& out, std::integer_sequence<int, I...>) {
  (out.push_back({SmallKernel::cholesky, aot_dtype<T>(), I + 1, I + 1, false,
                  reinterpret_cast<const void*>(&tessel_linalg_small::cholesky<T, I + 1, false>)}),
   ...);
  (out.push_back({SmallKernel::cholesky, aot_dtype<T>(), I + 1, I + 1, true,
                  reinterpret_cast<const void*>(&tessel_linalg_small::cholesky<T, I + 1, true>)}),
   ...);
  (out.push_back({SmallKernel::lu_solve, aot_dtype<T>(), I + 1, I + 1, true,
                  reinterpret_cast<const void*>(&tessel_linalg_small::lu_solve_batch<T, I + 1, true>)}),
   ...);
}
}  // namespace

void add_aot_cholesky_lu(std::vector<AotSmallKernel>& out) {
  add<float>(out, std::make_integer_sequence<int, 16>{});
  add<double>(out, std::make_integer_sequence<int, 16>{});
}

}  // namespace tessel::backend::cuda
