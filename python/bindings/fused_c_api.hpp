#pragma once
// A C function table through which compiled code outside this module runs tessel's fused kernels
// without Python: tessel.torch's C++ autograd ops (python/torch_ops) call it from PyTorch's
// dispatcher and from its autograd engine's threads, where no GIL is held. The table lives as
// long as the process; tessel._tessel._fused_c_api() returns its address, and a FusedKernel's
// `_address` is the kernel argument (valid while that Python object lives).
//
// Tensors cross as DLPack structs (dlpack_exchange.hpp): the inputs are borrowed DLTensors, valid
// for the call; each result is a new DLManagedTensorVersioned of tessel memory that the caller
// owns (its deleter releases the memory to tessel's caching allocator, from any thread).
// Functions return 0, or -1 after reporting the error through set_error(error_ctx, kind,
// message), kind the name of the Python exception the message belongs to ("TypeError",
// "ValueError", "MemoryError", "RuntimeError"), as the DLPack exchange allocator does.
#include <cstdint>

#include "dlpack_exchange.hpp"

namespace tessel::python {

using FusedCErrorSink = void (*)(void* error_ctx, const char* kind, const char* message);

struct FusedCApi {
  std::uint32_t version;  // kFusedCApiVersion
  // Runs `kernel` (a tessel::FusedKernel) on `count` inputs, all on one device: the CPU
  // (stream null) or CUDA device `device_id` of the inputs, on `stream` (a cudaStream_t of that
  // device; null is the legacy default stream). Writes the kernel's outputs to outputs[0 ..
  // output_count), output_count being the kernel's number of outputs. With `sum_dtype` not null
  // (a kernel of one output), outputs[0] is instead the sum of all that output's elements, a 0-d
  // tensor of sum_dtype, computed on the same stream.
  int (*run)(const void* kernel, const dlpack::DLTensor* inputs, std::int32_t count, void* stream,
             const dlpack::DLDataType* sum_dtype, dlpack::DLManagedTensorVersioned** outputs,
             std::int32_t output_count, void* error_ctx, FusedCErrorSink set_error);
};

constexpr std::uint32_t kFusedCApiVersion = 1;

}  // namespace tessel::python
