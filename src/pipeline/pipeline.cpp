// Pipeline: chunked host -> device -> compute -> host over several streams (see
// tessel/pipeline/pipeline.hpp). One engine serves every run() overload: a source of host chunks
// (rows of an array, or a user generator) and a sink (rows of a host array, or a callback).
#include "tessel/ops/cast.hpp"
#include "tessel/pipeline/pipeline.hpp"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <numeric>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "array/backend.hpp"
#include "tessel/array/profile_args.hpp"
#include "tessel/core/config.hpp"
#include "tessel/core/error.hpp"
#include "tessel/core/event.hpp"
#include "tessel/memory/buffer.hpp"
#include "tessel/memory/caching_allocator.hpp"
#include "tessel/memory/stats.hpp"
#include "tessel/profile/range.hpp"

#if defined(TESSEL_HAVE_CUDA)
#include <cuda_runtime_api.h>

#include "core/cuda_check.hpp"
#endif

namespace tessel {
namespace detail {

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

}  // namespace detail

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::int64_t MiB = 1 << 20;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Host memcpy of big blocks with a few threads: one core cannot saturate host memory bandwidth,
// and pageable data is staged through pinned memory by these copies.
[[maybe_unused]] void parallel_memcpy(void* dst, const void* src, std::int64_t bytes) {
  if (bytes <= 0) return;
  const int threads = std::min(8, tessel::num_threads());  // the CPU thread setting (TESSEL_NUM_THREADS)
  if (bytes < 8 * MiB || threads <= 1) {
    std::memcpy(dst, src, static_cast<std::size_t>(bytes));
    return;
  }
  const std::int64_t part = (bytes + threads - 1) / threads;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; ++t) {
    const std::int64_t begin = t * part;
    const std::int64_t end = std::min(bytes, begin + part);
    if (begin < end) {
      std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin,
                  static_cast<std::size_t>(end - begin));
    }
  }
}

Shape tail_of(const Shape& shape) { return Shape(shape.begin() + 1, shape.end()); }

Shape with_rows(std::int64_t rows, const Shape& tail) {
  Shape s{rows};
  s.insert(s.end(), tail.begin(), tail.end());
  return s;
}

[[maybe_unused]] bool is_pinned(const Array& a) { return a.defined() && a.buffer()->page_locked(); }

// Total length of the union of [start, end) intervals, in the same unit.
[[maybe_unused]] double union_length(std::vector<std::pair<double, double>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  double total = 0, cur_start = 0, cur_end = -1;
  bool open = false;
  for (const auto& [a, b] : intervals) {
    if (!open || a > cur_end) {
      if (open) total += cur_end - cur_start;
      cur_start = a;
      cur_end = b;
      open = true;
    } else {
      cur_end = std::max(cur_end, b);
    }
  }
  if (open) total += cur_end - cur_start;
  return total;
}

// Rethrows the current exception with "Pipeline.run: chunk k ...: " in front, keeping its type.
[[noreturn]] void rethrow_with_context(const std::string& context) {
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
  void run_cpu();
#if defined(TESSEL_HAVE_CUDA)
  void run_cuda();
#endif
};

[[maybe_unused]] std::int64_t row_bytes(const Shape& tail, DType dtype) { return numel(tail) * itemsize(dtype); }

void Job::run_cpu() {
  std::int64_t index = 0, in_bytes = 0, out_bytes = 0;
  PipelineProgress progress(options.progress, total_bytes);
  double compute_ms = 0;
  while (std::optional<ChunkIn> c = next()) {
    check_input_chunk(*c, index);
    const std::int64_t rows = c->host.dim(0);
    try {
      const auto t0 = Clock::now();
      Array out;
      {
        TESSEL_RANGE("Pipeline.compute", c->host);
        StreamGuard guard(Stream::cpu());
        out = compute(c->host, Stream::cpu());
      }
      compute_ms += ms_since(t0);
      check_result(out, rows, index);
      TESSEL_RANGE("Pipeline.copy_out", out);
      if (sink.output.defined()) {
        copyto(sink.output.slice(0, Slice(c->row_offset, c->row_offset + rows)), out);
      } else if (sink.callback) {
        sink.callback(c->row_offset, out.contiguous());
      }
      in_bytes += c->host.nbytes();
      out_bytes += out.nbytes();
    } catch (...) {
      rethrow_with_context(fmt::format("Pipeline.run: chunk {} (rows {}..{}) on cpu: ", index, c->row_offset,
                                       c->row_offset + rows));
    }
    ++index;
    progress.update(in_bytes, index, total_chunks);
  }
  const double wall = ms_since(start);
  PipelineReport& r = *report;
  r.compute_ms = compute_ms;
  r.wall_ms = wall;
  r.chunks = index;
  r.input_bytes = in_bytes;
  r.output_bytes = out_bytes;
  r.streams = 1;
  r.throughput_GBps = wall > 0 ? double(in_bytes) / wall / 1e6 : 0;
  r.overlap_percent = 0;  // the CPU runs the steps one after another
}

