// Pipeline: pipelined results equal sequential ones (random sizes, chunk and stream counts, a
// short last chunk, pageable and pinned host memory, every sink), bad input, and failures in a
// chunk that must neither hang nor leak.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "testing.hpp"
#include "tessel/tessel.hpp"

namespace {

using namespace tessel;
using tessel::testing::expect_error;

class PipelineTest : public tessel::testing::BackendTest {};

// x * 2 + 1 through ordinary tessel ops on the pipeline's stream.
Array twice_plus_one(const Array& x, const Stream& s) {
  return add(multiply(x, Scalar(2.0f), std::nullopt, s), Scalar(1.0f), std::nullopt, s);
}

// A host array of `shape` with random floats, in pageable (plain host) or pinned memory.
Array random_host(const Shape& shape, bool pinned, std::mt19937_64& rng) {
  const std::int64_t n = numel(shape);
  std::vector<float> values(static_cast<std::size_t>(n));
  std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
  for (float& v : values) v = dist(rng);
  if (!pinned) return from_vector(values, shape, Device::cpu());
  Array a = empty_pinned(shape, DType::float32);
  if (n > 0) std::memcpy(a.data(), values.data(), static_cast<std::size_t>(n) * 4);
  return a;
}

Array pinned_empty(const Shape& shape) { return empty_pinned(shape, DType::float32); }

std::vector<float> reference(const Array& x) {
  std::vector<float> v = x.to_vector<float>();
  for (float& e : v) e = e * 2.0f + 1.0f;  // float32 arithmetic, as the ops do it
  return v;
}

void expect_equal(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      FAIL() << what << ": element " << i << " is " << got[i] << ", expected " << want[i];
    }
  }
}

// Memory held now by the allocator that serves `device`, and by the pinned pool.
struct Usage {
  std::int64_t device = 0, pinned = 0, host = 0;
  bool operator==(const Usage& o) const { return device == o.device && pinned == o.pinned && host == o.host; }
};
Usage usage(Device device) {
  Usage u;
  u.host = host_memory_stats().allocated_bytes;
  if (device.is_cuda()) {
    u.device = device_allocator(device.index).stats().allocated_bytes;
    u.pinned = pinned_allocator().stats().allocated_bytes;
  }
  return u;
}

// Runs fn on another thread and fails (instead of hanging the suite) after `seconds`.
template <class Fn>
void with_timeout(Fn fn, int seconds = 120) {
  auto done = std::async(std::launch::async, fn);
  if (done.wait_for(std::chrono::seconds(seconds)) != std::future_status::ready) {
    ADD_FAILURE() << "the pipeline did not finish within " << seconds << " s (a hang)";
    std::abort();  // a hung thread cannot be cancelled; stop rather than hang the run
  }
  done.get();
}

