// The pipeline on a GPU: chunks copied in, computed and copied out on several streams, with
// pinned staging for pageable data. A build without CUDA has the not-built error here.
#include "pipeline/job.hpp"

#if defined(TESSEL_HAVE_CUDA)
#include <cuda_runtime_api.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "array/backend.hpp"
#include "core/cuda_check.hpp"
#include "tessel/core/event.hpp"
#include "tessel/memory/buffer.hpp"
#include "tessel/memory/caching_allocator.hpp"
#include "tessel/memory/stats.hpp"
#include "tessel/ops/cast.hpp"
#include "tessel/profile/range.hpp"

namespace tessel::detail::pipeline {
namespace {

// Host memcpy of big blocks with a few threads: one core cannot saturate host memory bandwidth,
// and pageable data is staged through pinned memory by these copies.
void parallel_memcpy(void* dst, const void* src, std::int64_t bytes) {
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

bool is_pinned(const Array& a) { return a.defined() && a.buffer()->page_locked(); }

// Total length of the union of [start, end) intervals, in the same unit.
double union_length(std::vector<std::pair<double, double>> intervals) {
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

}  // namespace

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

std::int64_t device_chunk_cap(Device device, int streams) {
  std::size_t free_bytes = 0, total = 0;
  DeviceGuard guard(device);
  if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  // Cached blocks of the pool are free for us too.
  const MemoryStats st = device_allocator(device.index).stats();
  const std::int64_t available = static_cast<std::int64_t>(free_bytes) + st.reserved_bytes - st.allocated_bytes;
  return std::max<std::int64_t>(0, available / (8 * streams));
}

}  // namespace tessel::detail::pipeline

namespace tessel {

double measured_pinned_h2d_GBps(Device device) {
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
    const std::int64_t bytes = 64 * detail::pipeline::MiB;
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
}

}  // namespace tessel

#else  // a build without CUDA

#include "core/not_built.hpp"

namespace tessel::detail::pipeline {

void Job::run_cuda() { ::tessel::detail::throw_cuda_not_built("Pipeline.run on " + device.str()); }

std::int64_t device_chunk_cap(Device, int) { return 0; }

}  // namespace tessel::detail::pipeline

namespace tessel {

double measured_pinned_h2d_GBps(Device) { return 0; }

}  // namespace tessel
#endif
