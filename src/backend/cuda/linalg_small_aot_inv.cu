// Ahead-of-time instantiations (linalg_small_aot.hpp): gauss_jordan_inv, orders 1-32, float and double.
#include <utility>

#include "backend/cuda/device/linalg_small.cuh"
#include "backend/cuda/linalg_small_aot.hpp"

namespace tessel::backend::cuda {
namespace {
template <class T, int... I>
void add(std::vector<AotSmallKernel>& out, std::integer_sequence<int, I...>) {
  (out.push_back({SmallKernel::inv, aot_dtype<T>(), I + 1, I + 1, false,
                  reinterpret_cast<const void*>(&tessel_linalg_small::gauss_jordan_inv<T, I + 1>)}),
   ...);
}
}  // namespace

void add_aot_inv(std::vector<AotSmallKernel>& out) {
  add<float>(out, std::make_integer_sequence<int, 32>{});
  add<double>(out, std::make_integer_sequence<int, 32>{});
}

}  // namespace tessel::backend::cuda
