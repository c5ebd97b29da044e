#pragma once
// The pipeline's engine, shared by its runs on the CPU (run_cpu.cpp) and on a GPU (run_cuda.cpp):
// a Job is one run() call: a source of host chunks, the compute function and a sink.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "tessel/core/config.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/progress.hpp"
#include "tessel/pipeline/pipeline.hpp"

namespace tessel::detail {

// What a Pipeline keeps between runs (shared by its copies; the lock covers both).
struct PipelineState {
  std::mutex mutex;
  std::vector<Stream> streams;  // on `streams_device`, created on first use
  Device streams_device;
  // The automatic sizes of the last input layout: choosing them queries free device memory,
  // which need not be repeated for every run over same-shaped inputs.
  struct Sizes {
    Device device;
    std::int64_t rows = -1, row_bytes = -1;
    int requested_streams = 0;  // options.num_streams, 0 when unset
    std::int64_t chunk_rows = 0;
    int streams = 0;
  };
  std::optional<Sizes> sizes;
};

namespace pipeline {

using Clock = std::chrono::steady_clock;
constexpr std::int64_t MiB = 1 << 20;

inline double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

inline Shape tail_of(const Shape& shape) { return Shape(shape.begin() + 1, shape.end()); }

inline Shape with_rows(std::int64_t rows, const Shape& tail) {
  Shape s{rows};
  s.insert(s.end(), tail.begin(), tail.end());
  return s;
}

// Rethrows the current exception with "Pipeline.run: chunk k ...: " in front, keeping its type.
[[noreturn]] inline void rethrow_with_context(const std::string& context) {
  try {
    throw;
  } catch (const OutOfMemory& e) {
    throw OutOfMemory(context + e.what());
  } catch (const CudaError& e) {
    throw CudaError(context + e.what(), e.code(), e.fatal());
  } catch (const ShapeError& e) {
    throw ShapeError(context + e.what());
  } catch (const DTypeError& e) {
    throw DTypeError(context + e.what());
  } catch (const DeviceError& e) {
    throw DeviceError(context + e.what());
  } catch (const IndexError& e) {
    throw IndexError(context + e.what());
  } catch (const ValueError& e) {
    throw ValueError(context + e.what());
  } catch (const CompileError& e) {
    throw CompileError(context + e.what(), e.log());
  } catch (const Error& e) {
    throw Error(context + e.what());
  }
  // Other exceptions (the user's own types) propagate unchanged from the outer catch.
}

// The pipeline's progress bar: automatic shows it only for jobs of 256 MiB or more.
class PipelineProgress {
 public:
  PipelineProgress(ProgressMode mode, std::int64_t total_bytes)
      : bar_("[pipeline]", total_bytes,
             mode == ProgressMode::automatic && total_bytes < 256 * MiB ? ProgressMode::off : mode),
        start_(Clock::now()) {}
  void update(std::int64_t done_bytes, std::int64_t chunks_done, std::int64_t chunks_total) {
    if (!bar_.enabled()) return;
    const double elapsed = ms_since(start_);
    bar_.update(chunks_done == chunks_total ? std::max<std::int64_t>(done_bytes, 1) : done_bytes,
                fmt::format("{}/{} chunks {:.1f} GB/s", chunks_done, chunks_total,
                            elapsed > 0 ? double(done_bytes) / elapsed / 1e6 : 0.0));
  }

 private:
  ProgressBar bar_;
  Clock::time_point start_;
};

// ---- the engine ----

struct ChunkIn {
  Array host;  // rows x tail, contiguous, on the CPU
  std::int64_t row_offset = 0;
};

struct Sink {
  Array output;                      // rows of the whole result (may be undefined until known)
  Pipeline::ChunkCallback callback;  // or a callback per chunk
  std::function<Array(const Shape& tail, DType dtype)> make_output;  // allocates output lazily
};

struct Job {
  Pipeline::Compute compute;
  PipelineOptions options;
  Device device;
  std::function<std::optional<ChunkIn>()> next;  // source of chunks, in order
  std::int64_t total_rows = -1;                  // -1: unknown (generator)
  std::int64_t total_bytes = 0;                  // of the input, 0 when unknown
  std::int64_t total_chunks = -1;
  std::int64_t chunk_rows = 0;
  Sink sink;
  PipelineReport* report = nullptr;
  detail::PipelineState* state = nullptr;  // streams kept between runs
  Clock::time_point start = Clock::now();  // when run() was called: the report's wall time
  // Learned from the first chunk's result.
  bool have_result_layout = false;
  Shape out_tail;
  DType out_dtype = DType::float32;
  Shape in_tail;
  DType in_dtype = DType::float32;

