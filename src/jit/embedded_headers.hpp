#pragma once
// Device headers embedded at build time (src/jit/embed_headers.cmake): tessel's
// src/backend/cuda/device/*.cuh and, in CUDA builds, the toolkit's cuda_fp16/cuda_bf16 headers,
// which NVRTC 13.0 does not ship built in.
#include <cstddef>

namespace tessel::jit::detail {

struct EmbeddedHeader {
  const char* name;  // as #included, e.g. "tessel_device.cuh"
  const char* source;
  std::size_t size;
};

// The table and its length (*count).
const EmbeddedHeader* embedded_headers(std::size_t* count);
// The host kernels' prelude (src/jit/host_prelude.hpp), pasted into generated host C++ sources.
const EmbeddedHeader* embedded_host_headers(std::size_t* count);

}  // namespace tessel::jit::detail