#if defined(TESSEL_HAVE_CUDA)

// One staging slot: pinned buffers for pageable data and the events that time and guard it.
struct Slot {
  std::shared_ptr<Buffer> in_stage, out_stage;
  std::unique_ptr<Event> before_h2d, after_h2d, after_compute, done;
  bool busy = false;
  // What to do when `done` has completed.
  std::int64_t index = -1, row_offset = 0, rows = 0, out_bytes = 0, in_bytes = 0;
  bool out_staged = false;  // the result is in out_stage (else it went straight to the output)
};

// Times of the copies and kernels, measured from one origin event on the first stream.
struct Timeline {
  std::vector<std::pair<double, double>> h2d, kernels, d2h;
  double first_start = 1e300, last_end = 0;
};

// One run of a Job on a GPU: per chunk k, on stream k % S and slot (k / S) % buffering, the
// stages queue_chunk calls in order (copy in, compute, copy out); drain delivers a finished
// chunk. The caller holds a DeviceGuard for the job's device.
class CudaRun {
 public:
  explicit CudaRun(Job& job) : job_(job), progress_(job.options.progress, job.total_bytes) {
    const int num_streams = job.options.num_streams.value_or(1);
    ordered_ = job.options.ordered_copies && num_streams > 1;
    acquire_streams(num_streams);
    slots_.resize(static_cast<std::size_t>(num_streams));
    for (auto& per_stream : slots_) per_stream.resize(static_cast<std::size_t>(job.options.buffering));
    base_.record(streams_[0]);
    for (std::size_t i = 1; i < streams_.size(); ++i) streams_[i].wait(base_);  // one time origin for all
  }

  void queue_chunk(const ChunkIn& c, std::int64_t index) {
    const auto s = static_cast<std::size_t>(index % static_cast<std::int64_t>(streams_.size()));
    const auto buffering = static_cast<std::int64_t>(job_.options.buffering);
    Slot& slot = slots_[s][static_cast<std::size_t>((index / static_cast<std::int64_t>(streams_.size())) % buffering)];
    const Stream& stream = streams_[s];
    drain(slot);  // the slot's previous chunk is done: its staging memory may be reused
    make_events(slot);
    Array d_in;
    {
      TESSEL_RANGE("Pipeline.copy_in", c.host, stream);
      d_in = copy_in(slot, c, stream);
    }
    Array out;
    {
      TESSEL_RANGE("Pipeline.compute", d_in, stream);
      out = run_compute(slot, d_in, index, stream);
    }
    {
      TESSEL_RANGE("Pipeline.copy_out", out, stream);
      copy_out(slot, out, c, stream);
    }
    slot.busy = true;
    slot.index = index;
    slot.row_offset = c.row_offset;
    slot.rows = c.host.dim(0);
    slot.in_bytes = c.host.nbytes();
    slot.out_bytes = out.nbytes();
    // d_in and out go back to the pool here, stream-ordered on `stream`.
  }

  // Delivers the chunks still in flight, in chunk order.
  void drain_in_order() {
    std::vector<Slot*> remaining;
    for (auto& per_stream : slots_) {
      for (Slot& slot : per_stream) {
        if (slot.busy) remaining.push_back(&slot);
      }
    }
    std::sort(remaining.begin(), remaining.end(), [](const Slot* a, const Slot* b) { return a->index < b->index; });
    for (Slot* slot : remaining) drain(*slot);
  }