  void check_input_chunk(const ChunkIn& c, std::int64_t index) {
    if (!c.host.defined()) throw ValueError(fmt::format("Pipeline.run: chunk {} is an undefined array", index));
    if (!c.host.device().is_cpu()) {
      throw DeviceError(fmt::format("Pipeline.run: chunk {} is on {}; the pipeline takes host (cpu) arrays", index,
                                    c.host.device().str()));
    }
    if (c.host.ndim() == 0) throw ShapeError(fmt::format("Pipeline.run: chunk {} is 0-d; chunks need rows", index));
    if (index == 0) {
      in_tail = tail_of(c.host.shape());
      in_dtype = c.host.dtype();
    } else if (tail_of(c.host.shape()) != in_tail || c.host.dtype() != in_dtype) {
      throw ShapeError(fmt::format("Pipeline.run: chunk {} has shape {} and dtype {}, but the first chunk had rows "
                                   "of shape {} and dtype {}",
                                   index, shape_str(c.host.shape()), dtype_name(c.host.dtype()), shape_str(in_tail),
                                   dtype_name(in_dtype)));
    }
  }

  // Checks a chunk's result against the first one's layout and the rows it was given.
  void check_result(const Array& out, std::int64_t rows, std::int64_t index) {
    if (!out.defined()) throw ValueError(fmt::format("Pipeline.run: compute returned an undefined array for chunk {}", index));
    if (out.device() != device) {
      throw DeviceError(fmt::format("Pipeline.run: compute returned an array on {} for chunk {}, expected {}",
                                    out.device().str(), index, device.str()));
    }
    if (out.ndim() == 0 || out.dim(0) != rows) {
      throw ShapeError(fmt::format("Pipeline.run: compute changed the number of rows: chunk {} has {} rows, its result "
                                   "has shape {} (a result needs one row per input row)",
                                   index, rows, shape_str(out.shape())));
    }
    if (!have_result_layout) {
      have_result_layout = true;
      out_tail = tail_of(out.shape());
      out_dtype = out.dtype();
      if (!sink.output.defined() && sink.make_output) sink.output = sink.make_output(out_tail, out_dtype);
      if (sink.output.defined()) check_output();
      return;
    }
    if (tail_of(out.shape()) != out_tail) {
      throw ShapeError(fmt::format("Pipeline.run: compute changed the shape inconsistently: chunk {} gave {}, earlier "
                                   "chunks gave rows of shape {}",
                                   index, shape_str(out.shape()), shape_str(out_tail)));
    }
    if (out.dtype() != out_dtype) {
      throw DTypeError(fmt::format("Pipeline.run: compute changed the dtype: chunk {} gave {}, earlier chunks gave {}",
                                   index, dtype_name(out.dtype()), dtype_name(out_dtype)));
    }
  }

  void check_output() const {
    const Array& o = sink.output;
    const Shape want = with_rows(total_rows, out_tail);
    if (o.shape() != want) {
      throw ShapeError(fmt::format("Pipeline.run: the output has shape {}, but the result has shape {}{}",
                                   shape_str(o.shape()), shape_str(want),
                                   numel(o.shape()) < numel(want) ? " (the output is too small)" : ""));
    }
    if (o.dtype() != out_dtype) {
      throw DTypeError(fmt::format("Pipeline.run: the output has dtype {}, but compute returns {}", dtype_name(o.dtype()),
                                   dtype_name(out_dtype)));
    }
  }

  void run();
  void run_cpu();   // run_cpu.cpp
  void run_cuda();  // run_cuda.cpp (a build without CUDA: the not-built error)
};

inline std::int64_t row_bytes(const Shape& tail, DType dtype) { return numel(tail) * itemsize(dtype); }

// The most bytes a chunk may take on `device` for `streams` streams (each holds an input, an
// output and temporaries of a chunk), from its free memory and the pool's cached blocks; 0 when
// unknown (run_cuda.cpp).
std::int64_t device_chunk_cap(Device device, int streams);

}  // namespace pipeline
}  // namespace tessel::detail