TEST_P(PipelineTest, MatchesSequentialForRandomSizes) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const std::vector<Shape> tails = {{}, {3}, {2, 5}};
  for (int trial = 0; trial < 12; ++trial) {
    const Shape tail = tails[static_cast<std::size_t>(trial) % tails.size()];
    const std::int64_t rows = std::uniform_int_distribution<std::int64_t>(1, 3000)(rng);
    Shape shape{rows};
    shape.insert(shape.end(), tail.begin(), tail.end());
    const std::int64_t row_elems = numel(tail);
    // Chunk rows that rarely divide the rows: the last chunk is shorter.
    const std::int64_t chunk_rows = std::uniform_int_distribution<std::int64_t>(1, std::max<std::int64_t>(1, rows / 3))(rng);
    const int streams = std::uniform_int_distribution<int>(1, 4)(rng);
    const int buffering = std::uniform_int_distribution<int>(1, 3)(rng);
    const bool pinned_in = trial % 2 == 1;
    const bool ordered = trial % 4 >= 2;  // copies serialized in chunk order across streams, or not
    const int sink = trial % 3;  // 0: new array, 1: given output (pageable, pinned alternately), 2: callback
    SCOPED_TRACE("rows " + std::to_string(rows) + " tail " + shape_str(tail) + " chunk_rows " + std::to_string(chunk_rows) +
                 " streams " + std::to_string(streams) + " buffering " + std::to_string(buffering) + " pinned_in " +
                 std::to_string(pinned_in) + " ordered " + std::to_string(ordered) + " sink " + std::to_string(sink));
    const Array x = random_host(shape, pinned_in, rng);
    const std::vector<float> want = reference(x);

    PipelineOptions options;
    options.chunk_elems = chunk_rows * std::max<std::int64_t>(1, row_elems);
    options.num_streams = streams;
    options.buffering = buffering;
    options.ordered_copies = ordered;
    options.device = device();
    options.progress = ProgressMode::off;
    Pipeline pipeline(twice_plus_one, options);
    std::vector<float> got;
    if (sink == 0) {
      Array y = pipeline.run(x);
      EXPECT_EQ(y.shape(), shape);
      EXPECT_TRUE(y.device().is_cpu());
      got = y.to_vector<float>();
    } else if (sink == 1) {
      Array y = (trial / 3) % 2 == 0 ? empty(shape, DType::float32, Device::cpu()) : pinned_empty(shape);
      fill(y, Scalar(std::nanf("")));  // poison
      pipeline.run(x, y);
      got = y.to_vector<float>();
    } else {
      got.assign(static_cast<std::size_t>(numel(shape)), std::nanf(""));
      std::int64_t expected_offset = 0;
      pipeline.run(x, [&](std::int64_t row_offset, const Array& chunk) {
        EXPECT_EQ(row_offset, expected_offset) << "chunks arrive in order";
        expected_offset += chunk.dim(0);
        std::vector<float> part = chunk.to_vector<float>();
        std::copy(part.begin(), part.end(), got.begin() + row_offset * row_elems);
      });
      EXPECT_EQ(expected_offset, rows);
    }
    expect_equal(got, want, "pipeline result");
    const PipelineReport& r = pipeline.report();
    EXPECT_EQ(r.chunks, (rows + chunk_rows - 1) / chunk_rows);
    EXPECT_EQ(r.input_bytes, x.nbytes());
    EXPECT_EQ(r.output_bytes, x.nbytes());
    EXPECT_GE(r.overlap_percent, 0.0);
    EXPECT_LE(r.overlap_percent, 100.0);
    EXPECT_FALSE(r.str().empty());
    if (device().is_cuda()) {
      EXPECT_EQ(r.pageable_input, !pinned_in);
      // A new result is pinned, a callback gets device-staged chunks: only a given pageable
      // output is staged (a pinned one seen as pageable halves the throughput).
      EXPECT_EQ(r.pageable_output, sink == 1 && (trial / 3) % 2 == 0);
      EXPECT_EQ(r.streams, streams);
      EXPECT_EQ(r.ordered_copies, ordered && streams > 1);
    }
  }
}

// Automatic chunks hold whole rows, start page-aligned in the host array (their bytes are a
// multiple of 4 KiB) and are chosen once per input layout; repeated runs (which reuse the
// Pipeline's streams) give the same result, with ordered copies too.
TEST_P(PipelineTest, AutomaticChunksArePageAlignedAndRunsRepeat) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Array x = random_host({(std::int64_t(1) << 20) + 7, 3}, true, rng);  // 12 MiB, rows of 12 B
  const std::vector<float> want = reference(x);
  for (bool ordered : {false, true}) {
    SCOPED_TRACE(ordered ? "ordered copies" : "unordered copies");
    PipelineOptions options;
    options.device = device();
    options.progress = ProgressMode::off;
    options.ordered_copies = ordered;
    Pipeline pipeline(twice_plus_one, options);
    std::int64_t first_chunk_bytes = 0;
    for (int run = 0; run < 3; ++run) {
      Array y = pipeline.run(x);
      expect_equal(y.to_vector<float>(), want, "run " + std::to_string(run));
      const PipelineReport& r = pipeline.report();
      EXPECT_EQ(r.chunk_bytes % 4096, 0) << r.str();
      EXPECT_EQ(r.chunk_bytes % 12, 0) << "whole rows: " << r.str();
      EXPECT_EQ(r.chunks, (x.nbytes() + r.chunk_bytes - 1) / r.chunk_bytes) << r.str();
      EXPECT_GT(r.wall_ms, 0.0);
      if (run == 0) first_chunk_bytes = r.chunk_bytes;
      EXPECT_EQ(r.chunk_bytes, first_chunk_bytes) << "the same layout gets the same sizes";
      if (device().is_cuda()) {
        EXPECT_GT(r.chunks, 1) << r.str();
      }
    }
  }
}

