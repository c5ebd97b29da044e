// Launching generated elementwise kernels over memory: layout choice, dimension collapsing, index
// width, launch shape. Backend-neutral; get_kernel raises DeviceError without CUDA.
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "tessel/core/error.hpp"
#include "tessel/jit/elementwise.hpp"
#include "tessel/jit/kernel.hpp"

namespace tessel::jit {
namespace {

// 32-bit index math is used only below this bound, which leaves room for the grid-stride
// increment (at most 2^26 threads in flight here) without overflowing int.
constexpr std::int64_t kIndex32Limit = (std::int64_t{1} << 31) - (std::int64_t{1} << 26);

bool c_contiguous(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides) {
  std::int64_t expected = 1;
  for (std::size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

struct Collapsed {
  std::vector<std::int64_t> shape;
  std::vector<std::vector<std::int64_t>> strides;  // per array operand
};

// Drops size-one axes and merges axis d into d+1 when every operand steps through them as one.
Collapsed collapse(const std::vector<std::int64_t>& shape, const std::vector<const std::vector<std::int64_t>*>& strides) {
  Collapsed c;
  c.strides.resize(strides.size());
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !c.shape.empty();
    for (std::size_t k = 0; merge && k < strides.size(); ++k) {
      merge = c.strides[k].back() == (*strides[k])[d] * shape[d];
    }
    if (merge) {
      c.shape.back() *= shape[d];
      for (std::size_t k = 0; k < strides.size(); ++k) c.strides[k].back() = (*strides[k])[d];
    } else {
      c.shape.push_back(shape[d]);
      for (std::size_t k = 0; k < strides.size(); ++k) c.strides[k].push_back((*strides[k])[d]);
    }
  }
  if (c.shape.empty()) {  // a single element
    c.shape.push_back(1);
    for (auto& s : c.strides) s.push_back(0);
  }
  return c;
}

}  // namespace

void launch_elementwise(ElementwiseSpec spec, const std::vector<std::int64_t>& shape,
                        const std::vector<ElementwiseArg>& args, Device device, const Stream& stream) {
  const std::string where = "elementwise kernel '" + spec.name + "'";
  if (args.size() != spec.operands.size()) {
    throw ValueError(where + ": " + std::to_string(spec.operands.size()) + " operands but " +
                     std::to_string(args.size()) + " arguments");
  }
  std::int64_t n = 1;
  for (std::int64_t s : shape) {
    if (s < 0) throw ShapeError(where + ": negative dimension in the launch shape");
    n *= s;
  }
  std::vector<const std::vector<std::int64_t>*> array_strides;
  bool contiguous = true;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (spec.operands[i].is_scalar != args[i].is_scalar) {
      throw ValueError(where + ": operand '" + spec.operands[i].name + "' is declared " +
                       (spec.operands[i].is_scalar ? "a scalar" : "an array") + " but given " +
                       (args[i].is_scalar ? "a scalar" : "an array"));
    }
    if (spec.operands[i].is_scalar) continue;
    if (args[i].strides.size() != shape.size()) {
      throw ShapeError(where + ": operand '" + spec.operands[i].name + "' has " + std::to_string(args[i].strides.size()) +
                       " strides for a rank-" + std::to_string(shape.size()) + " launch");
    }
    if (args[i].data == nullptr && n > 0) throw ValueError(where + ": operand '" + spec.operands[i].name + "' has no data");
    array_strides.push_back(&args[i].strides);
    contiguous = contiguous && c_contiguous(shape, args[i].strides);
  }
  if (!device.is_cuda()) {
    throw DeviceError(where + ": needs a CUDA device; got arrays on " + device.str());
  }
  if (n == 0) return;

  // Parameter storage: every pointer in `params` points into these, which do not reallocate.
  std::vector<void*> params;
  std::vector<std::int64_t> words;  // n, dims and strides
  std::vector<void*> pointers;
  words.reserve(2 + (kMaxElementwiseRank + 1) * (args.size() + 1));
  pointers.reserve(args.size());
  int aligned = 1;
  std::int64_t work = n;

  words.push_back(n);
  params.push_back(&words.back());
  Collapsed collapsed;
  const ElementwiseTuning tuning = elementwise_tuning();
  if (contiguous) {
    spec.layout = ElementwiseLayout::contiguous;
    spec.index32 = n <= kIndex32Limit;
    const int vec = vector_width(spec);
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (spec.operands[i].is_scalar) continue;
      const auto bytes = static_cast<std::uintptr_t>(vec * itemsize(spec.operands[i].dtype));
      if (reinterpret_cast<std::uintptr_t>(args[i].data) % bytes != 0) aligned = 0;
    }
    params.push_back(&aligned);
    spec.unroll = tuning.unroll;
    work = elementwise_threads(n, aligned != 0, vec, tuning.unroll);
  } else {
    collapsed = collapse(shape, array_strides);
    const int rank = static_cast<int>(collapsed.shape.size());
    if (rank > kMaxElementwiseRank) {
      throw ValueError(where + ": " + std::to_string(rank) + " dimensions after collapsing; at most " +
                       std::to_string(kMaxElementwiseRank) + " are supported");
    }
    spec.layout = ElementwiseLayout::strided;
    spec.rank = rank;
    // 32-bit only when the linear index and every operand's furthest offset fit.
    bool fits = n <= kIndex32Limit;
    for (const auto& st : collapsed.strides) {
      std::int64_t reach = 0;
      for (int d = 0; d < rank; ++d) reach += std::llabs(st[static_cast<std::size_t>(d)]) * (collapsed.shape[static_cast<std::size_t>(d)] - 1);
      fits = fits && reach <= kIndex32Limit;
    }
    spec.index32 = fits;
    const std::size_t dims_at = words.size();
    words.insert(words.end(), collapsed.shape.begin(), collapsed.shape.end());
    params.push_back(&words[dims_at]);
  }
  std::size_t array_k = 0;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (spec.operands[i].is_scalar) {
      params.push_back(const_cast<unsigned char*>(args[i].scalar));
      continue;
    }
    pointers.push_back(args[i].data);
    params.push_back(&pointers.back());
    if (!contiguous) {
      const auto& st = collapsed.strides[array_k];
      const std::size_t at = words.size();
      words.insert(words.end(), st.begin(), st.end());
      params.push_back(&words[at]);
    }
    ++array_k;
  }

  CompileRequest request;
  request.source = generate_elementwise_source(spec);
  request.name = elementwise_kernel_name(spec);
  const Kernel kernel = get_kernel(request, device);
  const LaunchConfig config = kernel.launch_config_fixed(work, tuning.block, tuning.waves);
  kernel.launch(config, params, stream);
}

}  // namespace tessel::jit