  // After a failure: queue nothing more and let the chunks in flight finish (their errors are
  // ignored: the first one is what the caller reports); the buffers are released afterwards.
  void cancel() noexcept {
    for (const Stream& stream : streams_) {
      try {
        stream.synchronize();
      } catch (...) {
      }
    }
  }

  void fill_report(std::int64_t chunks) const;

 private:
  // The Pipeline's own streams, kept between runs: the device pool's blocks stay with them, so
  // every run reuses the same device memory without re-homing it.
  void acquire_streams(int num_streams) {
    detail::PipelineState& state = *job_.state;
    std::lock_guard<std::mutex> lock(state.mutex);
    if (!state.streams.empty() && state.streams_device != job_.device) state.streams.clear();
    state.streams_device = job_.device;
    while (static_cast<int>(state.streams.size()) < num_streams) state.streams.push_back(Stream::create(job_.device));
    streams_.assign(state.streams.begin(), state.streams.begin() + num_streams);
  }

  void make_events(Slot& slot) const {
    if (slot.done) return;
    slot.before_h2d = std::make_unique<Event>(job_.device, true);
    slot.after_h2d = std::make_unique<Event>(job_.device, true);
    slot.after_compute = std::make_unique<Event>(job_.device, true);
    slot.done = std::make_unique<Event>(job_.device, true);
  }

  // Waits for a slot's chunk and delivers its result (pageable copy-out or callback).
  void drain(Slot& slot) {
    if (!slot.busy) return;
    TESSEL_RANGE("Pipeline.drain");
    slot.done->synchronize();
    slot.busy = false;
    record_times(slot);
    if (slot.out_staged) deliver_staged(slot);
    in_total_ += slot.in_bytes;
    out_total_ += slot.out_bytes;
    ++chunks_done_;
    progress_.update(in_total_, chunks_done_, job_.total_chunks);
  }

  void record_times(const Slot& slot) {
    const double t0 = base_.elapsed_ms(*slot.before_h2d), t1 = base_.elapsed_ms(*slot.after_h2d);
    const double t2 = base_.elapsed_ms(*slot.after_compute), t3 = base_.elapsed_ms(*slot.done);
    times_.h2d.emplace_back(t0, t1);
    times_.kernels.emplace_back(t1, t2);
    times_.d2h.emplace_back(t2, t3);
    times_.first_start = std::min(times_.first_start, t0);
    times_.last_end = std::max(times_.last_end, t3);
  }

  void deliver_staged(const Slot& slot) const {
    const Sink& sink = job_.sink;
    if (sink.output.defined()) {
      char* dst = static_cast<char*>(sink.output.data()) + slot.row_offset * row_bytes(job_.out_tail, job_.out_dtype);
      parallel_memcpy(dst, slot.out_stage->data(), slot.out_bytes);
    } else if (sink.callback) {
      const Shape shape = with_rows(slot.rows, job_.out_tail);
      sink.callback(slot.row_offset, Array(std::make_shared<detail::Storage>(slot.out_stage), shape,
                                           contiguous_strides(shape), 0, job_.out_dtype));
    }
  }

  // The chunk's host rows in page-locked memory: the input itself when it is pinned, else this
  // slot's staging buffer, filled by the calling thread while the GPU works on other chunks.
  const void* pinned_input(Slot& slot, const ChunkIn& c, const Stream& stream) {
    c.host.wait();
    // Page-locked or not, asked once per buffer (for wrapped memory that is a CUDA query): an
    // array input gives every chunk the same buffer.
    if (c.host.buffer() != last_in_buffer_) {
      last_in_buffer_ = c.host.buffer();  // held, so a new buffer cannot reuse its address
      last_in_pinned_ = is_pinned(c.host);
    }
    const std::int64_t bytes = c.host.nbytes();
    if (last_in_pinned_ || bytes == 0) return c.host.data();
    pageable_in_ = true;
    if (!slot.in_stage || slot.in_stage->size() < bytes) {
      slot.in_stage.reset();
      slot.in_stage = Buffer::allocate_pinned(bytes, stream);
    }
    parallel_memcpy(slot.in_stage->data(), c.host.data(), bytes);
    return slot.in_stage->data();
  }

