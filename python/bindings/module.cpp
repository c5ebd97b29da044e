// The extension module tessel._tessel. The Python package (python/tessel) re-exports it.
#include "common.hpp"

namespace tessel::python {
void register_dist(nb::module_& m);  // ts.distributed (dist.cpp; submodule _dist)
}

NB_MODULE(_tessel, m) {
  m.doc() = "tessel: GPU arrays, fused kernels and zero-copy interop (native extension)";
  using namespace tessel::python;
  // dtype singletons and the Array class object live until exit on purpose.
  nb::set_leak_warnings(false);
  register_core(m);
  register_memory(m);
  register_array(m);
  register_ops(m);
  register_interop(m);
  register_jit(m);
  register_python_kernels(m);
  register_matmul(m);
  register_fft(m);
  register_linalg(m);
  register_pipeline(m);
  register_sim(m);
  register_set_ops(m);
  register_profile(m);
  register_indexing(m);
  register_dist(m);
}
