// Ahead-of-time instantiations (linalg_small_aot.hpp): jacobi_eigh_warp, orders 7-32 (the float
// rows start at 8), float and double; and the registry of every part.
#include <algorithm>
#include <utility>

#include "backend/cuda/device/linalg_small.cuh"
#include "backend/cuda/linalg_small_aot.hpp"

namespace tessel::backend::cuda {
namespace {
template <class T, int... I>
void add(std::vector<AotSmallKernel>& out, std::integer_sequence<int, I...>) {
  (out.push_back({SmallKernel::eigh_warp, aot_dtype<T>(), I + 7, I + 7, false,
                  reinterpret_cast<const void*>(&tessel_linalg_small::jacobi_eigh_warp<T, I + 7>)}),
   ...);
}
}  // namespace

void add_aot_eigh_warp(std::vector<AotSmallKernel>& out) {
  add<float>(out, std::make_integer_sequence<int, 26>{});
  add<double>(out, std::make_integer_sequence<int, 26>{});
}

const std::vector<AotSmallKernel>& aot_small_kernels() {
  static const std::vector<AotSmallKernel> all = [] {
    std::vector<AotSmallKernel> v;
    add_aot_cholesky_lu(v);
    add_aot_inv(v);
    add_aot_eigh_svd(v);
    add_aot_eigh_warp(v);
    return v;
  }();
  return all;
}

const void* aot_small_kernel(SmallKernel kind, DType dtype, std::int64_t m, std::int64_t n, bool variant) {
  for (const AotSmallKernel& k : aot_small_kernels()) {
    if (k.kind == kind && k.dtype == dtype && k.m == m && k.n == n && k.variant == variant) return k.entry;
  }
  return nullptr;
}

}  // namespace tessel::backend::cuda
