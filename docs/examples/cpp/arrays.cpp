// Arrays from C++: creation, views, copies, transfers, random numbers, reductions and sorting
// (docs/cpp/index.rst). Runs on the default device: the GPU when there is one, else the CPU.
#include <tessel/tessel.hpp>

#include <cstdio>
#include <stdexcept>
#include <vector>

using namespace tessel;

static void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("arrays example: ") + what);
}

int main() {
  // doc:begin views
  Array a = arange(0, 12, 1, DType::float32).reshape({3, 4});     // a view of the same storage
  Array every_other_row = a.index({Slice(0, 3, 2)});                // shape (2, 4), a view
  Array reversed_cols = a.index({ellipsis, Slice(none, none, -1)}); // negative stride, a view
  Array t = a.T();                                                  // (4, 3), a view
  Array c = t.contiguous();                                         // a copy in C order
  Array h = astype(a, DType::float16);                              // always a copy
  std::vector<float> host = a.to(Device::cpu()).to_vector<float>(); // waits for the device
  // doc:end views
  check(every_other_row.shape() == Shape{2, 4}, "every other row");
  check(reversed_cols.index({0, 0}).item<float>() == 3.0f, "reversed columns");
  check(t.shape() == Shape{4, 3} && c.is_contiguous() && h.dtype() == DType::float16, "views and copies");
  check(host.size() == 12 && host[11] == 11.0f, "host copy");

  // doc:begin math
  random::Generator gen(42);                                        // Philox: same numbers on CPU and GPU
  Array x = gen.uniform({1000, 64}, -1.0, 1.0, DType::float32);
  Array norms = sqrt(sum(x * x, std::vector<std::int64_t>{1}));     // (1000,)
  Array order = argsort(norms);                                     // int64 indices, stable
  Array shortest = x.index({order.index({0}).item<std::int64_t>()});
  double mean_norm = mean(norms).item<float>();
  // doc:end math
  check(norms.shape() == Shape{1000} && order.dtype() == DType::int64, "reductions");
  check(shortest.shape() == Shape{64} && mean_norm > 0.0, "argsort");

  // doc:begin errors
  try {
    Array bad = add(ones({3, 4}), ones({5}));                       // shapes do not broadcast
  } catch (const ShapeError& e) {
    std::printf("%s\n", e.what());                                  // names the op and both shapes
  }
  // doc:end errors
  std::printf("arrays: ok (%s)\n", a.device().str().c_str());
  return 0;
}
