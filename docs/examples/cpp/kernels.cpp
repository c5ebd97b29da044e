// Fusion and user kernels from C++ (docs/cpp/index.rst). fuse() and ElementwiseKernel run
// everywhere (on the CPU the graph is evaluated block by block, and the elementwise kernel is
// compiled as host C++); RawKernel needs a CUDA device.
#include <tessel/tessel.hpp>

#include <cstdio>
#include <stdexcept>

using namespace tessel;

static void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("kernels example: ") + what);
}

int main() {
  const Device device = default_device();
  Array x = random::uniform({1 << 16}, -1.0, 1.0, DType::float32, device);
  Array a = full({1 << 16}, 2.0, DType::float32, device);
  Array b = full({1}, 0.5, DType::float32, device);                 // broadcasts

  // doc:begin fuse
  // Traced once into an expression graph; on CUDA one generated kernel per call.
  FusedKernel axpb_relu = fuse([](const std::vector<Sym>& v) { return relu(v[0] * v[1] + v[2]) * 3; }, 3);
  Array y = axpb_relu({a, x, b});
  // doc:end fuse
  Array reference = relu(a * x + b) * 3;
  check(all(equal(y, reference)).item<bool>(), "fused == unfused");

  // doc:begin fuse_outputs
  // Several outputs in one kernel: sigmoid(x) is computed once per element for both.
  FusedKernel swish_and_slope = fuse([](const std::vector<Sym>& v) {
    const Sym s = sigmoid(v[0]);
    return std::vector<Sym>{v[0] * s, s * (1.0 + v[0] * (1.0 - s))};
  }, 1);
  std::vector<Array> outs = swish_and_slope.call_outputs({x});  // outs[0]: swish, outs[1]: its derivative
  // doc:end fuse_outputs
  const Array sx = sigmoid(x);
  check(max(abs(outs[0] - x * sx)).item<float>() < 1e-6f, "fused swish");
  check(max(abs(outs[1] - sx * (1.0 + x * (1.0 - sx)))).item<float>() < 1e-6f, "fused swish derivative");

  // doc:begin elementwise_kernel
  jit::ElementwiseKernel axpy("float32 a, float32 x, float32 y", "float32 z", "z = a * x + y", "axpy");
  Array z = empty({1 << 16}, DType::float32, device);
  const Stream stream = current_stream(device);
  const std::vector<std::int64_t> shape{1 << 16};
  const float alpha = 2.0f;
  // Operands: the inputs, then the outputs; arrays by data pointer and strides over `shape`.
  axpy.launch(shape,
              {jit::ElementwiseArg::value(alpha), jit::ElementwiseArg::array(x.data(), {1}),
               jit::ElementwiseArg::array(a.data(), {1}), jit::ElementwiseArg::array(z.data(), {1})},
              device, stream);
  // doc:end elementwise_kernel
  check(max(abs(z - (x * 2.0f + a))).item<float>() < 1e-5f, "ElementwiseKernel");

  if (device.is_cuda()) {
    // doc:begin raw_kernel
    jit::RawKernel scale(R"(
      extern "C" __global__ void scale(float* p, float s, long long n) {
        long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
        if (i < n) p[i] *= s;
      })", "scale");
    const long long n = x.size();
    scale(jit::Dim3(static_cast<unsigned>((n + 255) / 256)), jit::Dim3(256), {x.data(), 0.5f, n});
    // doc:end raw_kernel
  }
  std::printf("kernels: ok (%s)\n", device.str().c_str());
  return 0;
}