TEST_P(PipelineTest, AutomaticSizesAndStridedInput) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Array big = random_host({4000, 6}, false, rng);
  const Array x = big.slice(1, Slice(0, 6, 2));  // non-contiguous rows: copied before chunking
  PipelineOptions options;
  options.device = device();
  options.progress = ProgressMode::off;
  Pipeline pipeline(twice_plus_one, options);
  Array y = pipeline.run(x);
  expect_equal(y.to_vector<float>(), reference(x.contiguous()), "auto-sized pipeline");
  EXPECT_GE(pipeline.report().chunks, 1);
  EXPECT_GE(pipeline.report().streams, 1);
}

TEST_P(PipelineTest, ChunkSourceOfVaryingChunks) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  std::vector<Array> chunks;
  std::vector<float> want;
  for (int i = 0; i < 7; ++i) {
    const std::int64_t rows = std::uniform_int_distribution<std::int64_t>(1, 500)(rng);
    chunks.push_back(random_host({rows, 4}, i % 2 == 0, rng));
    std::vector<float> part = reference(chunks.back());
    want.insert(want.end(), part.begin(), part.end());
  }
  PipelineOptions options;
  options.device = device();
  options.num_streams = 3;
  options.progress = ProgressMode::off;
  Pipeline pipeline(twice_plus_one, options);
  std::size_t next = 0;
  std::vector<float> got;
  pipeline.run([&]() -> std::optional<Array> { return next < chunks.size() ? std::optional<Array>(chunks[next++]) : std::nullopt; },
               [&](std::int64_t row_offset, const Array& chunk) {
                 EXPECT_EQ(row_offset * 4, static_cast<std::int64_t>(got.size()));
                 std::vector<float> part = chunk.to_vector<float>();
                 got.insert(got.end(), part.begin(), part.end());
               });
  expect_equal(got, want, "chunk source");
  EXPECT_EQ(pipeline.report().chunks, 7);

  // A chunk whose rows differ from the first one's.
  std::vector<Array> bad = {random_host({5, 4}, false, rng), random_host({5, 3}, false, rng)};
  next = 0;
  expect_error<ShapeError>([&] {
    pipeline.run([&]() -> std::optional<Array> { return next < bad.size() ? std::optional<Array>(bad[next++]) : std::nullopt; },
                 [](std::int64_t, const Array&) {});
  }, {"Pipeline.run", "chunk 1", "(5, 3)"});
}

TEST_P(PipelineTest, ZeroLengthInputGivesEmptyResult) {
  TESSEL_SKIP_UNAVAILABLE(device());
  PipelineOptions options;
  options.device = device();
  Pipeline pipeline(twice_plus_one, options);
  Array y = pipeline.run(empty({0, 3}, DType::float32, Device::cpu()));
  EXPECT_EQ(y.shape(), (Shape{0, 3}));
  EXPECT_EQ(y.dtype(), DType::float32);
  EXPECT_EQ(pipeline.report().chunks, 0);
}

TEST_P(PipelineTest, BadInputIsRejected) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  auto with = [&](auto set) {
    PipelineOptions o;
    o.device = device();
    set(o);
    return o;
  };
  expect_error<ValueError>([&] { Pipeline(twice_plus_one, with([](PipelineOptions& o) { o.chunk_elems = 0; })); },
                           {"chunk_elems", "positive", "0"});
  expect_error<ValueError>([&] { Pipeline(twice_plus_one, with([](PipelineOptions& o) { o.chunk_bytes = -5; })); },
                           {"chunk_bytes", "-5"});
  expect_error<ValueError>([&] { Pipeline(twice_plus_one, with([](PipelineOptions& o) { o.num_streams = 0; })); },
                           {"num_streams", "positive"});
  expect_error<ValueError>([&] { Pipeline(twice_plus_one, with([](PipelineOptions& o) { o.buffering = 0; })); },
                           {"buffering"});

  const Array x = random_host({100, 2}, false, rng);
  PipelineOptions o = with([](PipelineOptions& opt) { opt.chunk_elems = 2 * 30; });
  // A compute that drops rows, then one whose row shape changes between chunks.
  Pipeline drops([](const Array& c, const Stream&) { return c.slice(0, Slice(0, 1)); }, o);
  expect_error<ShapeError>([&] { drops.run(x); }, {"Pipeline.run", "rows", "chunk 0"});
  int calls = 0;
  Pipeline changes([&](const Array& c, const Stream& s) {
    Array y = twice_plus_one(c, s);
    return calls++ == 0 ? y : y.slice(1, Slice(0, 1));
  }, o);
  expect_error<ShapeError>([&] { changes.run(x); }, {"inconsistently", "chunk 1"});

  Pipeline ok(twice_plus_one, o);
  expect_error<ShapeError>([&] { ok.run(x, empty({50, 2}, DType::float32, Device::cpu())); }, {"output", "too small"});
  expect_error<ShapeError>([&] { ok.run(x, empty({100, 3}, DType::float32, Device::cpu())); }, {"output", "(100, 3)", "(100, 2)"});
  expect_error<DTypeError>([&] { ok.run(x, empty({100, 2}, DType::float64, Device::cpu())); }, {"output", "float64"});
  expect_error<ShapeError>([&] { ok.run(from_vector(std::vector<float>{1.0f}, Shape{}, Device::cpu())); }, {"0-d"});
  if (device().is_cuda()) {
    expect_error<DeviceError>([&] { ok.run(x.to(device())); }, {"host"});
  }
}

