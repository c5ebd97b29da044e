#pragma once
// The status words of an indexing op (ops/indexing.cpp): where the backends write the sizes they
// count and the first out-of-range index, and how the host reads them. Host memory on the CPU;
// on CUDA the stream's leased block of page-locked words (backend/indexing.hpp's lease_status),
// read after one stream synchronize.
#include <cstdint>

#include "backend/indexing.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/stream.hpp"
#include "tessel/memory/capture.hpp"

namespace tessel::detail {

class Status {
 public:
  Status(Device device, const Stream& stream) : stream_(stream), cuda_(device.is_cuda()) {
    if (cuda_) {
      detail::check_not_capturing("indexing (reads a size or bounds flag back)");
      lease_ = backend::cuda::lease_status(stream);
    }
  }
  Status(const Status&) = delete;
  Status& operator=(const Status&) = delete;
  // Work that was handed the words and never read (an error left the op early) could report a
  // failure into the next op's read: wait for it and clear them.
  ~Status() {
    if (cuda_ && pending_) {
      try {
        backend::cuda::read_status(lease_, stream_);
        if (lease_.host[1] != 0) backend::cuda::clear_status(lease_, stream_);
      } catch (...) {  // a failing device reports itself on the next call
      }
    }
  }
  // What the backends write (work that writes them is launched after this call).
  std::int64_t* words() {
    pending_ = true;
    return cuda_ ? lease_.words : local_;
  }
  // The host waits for the device (CUDA) and returns the words it wrote. Reads again only when
  // work was handed the words since the last read.
  const std::int64_t* read() {
    if (cuda_) {
      if (pending_) backend::cuda::read_status(lease_, stream_);
      pending_ = false;
      return lease_.host;
    }
    pending_ = false;
    return local_;
  }
  void clear_failure() {
    if (cuda_) {
      backend::cuda::clear_status(lease_, stream_);
      return;
    }
    local_[1] = local_[2] = 0;
  }

 private:
  Stream stream_;
  std::int64_t local_[backend::kStatusWords] = {0, 0, 0};
  bool cuda_ = false;
  bool pending_ = false;
  backend::StatusLease lease_;
};

}  // namespace tessel::detail
