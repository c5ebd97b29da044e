#pragma once
// Pipeline: host data (possibly larger than GPU memory) -> device -> compute -> host, in chunks
// along axis 0, overlapped over several streams.
//
//   auto k = tessel::fuse([](const std::vector<tessel::Sym>& v) { return v[0] * 2 + 1; }, 1);
//   tessel::Pipeline p([&](const Array& x, const Stream& s) { return k({x}, std::nullopt, s); });
//   Array y = p.run(host_x);                  // a host array, rows processed chunk by chunk
//   std::cerr << p.report().str();
//
// Per chunk k, on stream k % num_streams: copy in (H2D) -> compute(chunk, stream) -> copy out
// (D2H); a chunk's staging slot is reused only after the event recorded after its copy out.
// - Pinned input/output are copied directly; pageable ones go through pinned staging slots
//   (`buffering` per stream), filled and drained by the calling thread while the GPU works on
//   other chunks, so the job is never synchronous chunk by chunk.
// - compute must return, for a chunk of r rows, an array of r rows whose other dimensions and
//   dtype are the same for every chunk (ShapeError / DTypeError otherwise). It should queue its
//   work on the given stream (which is also made the current stream while it runs).
// - On a CPU device (options.device) the same call runs compute chunk by chunk on the host.
// - The first failure (an exception from compute, a CUDA error, OutOfMemory) stops queuing,
//   waits for the chunks in flight, frees every buffer and rethrows, with the chunk named.
// - Sizes: chunk_elems / chunk_bytes and num_streams default (unset) to values chosen from the
//   measured pinned host->device bandwidth (measured once per process and device) and free device
//   memory; automatic chunks are whole MiB (page-aligned host offsets keep the copies at full speed).
// - A Pipeline keeps its streams (and its automatic sizes for an input layout) between runs, so
//   repeated runs start queuing at once; copies of a Pipeline share them.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "tessel/array/array.hpp"
#include "tessel/core/device.hpp"
#include "tessel/core/progress.hpp"  // ProgressMode: automatic shows the bar for jobs of 256 MiB or more
#include "tessel/core/stream.hpp"

namespace tessel {


struct PipelineOptions {
  // Unset: chosen automatically. Set values must be positive (ValueError otherwise).
  std::optional<std::int64_t> chunk_elems;  // input elements per chunk (rounded down to whole rows, >= 1 row)
  std::optional<std::int64_t> chunk_bytes;  // or input bytes per chunk (chunk_elems wins if both are set)
  std::optional<int> num_streams;
  int buffering = 2;  // pinned staging slots per stream: 2 double, 3 triple buffering (>= 1)
  ProgressMode progress = ProgressMode::automatic;
  std::optional<Device> device;  // where compute runs; default: default_device()
  // true: the copies of each direction run one at a time in chunk order across streams (chunk
  // k's H2D waits for chunk k-1's, the same for D2H), so each copy gets the whole link and the
  // first chunk reaches compute (and the last leaves the device) as early as possible; false:
  // copies of different streams may share the link. Results are the same either way.
  bool ordered_copies = false;
};

struct PipelineReport {
  double h2d_GBps = 0;        // input bytes / time the H2D copies were busy (union of intervals)
  double d2h_GBps = 0;        // output bytes / time the D2H copies were busy
  double compute_ms = 0;      // time compute kernels were busy (union over streams)
  double wall_ms = 0;         // whole run() call (sizing, queuing, waiting), host clock
  double throughput_GBps = 0; // input bytes / wall time
  double overlap_percent = 0; // 100 * (sum of busy times - wall) / (sum of busy times - max busy), clamped
  std::int64_t chunks = 0;
  std::int64_t chunk_bytes = 0;   // input bytes of a full chunk
  std::int64_t input_bytes = 0;
  std::int64_t output_bytes = 0;
  int streams = 0;
  bool pageable_input = false;
  bool pageable_output = false;
  bool ordered_copies = false;
  std::string device;
  std::string str() const;  // one line
};

namespace detail {
struct PipelineState;  // streams and automatic sizes kept between runs
}

class Pipeline {
 public:
  using Compute = std::function<Array(const Array& chunk, const Stream& stream)>;
  // Called in chunk order with the rows [row_offset, row_offset + chunk.dim(0)) of the result.
  // `chunk` is a host array valid only during the call (it may be a reused staging buffer).
  using ChunkCallback = std::function<void(std::int64_t row_offset, const Array& chunk)>;
  // Returns the next host chunk, or nullopt at the end (for run over an iterable of chunks).
  using ChunkSource = std::function<std::optional<Array>()>;

  explicit Pipeline(Compute compute, PipelineOptions options = {});

  // The whole result as a new host array (pinned on CUDA, so the copies out are direct).
  Array run(const Array& host_input);
  // Into an existing host array of the result's shape and dtype (pageable or pinned).
  void run(const Array& host_input, const Array& host_output);
  // Each chunk's result to a callback instead of an array.
  void run(const Array& host_input, const ChunkCallback& on_chunk);
  // Over chunks produced by `next` (each a host array with the same trailing shape and dtype),
  // results to on_chunk; options' chunk size is ignored (the chunks are given).
  void run(const ChunkSource& next, const ChunkCallback& on_chunk);

  const PipelineReport& report() const { return report_; }
  const PipelineOptions& options() const { return options_; }

 private:
  Compute compute_;
  PipelineOptions options_;
  PipelineReport report_;
  std::shared_ptr<detail::PipelineState> state_;
};

// The pinned host->device bandwidth in GB/s of `device` (default: the current device), measured
// once per process and device (64 MiB copies) and cached; 0 without CUDA. Used to size chunks.
double measured_pinned_h2d_GBps();
double measured_pinned_h2d_GBps(Device device);

}  // namespace tessel
