// Matrix products and FFTs from C++ (docs/cpp/index.rst). Runs on the default device.
#include <tessel/tessel.hpp>

#include <cmath>
#include <cstdio>
#include <stdexcept>

using namespace tessel;

static void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("matmul_fft example: ") + what);
}

int main() {
  const Device device = default_device();
  // doc:begin matmul
  Array a = random::uniform({256, 128}, -1, 1, DType::float32, device);
  Array b = random::uniform({128, 64}, -1, 1, DType::float32, device);
  Array bias = zeros({64}, DType::float32, device);

  MatmulOptions options;                       // relu(a @ b + bias) in one call
  options.bias = bias;
  options.epilogue = MatmulEpilogue::relu;
  Array d = matmul(a, b, options);             // (256, 64)
  Array e = matmul(b.T(), a.T());              // transposed views, no copies: (64, 256)

  MatmulPlan plan(a, b, options);              // plan once for these layouts ...
  Array d2 = plan.execute(a, b);               // ... execute many times
  std::printf("matmul ran %s\n", plan.selected().name.c_str());
  // doc:end matmul
  check(d.shape() == Shape{256, 64} && e.shape() == Shape{64, 256}, "matmul shapes");
  check(min(d).item<float>() >= 0.0f, "relu epilogue");
  check(max(abs(d2 - d)).item<float>() < 1e-4f, "plan == matmul");

  // doc:begin fft
  Array signal = random::normal({8, 1024}, 0.0, 1.0, DType::float32, device);
  Array spectrum = fft::rfft(signal);                    // (8, 513) complex64, along the last axis
  Array back = fft::irfft(spectrum, 1024);               // (8, 1024) float32
  Array freqs = fft::rfftfreq(1024, 1.0 / 48000.0);      // Hz, for a 48 kHz signal
  // doc:end fft
  check(spectrum.shape() == Shape{8, 513} && spectrum.dtype() == DType::complex64, "rfft");
  check(max(abs(back - signal)).item<float>() < 1e-4f, "irfft(rfft(x)) == x");
  check(freqs.shape() == Shape{513}, "rfftfreq");
  std::printf("matmul_fft: ok (%s)\n", device.str().c_str());
  return 0;
}