  Array copy_in(Slot& slot, const ChunkIn& c, const Stream& stream) {
    const void* src = pinned_input(slot, c, stream);
    // From the caching allocator on the chunk's stream: the block the chunk S before freed on
    // this stream comes back at once (no raw allocation, no wait), and a compute that keeps its
    // input alive can never see it overwritten.
    Array d_in = empty(c.host.shape(), c.host.dtype(), job_.device, stream);
    if (ordered_ && previous_h2d_) stream.wait(*previous_h2d_);
    slot.before_h2d->record(stream);
    backend::cuda::memcpy_async(d_in.data(), job_.device, src, Device::cpu(), c.host.nbytes(), stream);
    d_in.storage()->record_pending_write(stream);
    slot.after_h2d->record(stream);
    previous_h2d_ = slot.after_h2d.get();
    return d_in;
  }

  // compute on the chunk's stream (made current while it runs); a contiguous result, ready on it.
  Array run_compute(Slot& slot, const Array& d_in, std::int64_t index, const Stream& stream) {
    Array out;
    {
      StreamGuard guard(stream);
      out = job_.compute(d_in, stream);
    }
    job_.check_result(out, d_in.dim(0), index);
    out.storage()->wait_on_stream(stream);
    if (!out.is_contiguous()) out = out.contiguous(stream);
    if (out.buffer()->stream() != stream) out.buffer()->record_stream(stream);
    slot.after_compute->record(stream);
    return out;
  }

  // Straight into a pinned output, else into the slot's staging (copied out when drained).
  void* output_target(Slot& slot, const ChunkIn& c, std::int64_t out_bytes, const Stream& stream) {
    const Sink& sink = job_.sink;
    // The output is one buffer for the run, made when the first result's shape is known.
    if (!output_pinned_ && sink.output.defined()) output_pinned_ = is_pinned(sink.output);
    slot.out_staged = !output_pinned_.value_or(false);
    if (!slot.out_staged) {
      return static_cast<char*>(sink.output.data()) + c.row_offset * row_bytes(job_.out_tail, job_.out_dtype);
    }
    if (sink.output.defined()) pageable_out_ = true;
    if (!slot.out_stage || slot.out_stage->size() < out_bytes) {
      slot.out_stage.reset();
      const std::int64_t full_chunk = job_.chunk_rows * row_bytes(job_.out_tail, job_.out_dtype);
      slot.out_stage = Buffer::allocate_pinned(std::max(out_bytes, full_chunk), stream);
    }
    return slot.out_stage->data();
  }

  void copy_out(Slot& slot, const Array& out, const ChunkIn& c, const Stream& stream) {
    void* dst = output_target(slot, c, out.nbytes(), stream);
    if (ordered_ && previous_d2h_) stream.wait(*previous_d2h_);
    backend::cuda::memcpy_async(dst, Device::cpu(), out.data(), job_.device, out.nbytes(), stream);
    slot.done->record(stream);
    previous_d2h_ = slot.done.get();
  }

  Job& job_;
  bool ordered_ = false;
  std::vector<Stream> streams_;
  std::vector<std::vector<Slot>> slots_;
  Event base_{job_.device, true};
  Timeline times_;
  std::int64_t in_total_ = 0, out_total_ = 0, chunks_done_ = 0;
  PipelineProgress progress_;
  bool pageable_in_ = false, pageable_out_ = false;
  std::optional<bool> output_pinned_;
  std::shared_ptr<Buffer> last_in_buffer_;
  bool last_in_pinned_ = false;
  // ordered_copies: the previous chunk's copies, which this chunk's copies wait for.
  const Event* previous_h2d_ = nullptr;
  const Event* previous_d2h_ = nullptr;
};

