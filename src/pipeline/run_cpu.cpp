// The pipeline on the CPU: each chunk's compute and copy out, one after another.
#include "pipeline/job.hpp"

#include "tessel/ops/cast.hpp"
#include "tessel/profile/range.hpp"

namespace tessel::detail::pipeline {

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

}  // namespace tessel::detail::pipeline
