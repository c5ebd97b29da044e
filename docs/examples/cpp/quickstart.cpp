// The C++ quick start of the README and the getting-started page.
// doc:begin quickstart
#include <tessel/tessel.hpp>

#include <iostream>

int main() {
  using namespace tessel;
  // On the GPU when there is one (default_device()), else on the CPU backend.
  Array x = arange(0, 10, 1, DType::float32);
  Array y = exp(x / 10.0) * 2.0 + 1.0;  // elementwise ops, NumPy promotion and broadcasting
  std::cout << y.str() << "\n";
  std::cout << "sum: " << sum(y).item<float>() << " on " << y.device().str() << "\n";
}
// doc:end quickstart
