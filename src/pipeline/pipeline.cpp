// Pipeline: chunked host -> device -> compute -> host over several streams (see
// tessel/pipeline/pipeline.hpp). One engine serves every run() overload: a source of host chunks
// (rows of an array, or a user generator) and a sink (rows of a host array, or a callback); it
// runs on the CPU (run_cpu.cpp) or a GPU (run_cuda.cpp).
#include "tessel/pipeline/pipeline.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "pipeline/job.hpp"
#include "tessel/core/config.hpp"
#include "tessel/memory/stats.hpp"
#include "tessel/ops/cast.hpp"
#include "tessel/profile/range.hpp"

namespace tessel {
namespace {

using namespace detail::pipeline;

}  // namespace

namespace detail::pipeline {

void Job::run() {
  TESSEL_RANGE("Pipeline.run", device.str().c_str());
  if (device.is_cpu()) {
    run_cpu();
    return;
  }
  run_cuda();
}

}  // namespace detail::pipeline

namespace {

// The fixed cost of one cudaMemcpyAsync of a chunk, in seconds (see choose_sizes).
constexpr double kCopyOverheadSeconds = 13e-6;

struct AutoSizes {
  std::int64_t chunk_rows;
  int streams;
};

AutoSizes choose_sizes(const PipelineOptions& o, Device device, const Shape& shape, DType dtype) {
  const std::int64_t rows = shape.empty() ? 0 : shape[0];
  const std::int64_t row_elems = numel(tail_of(shape));
  const std::int64_t rbytes = std::max<std::int64_t>(1, row_elems * itemsize(dtype));
  const std::int64_t total_bytes = rows * rbytes;
  int streams = o.num_streams.value_or(device.is_cpu() ? 1 : 4);
  std::int64_t chunk_bytes;
  if (o.chunk_elems) {
    chunk_bytes = -1;
  } else if (o.chunk_bytes) {
    chunk_bytes = *o.chunk_bytes;
  } else if (device.is_cpu()) {
    chunk_bytes = 16 * MiB;  // cache- and memory-friendly pieces
  } else {
    // Each copy costs a fixed overhead o (about 13 us on the H100: 16 MB chunks copied at 50.5
    // GB/s against 52.6 for 256 MB copies), and filling and draining the pipeline costs about
    // two chunks' copy time (the first H2D and the last D2H overlap nothing). For T bytes at
    // B bytes/s, (T / C) * o + 2 * C / B is smallest at C = sqrt(T * o * B / 2): ~27 MiB for
    // 1 GiB at 52 GB/s, more for bigger jobs.
    const double measured = measured_pinned_h2d_GBps(device);
    const double bw = (measured > 0 ? measured : 20.0) * 1e9;
    const double best = std::sqrt(double(total_bytes) * kCopyOverheadSeconds * bw / 2);
    chunk_bytes = std::clamp<std::int64_t>(static_cast<std::int64_t>(best), 4 * MiB, 64 * MiB);
    // Enough chunks for every stream to have several.
    chunk_bytes = std::min(chunk_bytes, std::max<std::int64_t>(1 * MiB, total_bytes / (4 * streams)));
    // Device memory: each stream holds an input, an output and temporaries of a chunk.
    const std::int64_t cap = detail::pipeline::device_chunk_cap(device, streams);
    if (cap > 0) chunk_bytes = std::min(chunk_bytes, cap);
  }
  const bool automatic = !o.chunk_elems && !o.chunk_bytes;
  // Automatic chunks are whole MiB, so every chunk starts page-aligned in the host array (an
  // odd size like 16358436 B puts every copy's host side at a different offset in its page).
  if (automatic && chunk_bytes >= MiB) chunk_bytes = chunk_bytes / MiB * MiB;
  std::int64_t chunk_rows = o.chunk_elems ? *o.chunk_elems / std::max<std::int64_t>(1, row_elems)
                                          : chunk_bytes / rbytes;
  if (automatic) {
    // Whole rows whose bytes are a multiple of 4 KiB, when a chunk has that many rows.
    const std::int64_t page = 4096;
    const std::int64_t step = page / std::gcd(page, rbytes);
    if (chunk_rows >= step) chunk_rows -= chunk_rows % step;
  }
  chunk_rows = std::max<std::int64_t>(1, chunk_rows);
  if (!o.num_streams && rows > 0) {
    const std::int64_t chunks = (rows + chunk_rows - 1) / chunk_rows;
    streams = static_cast<int>(std::clamp<std::int64_t>(chunks, 1, streams));
  }
  return {chunk_rows, streams};
}


}  // namespace

std::string PipelineReport::str() const {
  return fmt::format(
      "pipeline on {}: {} chunks of {} over {} streams, {} in, {} out, wall {:.3f} ms ({:.2f} GB/s of input), "
      "H2D {:.2f} GB/s, D2H {:.2f} GB/s, compute {:.3f} ms, overlap {:.1f}%{}{}{}",
      device, chunks, format_bytes(chunk_bytes), streams, format_bytes(input_bytes), format_bytes(output_bytes), wall_ms,
      throughput_GBps, h2d_GBps, d2h_GBps, compute_ms, overlap_percent, pageable_input ? ", pageable input" : "",
      pageable_output ? ", pageable output" : "", ordered_copies ? ", ordered copies" : "");
}

double measured_pinned_h2d_GBps() {
  if (!cuda_available()) return 0;
  return measured_pinned_h2d_GBps(current_device());
}

Pipeline::Pipeline(Compute compute, PipelineOptions options)
    : compute_(std::move(compute)), options_(std::move(options)), state_(std::make_shared<detail::PipelineState>()) {
  if (!compute_) throw ValueError("Pipeline: the compute function is empty");
  if (options_.chunk_elems && *options_.chunk_elems <= 0) {
    throw ValueError(fmt::format("Pipeline: chunk_elems must be positive, got {}", *options_.chunk_elems));
  }
  if (options_.chunk_bytes && *options_.chunk_bytes <= 0) {
    throw ValueError(fmt::format("Pipeline: chunk_bytes must be positive, got {}", *options_.chunk_bytes));
  }
  if (options_.num_streams && *options_.num_streams <= 0) {
    throw ValueError(fmt::format("Pipeline: num_streams must be positive, got {}", *options_.num_streams));
  }
  if (options_.buffering <= 0) {
    throw ValueError(fmt::format("Pipeline: buffering must be positive, got {}", options_.buffering));
  }
  const Device device = options_.device.value_or(default_device());
  if (device.is_cuda()) check_device_index(device.index, "Pipeline");
}

namespace {

void check_host_input(const Array& input) {
  if (!input.defined()) throw ValueError("Pipeline.run: the input is an undefined array");
  if (!input.device().is_cpu()) {
    throw DeviceError("Pipeline.run: the input is on " + input.device().str() + "; the pipeline takes a host (cpu) array");
  }
  if (input.ndim() == 0) throw ShapeError("Pipeline.run: the input is 0-d; the pipeline splits axis 0 into chunks");
}

// choose_sizes, remembered per Pipeline for the last input layout when it had to query the
// device (automatic chunk size on CUDA): the free-memory query and the pool statistics are not
// repeated for every run over same-shaped inputs.
AutoSizes remembered_sizes(Job& job, const Shape& shape, DType dtype) {
  const PipelineOptions& o = job.options;
  if (job.device.is_cpu() || o.chunk_elems || o.chunk_bytes || job.state == nullptr) {
    return choose_sizes(o, job.device, shape, dtype);
  }
  const std::int64_t rows = shape.empty() ? 0 : shape[0];
  const std::int64_t rbytes = numel(tail_of(shape)) * itemsize(dtype);
  const int requested = o.num_streams.value_or(0);
  std::lock_guard<std::mutex> lock(job.state->mutex);
  auto& memo = job.state->sizes;
  if (memo && memo->device == job.device && memo->rows == rows && memo->row_bytes == rbytes &&
      memo->requested_streams == requested) {
    return {memo->chunk_rows, memo->streams};
  }
  const AutoSizes sizes = choose_sizes(o, job.device, shape, dtype);
  memo = detail::PipelineState::Sizes{job.device, rows, rbytes, requested, sizes.chunk_rows, sizes.streams};
  return sizes;
}

// Runs `job` over the rows of `input` (contiguous copy if needed).
void run_rows(Job& job, const Array& input_any, PipelineReport& report) {
  const Array input = input_any.contiguous();
  const AutoSizes sizes = remembered_sizes(job, input.shape(), input.dtype());
  job.options.num_streams = sizes.streams;
  job.chunk_rows = sizes.chunk_rows;
  job.total_rows = input.dim(0);
  job.total_bytes = input.nbytes();
  job.total_chunks = (job.total_rows + sizes.chunk_rows - 1) / sizes.chunk_rows;
  std::int64_t next_row = 0;
  const std::int64_t total = job.total_rows;
  const std::int64_t chunk_rows = sizes.chunk_rows;
  job.next = [&input, next_row, total, chunk_rows]() mutable -> std::optional<ChunkIn> {
    if (next_row >= total) return std::nullopt;
    const std::int64_t end = std::min(total, next_row + chunk_rows);
    ChunkIn c{input.slice(0, Slice(next_row, end)), next_row};
    next_row = end;
    return c;
  };
  report = PipelineReport{};
  report.device = job.device.str();
  report.chunk_bytes = chunk_rows * numel(tail_of(input.shape())) * itemsize(input.dtype());
  report.streams = sizes.streams;
  if (total == 0) {
    // Nothing to pipeline: compute once on an empty chunk to learn the result's layout.
    DeviceGuard device_guard(job.device);
    Stream stream = job.device.is_cpu() ? Stream::cpu() : current_stream(job.device);
    Array empty_in = empty(input.shape(), input.dtype(), job.device, stream);
    Array out;
    {
      StreamGuard guard(stream);
      out = job.compute(empty_in, stream);
    }
    job.check_result(out, 0, 0);
    if (job.sink.callback) job.sink.callback(0, empty(out.shape(), out.dtype(), Device::cpu()));
    report.chunks = 0;
    return;
  }
  job.run();
}

Job make_job(const Pipeline::Compute& compute, const PipelineOptions& options, PipelineReport& report,
             detail::PipelineState* state) {
  detail::check_not_capturing("Pipeline.run");  // it waits on the host for its chunks
  Job job;
  job.compute = compute;
  job.options = options;
  job.device = options.device.value_or(default_device());
  job.report = &report;
  job.state = state;
  return job;
}

}  // namespace

Array Pipeline::run(const Array& host_input) {
  check_host_input(host_input);
  Job job = make_job(compute_, options_, report_, state_.get());
  const Device device = job.device;
  job.sink.make_output = [&job, device](const Shape& tail, DType dtype) {
    const Shape shape = with_rows(job.total_rows, tail);
    if (device.is_cpu()) return empty(shape, dtype, Device::cpu());
    // Pinned, so the copies out go straight to it (as Array::to(cpu) does).
    auto storage = std::make_shared<detail::Storage>(Buffer::allocate_pinned(numel(shape) * itemsize(dtype)));
    return Array(std::move(storage), shape, contiguous_strides(shape), 0, dtype);
  };
  run_rows(job, host_input, report_);
  return job.sink.output;
}

void Pipeline::run(const Array& host_input, const Array& host_output) {
  check_host_input(host_input);
  if (!host_output.defined()) throw ValueError("Pipeline.run: the output is an undefined array");
  check_writable(host_output, "Pipeline.run");
  if (!host_output.device().is_cpu()) {
    throw DeviceError("Pipeline.run: the output is on " + host_output.device().str() + "; it must be a host (cpu) array");
  }
  if (!host_output.is_contiguous()) throw ValueError("Pipeline.run: the output must be contiguous");
  if (host_output.ndim() == 0 || host_output.dim(0) != host_input.dim(0)) {
    throw ShapeError(fmt::format("Pipeline.run: the output has shape {}, but the input has {} rows{}", shape_str(host_output.shape()),
                                 host_input.dim(0),
                                 host_output.ndim() == 0 || host_output.dim(0) < host_input.dim(0) ? " (the output is too small)" : ""));
  }
  Job job = make_job(compute_, options_, report_, state_.get());
  job.sink.output = host_output;
  run_rows(job, host_input, report_);
}

void Pipeline::run(const Array& host_input, const ChunkCallback& on_chunk) {
  check_host_input(host_input);
  if (!on_chunk) throw ValueError("Pipeline.run: the chunk callback is empty");
  Job job = make_job(compute_, options_, report_, state_.get());
  job.sink.callback = on_chunk;
  run_rows(job, host_input, report_);
}

void Pipeline::run(const ChunkSource& next, const ChunkCallback& on_chunk) {
  if (!next) throw ValueError("Pipeline.run: the chunk source is empty");
  if (!on_chunk) throw ValueError("Pipeline.run: the chunk callback is empty");
  Job job = make_job(compute_, options_, report_, state_.get());
  job.sink.callback = on_chunk;
  job.options.num_streams = options_.num_streams.value_or(job.device.is_cpu() ? 1 : 4);
  std::int64_t row = 0;
  job.next = [&next, &row]() -> std::optional<ChunkIn> {
    std::optional<Array> chunk = next();
    if (!chunk) return std::nullopt;
    if (chunk->defined() && chunk->ndim() > 0 && !chunk->is_contiguous()) chunk = chunk->contiguous();
    ChunkIn c{*chunk, row};
    if (chunk->defined() && chunk->ndim() > 0) row += chunk->dim(0);
    return c;
  };
  report_ = PipelineReport{};
  report_.device = job.device.str();
  report_.streams = *job.options.num_streams;
  job.chunk_rows = 0;
  job.run();
  report_.device = job.device.str();
}

}  // namespace tessel