void CudaRun::fill_report(std::int64_t chunks) const {
  const double wall = ms_since(job_.start);
  PipelineReport& r = *job_.report;
  r.ordered_copies = ordered_;
  const double h2d_ms = union_length(times_.h2d), compute_ms = union_length(times_.kernels),
               d2h_ms = union_length(times_.d2h);
  r.h2d_GBps = h2d_ms > 0 ? double(in_total_) / h2d_ms / 1e6 : 0;
  r.d2h_GBps = d2h_ms > 0 ? double(out_total_) / d2h_ms / 1e6 : 0;
  r.compute_ms = compute_ms;
  r.wall_ms = wall;
  r.chunks = chunks;
  r.input_bytes = in_total_;
  r.output_bytes = out_total_;
  r.streams = static_cast<int>(streams_.size());
  r.pageable_input = pageable_in_;
  r.pageable_output = pageable_out_;
  r.throughput_GBps = wall > 0 ? double(in_total_) / wall / 1e6 : 0;
  const double sum = h2d_ms + compute_ms + d2h_ms;
  const double longest = std::max({h2d_ms, compute_ms, d2h_ms});
  const double span = chunks > 0 ? times_.last_end - times_.first_start : 0;
  r.overlap_percent = sum - longest > 1e-9 ? std::clamp(100.0 * (sum - span) / (sum - longest), 0.0, 100.0) : 100.0;
}

void Job::run_cuda() {
  DeviceGuard device_guard(device);
  CudaRun run(*this);
  std::int64_t index = 0;
  try {
    while (std::optional<ChunkIn> c = next()) {
      check_input_chunk(*c, index);
      try {
        run.queue_chunk(*c, index);
      } catch (...) {
        rethrow_with_context(fmt::format("Pipeline.run: chunk {} (rows {}..{}) on {}: ", index, c->row_offset,
                                         c->row_offset + c->host.dim(0), device.str()));
      }
      ++index;
    }
    run.drain_in_order();
  } catch (...) {
    run.cancel();
    throw;
  }
  run.fill_report(index);
}

#endif

void Job::run() {
  TESSEL_RANGE("Pipeline.run", device.str().c_str());
  if (device.is_cpu()) {
    run_cpu();
    return;
  }
#if defined(TESSEL_HAVE_CUDA)
  run_cuda();
#else
  throw DeviceError("Pipeline.run: this build of tessel has no CUDA backend");
#endif
}

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
#if defined(TESSEL_HAVE_CUDA)
    std::size_t free_bytes = 0, total = 0;
    DeviceGuard guard(device);
    if (cudaMemGetInfo(&free_bytes, &total) == cudaSuccess) {
      // Cached blocks of the pool are free for us too.
      const MemoryStats st = device_allocator(device.index).stats();
      const std::int64_t available = static_cast<std::int64_t>(free_bytes) + st.reserved_bytes - st.allocated_bytes;
      const std::int64_t cap = available / (8 * streams);
      if (cap > 0) chunk_bytes = std::min(chunk_bytes, cap);
    } else {
      (void)cudaGetLastError();
    }
#endif
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
#if defined(TESSEL_HAVE_CUDA)
  if (!cuda_available()) return 0;
  return measured_pinned_h2d_GBps(current_device());
#else
  return 0;
#endif
}

double measured_pinned_h2d_GBps(Device device) {
#if defined(TESSEL_HAVE_CUDA)
  if (!device.is_cuda() || !cuda_available()) return 0;
  check_device_index(device.index, "measured_pinned_h2d_GBps");
  // Measured on the device asked for (its link, not the current device's), once per device.
  static std::mutex mutex;
  static std::map<int, double> measured;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = measured.find(device.index); it != measured.end()) return it->second;
  double result = 0;
  try {
    DeviceGuard guard(device);
    const std::int64_t bytes = 64 * MiB;
    Stream stream = Stream::create(device);
    {
      auto host = Buffer::allocate_pinned(bytes, stream);
      auto dev = Buffer::allocate(device, bytes, stream);
      std::memset(host->data(), 1, static_cast<std::size_t>(bytes));
      Event start(device), stop(device);
      double best = 1e300;
      for (int i = 0; i < 4; ++i) {  // the first is a warm-up
        start.record(stream);
        backend::cuda::memcpy_async(dev->data(), device, host->data(), Device::cpu(), bytes, stream);
        stop.record(stream);
        const double ms = start.elapsed_ms(stop);  // waits for stop
        if (i > 0) best = std::min(best, ms);
      }
      stream.synchronize();
      result = best > 0 && best < 1e300 ? double(bytes) / best / 1e6 : 0;
    }
  } catch (const std::exception&) {
    result = 0;  // sizing falls back to defaults
  }
  measured[device.index] = result;
  return result;
#else
  (void)device;
  return 0;
#endif
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