TEST_P(PipelineTest, FailureInChunkCancelsWithoutHangOrLeak) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Array x = random_host({2000, 8}, false, rng);
  const Array x_pinned = random_host({2000, 8}, true, rng);
  for (int failing : {0, 3, 9}) {
    for (int streams : {1, 3}) {
      for (const Array* input : {&x, &x_pinned}) {
        SCOPED_TRACE("failing chunk " + std::to_string(failing) + ", streams " + std::to_string(streams));
        PipelineOptions o;
        o.device = device();
        o.chunk_elems = 8 * 200;  // 10 chunks
        o.num_streams = streams;
        o.progress = ProgressMode::off;
        const Usage before = usage(device());
        with_timeout([&] {
          int chunk = 0;
          Pipeline p([&](const Array& c, const Stream& s) {
            if (chunk++ == failing) throw std::runtime_error("injected failure");
            return twice_plus_one(c, s);
          }, o);
          EXPECT_THROW(p.run(*input), std::runtime_error);
          chunk = 0;
          Array out = empty({2000, 8}, DType::float32, Device::cpu());
          EXPECT_THROW(p.run(*input, out), std::runtime_error);
        });
        EXPECT_EQ(usage(device()), before) << "memory is back at its baseline after the failure";
      }
    }
  }
}

TEST_P(PipelineTest, OutOfMemoryMidPipelineNamesTheChunk) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Array x = random_host({1000, 4}, false, rng);
  PipelineOptions o;
  o.device = device();
  o.chunk_elems = 4 * 100;
  o.num_streams = 2;
  const Usage before = usage(device());
  with_timeout([&] {
    int chunk = 0;
    Pipeline p([&](const Array& c, const Stream& s) {
      // Chunk 4 asks for far more memory than any machine has.
      if (chunk++ == 4) return empty({std::int64_t(1) << 48}, DType::float32, device(), s);
      return twice_plus_one(c, s);
    }, o);
    expect_error<OutOfMemory>([&] { p.run(x); }, {"Pipeline.run", "chunk 4", "rows 400..500"});
  });
  EXPECT_EQ(usage(device()), before);
}

TEST_P(PipelineTest, ProgressBarOnlyWhenAsked) {
  TESSEL_SKIP_UNAVAILABLE(device());
  TESSEL_SEEDED_RNG(rng);
  const Array x = random_host({64, 4}, false, rng);
  PipelineOptions o;
  o.device = device();
  o.chunk_elems = 16;
  o.progress = ProgressMode::on;
  Pipeline p(twice_plus_one, o);
  ::testing::internal::CaptureStderr();
  Array y = p.run(x);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("[pipeline]"), std::string::npos) << err;  // the final update always prints
  EXPECT_NE(err.find("16/16 chunks"), std::string::npos) << err;
  o.progress = ProgressMode::off;
  Pipeline quiet(twice_plus_one, o);
  ::testing::internal::CaptureStderr();
  quiet.run(x);
  EXPECT_EQ(::testing::internal::GetCapturedStderr().find("[pipeline]"), std::string::npos);
  expect_equal(y.to_vector<float>(), reference(x), "with progress");
}

INSTANTIATE_TEST_SUITE_P(All, PipelineTest, ::testing::ValuesIn(tessel::testing::all_backends()),
                         tessel::testing::backend_name);

}  // namespace
