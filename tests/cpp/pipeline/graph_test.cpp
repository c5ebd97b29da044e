// Graphs: replay equals eager execution on new data written into the captured inputs; ops that
// cannot be captured name themselves; replay after the inputs were freed is an error; captured
// allocations come from the reservation; the cache captures once and replays afterwards.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "testing.hpp"
#include "tessel/tessel.hpp"

namespace {

using namespace tessel;
using tessel::testing::expect_error;

// TESSEL_ALLOCATOR=direct (one cudaMalloc/cudaFree per buffer, for compute-sanitizer) keeps no
// cache, so there is no reservation for a capture to allocate from: a capture whose ops allocate
// is refused by design (OutOfMemory naming "caching disabled"; DirectAllocatorRefusesCapture
// checks it). The tests whose captured ops allocate skip in that mode instead of failing.
bool direct_allocator(Device device) { return device.is_cuda() && !device_allocator(device.index).options().caching; }

#define SKIP_UNDER_DIRECT_ALLOCATOR()                                                                   \
  do {                                                                                                  \
    if (direct_allocator(device())) {                                                                   \
      GTEST_SKIP() << "TESSEL_ALLOCATOR=direct: the captured ops allocate, and graph capture needs the " \
                      "caching allocator's reservation (the direct allocator refuses, by design)";      \
    }                                                                                                   \
  } while (0)

class GraphTest : public tessel::testing::BackendTest {
 protected:
  Stream stream() const { return device().is_cuda() ? Stream::create(device()) : Stream::cpu(); }
};

std::vector<float> random_values(std::size_t n, std::mt19937_64& rng) {
  std::vector<float> v(n);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (float& e : v) e = dist(rng);
  return v;
}

// A small chain of ops: ((x * 2 + b) * x - 3) / 4, every step a separate kernel.
Array chain(const Array& x, const Array& b, const Stream& s) {
  Array t = add(multiply(x, Scalar(2.0f), std::nullopt, s), b, std::nullopt, s);
  t = subtract(multiply(t, x, std::nullopt, s), Scalar(3.0f), std::nullopt, s);
  return divide(t, Scalar(4.0f), std::nullopt, s);
}

std::vector<float> chain_reference(const std::vector<float>& x, const std::vector<float>& b) {
  std::vector<float> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = ((x[i] * 2.0f + b[i]) * x[i] - 3.0f) / 4.0f;
  return y;
}

TEST_P(GraphTest, ReplayEqualsEagerOnNewData) {
  TESSEL_SKIP_UNAVAILABLE(device());
  SKIP_UNDER_DIRECT_ALLOCATOR();
  TESSEL_SEEDED_RNG(rng);
  const Stream s = stream();
  const std::size_t n = 1000;
  Array x = from_vector(random_values(n, rng), {static_cast<std::int64_t>(n)}, device(), s);
  Array b = from_vector(random_values(n, rng), {static_cast<std::int64_t>(n)}, device(), s);
  Array eager = chain(x, b, s);  // warm-up outside the capture (first launches, kernel loads)
  Array y;
  EXPECT_FALSE(s.capturing());
  bool capturing_inside = false;
  Graph g = Graph::capture(s, [&] {
    capturing_inside = s.capturing();
    y = chain(x, b, s);
  });
  EXPECT_EQ(capturing_inside, device().is_cuda());  // the CPU "capture" runs the ops as they come
  EXPECT_FALSE(s.capturing());
  ASSERT_TRUE(y.defined());
  for (int round = 0; round < 3; ++round) {
    const std::vector<float> xv = random_values(n, rng), bv = random_values(n, rng);
    copyto(x, from_vector(xv, {static_cast<std::int64_t>(n)}, Device::cpu()), s);
    copyto(b, from_vector(bv, {static_cast<std::int64_t>(n)}, Device::cpu()), s);
    g.replay(s);
    s.synchronize();
    const std::vector<float> got = y.to_vector<float>();
    const std::vector<float> want = chain_reference(xv, bv);
    const std::vector<float> eager_now = chain(x, b, s).to_vector<float>();
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(got[i], want[i]) << "round " << round << " element " << i;
      ASSERT_EQ(got[i], eager_now[i]) << "round " << round << " element " << i;
    }
  }
  EXPECT_EQ(g.num_replays(), 3);
  if (device().is_cuda()) {
    EXPECT_GE(g.num_nodes(), 5);  // one kernel per op
    EXPECT_GT(g.held_bytes(), 0);  // the temporaries and y belong to the graph
  }
}

// matmul's autotune on first use synchronizes and allocates, so a capture does not tune: the
// captured product replays the heuristic's choice, and the first call outside the capture tunes.
TEST_P(GraphTest, MatmulAutotuneOnFirstUseSkipsTheCapture) {
  TESSEL_SKIP_UNAVAILABLE(device());
  SKIP_UNDER_DIRECT_ALLOCATOR();
  TESSEL_SEEDED_RNG(rng);
  const std::string folder = (std::filesystem::temp_directory_path() /
                              ("tessel-graph-autotune-" + std::to_string(rng() % 1000000000))).string();
  std::filesystem::create_directories(folder);
  set_matmul_cache_dir(folder);
  clear_matmul_memory_cache();
  set_matmul_autotune(true);
  const Stream s = stream();
  const std::int64_t m = 40, k = 24, n = 32;
  Array a = from_vector(random_values(m * k, rng), {m, k}, device(), s);
  Array b = from_vector(random_values(k * n, rng), {k, n}, device(), s);
  const std::vector<float> want = matmul(a.to(Device::cpu()), b.to(Device::cpu())).to_vector<float>();
  Array y;
  Graph g = Graph::capture(s, [&] { y = matmul(a, b, {}, Array(), s); });
  const auto files = [&] {
    int count = 0;
    for (const auto& entry : std::filesystem::directory_iterator(folder)) count += entry.path().extension() == ".json";
    return count;
  };
  EXPECT_EQ(files(), 0) << "tuned inside the capture";
  g.replay(s);
  s.synchronize();
  const std::vector<float> got = y.to_vector<float>();
  const std::vector<float> again = matmul(a, b, {}, Array(), s).to_vector<float>();  // tunes here (CUDA)
  set_matmul_autotune(false);
  const bool tuned = files() == 1;
  set_matmul_cache_dir("");
  clear_matmul_memory_cache();
  std::error_code ignored;
  std::filesystem::remove_all(folder, ignored);
  EXPECT_EQ(tuned, device().is_cuda());
  for (std::size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-4f * (1.0f + std::fabs(want[i]))) << "replay, element " << i;
    ASSERT_NEAR(again[i], want[i], 1e-4f * (1.0f + std::fabs(want[i]))) << "after the capture, element " << i;
  }
}

TEST_P(GraphTest, GraphMemoryReturnsWhenGraphDies) {
  TESSEL_SKIP_UNAVAILABLE(device());
  SKIP_UNDER_DIRECT_ALLOCATOR();
  TESSEL_SEEDED_RNG(rng);
  const Stream s = stream();
  Array x = from_vector(random_values(4096, rng), {4096}, device(), s);
  Array b = from_vector(random_values(4096, rng), {4096}, device(), s);
  chain(x, b, s);
  s.synchronize();
  auto allocated = [&] {
    return device().is_cuda() ? device_allocator(device().index).stats().allocated_bytes : host_memory_stats().allocated_bytes;
  };
  const std::int64_t before = allocated();
  {
    Array y;
    Graph g = Graph::capture(s, [&] { y = chain(x, b, s); });
    g.replay();
    s.synchronize();
  }
  s.synchronize();
  EXPECT_EQ(allocated(), before);
}

TEST_P(GraphTest, CacheCapturesOnceThenReplays) {
  TESSEL_SKIP_UNAVAILABLE(device());
  SKIP_UNDER_DIRECT_ALLOCATOR();
  TESSEL_SEEDED_RNG(rng);
  const Stream s = stream();
  Array x = from_vector(random_values(256, rng), {256}, device(), s);
  Array b = from_vector(random_values(256, rng), {256}, device(), s);
  Array y = empty({256}, DType::float32, device(), s);
  chain(x, b, s);
  GraphCache cache(2);
  // Writes into y (out=), so replays and captures leave their result in the same array.
  auto body = [&] { copyto(y, chain(x, b, s), s); };
  const std::string key = graph_key({x, b, y});
  EXPECT_FALSE(cache.capture_or_replay(key, s, body));
  EXPECT_TRUE(cache.capture_or_replay(key, s, body));
  s.synchronize();
  const std::vector<float> want = chain_reference(x.to_vector<float>(), b.to_vector<float>());
  const std::vector<float> got = y.to_vector<float>();
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << i;
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_FALSE(cache.capture_or_replay(key + "2", s, body));
  EXPECT_FALSE(cache.capture_or_replay(key + "3", s, body));
  EXPECT_EQ(cache.size(), 2u);  // bounded: the least recently used went
  EXPECT_NE(graph_key({x}), graph_key({b}));  // different pointers, different keys
  expect_error<ValueError>([] { GraphCache bad(0); }, {"capacity"});
}

// A key built from pointers can come back after its arrays were freed (the allocator reuses
// addresses): the cache must capture again instead of replaying a graph over freed buffers.
TEST_P(GraphTest, CacheRecapturesWhenTheCapturedBuffersWereFreed) {
  TESSEL_SKIP_UNAVAILABLE(device());
  SKIP_UNDER_DIRECT_ALLOCATOR();
  if (device().is_cpu()) GTEST_SKIP() << "CPU graphs rerun their function and hold no buffers";
  TESSEL_SEEDED_RNG(rng);
  const Stream s = stream();
  GraphCache cache(4);
  Array y = empty({256}, DType::float32, device(), s);
  {
    Array x = from_vector(random_values(256, rng), {256}, device(), s);
    EXPECT_FALSE(cache.capture_or_replay("same key", s, [&] { copyto(y, chain(x, x, s), s); }));
  }  // x is freed: the cached graph is stale
  Array x2 = from_vector(random_values(256, rng), {256}, device(), s);
  EXPECT_FALSE(cache.capture_or_replay("same key", s, [&] { copyto(y, chain(x2, x2, s), s); }));
  s.synchronize();
  const std::vector<float> v = x2.to_vector<float>();
  const std::vector<float> want = chain_reference(v, v);
  const std::vector<float> got = y.to_vector<float>();
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << i;
}

TEST_P(GraphTest, EmptyGraphAndBadOptions) {
  TESSEL_SKIP_UNAVAILABLE(device());
  expect_error<ValueError>([] { Graph().replay(); }, {"Graph.replay", "empty"});
  GraphOptions o;
  o.reserve_bytes = -1;
  expect_error<ValueError>([&] { Graph::capture(stream(), [] {}, o); }, {"reserve_bytes"});
}

TEST(GraphCpu, ScopedCaptureOnTheCpuCannotReplay) {
  GraphCapture capture(Stream::cpu());
  Graph g = capture.finish();
  expect_error<ValueError>([&] { g.replay(); }, {"Graph.replay", "GraphCapture", "CPU"});
}

// ---- CUDA only ----

TEST_P(GraphTest, UncapturableOpsNameThemselves) {
  TESSEL_SKIP_UNAVAILABLE(device());
  SKIP_UNDER_DIRECT_ALLOCATOR();
  if (device().is_cpu()) GTEST_SKIP() << "capture errors are about CUDA graphs";
  TESSEL_SEEDED_RNG(rng);
  const Stream s = stream();
  Array x = from_vector(random_values(64, rng), {64}, device(), s);
  chain(x, x, s);
  s.synchronize();
  std::vector<float> host(64);
  expect_error<Error>([&] { Graph::capture(s, [&] { x.to_host(host.data()); }); }, {"to_host", "captured"});
  expect_error<Error>([&] { Graph::capture(s, [&] { s.synchronize(); }); }, {"Stream.synchronize", "captured"});
  expect_error<Error>([&] { Graph::capture(s, [&] { x.to(Device::cpu(), s); }); }, {"transfer", "captured"});
  expect_error<Error>([&] { Graph::capture(s, [&] { multiply(x, Scalar(2.0f), std::nullopt, s).wait(); }); }, {"Array.wait"});
  // The stream is usable again, and a good capture still works after the failures.
  Array y;
  Graph g = Graph::capture(s, [&] { y = multiply(x, Scalar(3.0f), std::nullopt, s); });
  g.replay();
  s.synchronize();
  const std::vector<float> xv = x.to_vector<float>(), yv = y.to_vector<float>();
  for (std::size_t i = 0; i < xv.size(); ++i) ASSERT_EQ(yv[i], xv[i] * 3.0f);
}

// A kernel used for the first time inside a capture is looked up and loaded there (the cache,
// the load, the driver-function lookup): the capture must not break, and the replay must run it
// on new data.
TEST_P(GraphTest, KernelLoadedInsideACapture) {
  TESSEL_SKIP_UNAVAILABLE(device());
  if (device().is_cpu()) GTEST_SKIP() << "RawKernel needs CUDA";
  TESSEL_SEEDED_RNG(rng);
  const Stream s = stream();
  const std::int64_t n = 1000;
  Array x = from_vector(random_values(n, rng), {n}, device(), s);
  Array y = from_vector(random_values(n, rng), {n}, device(), s);
  const jit::RawKernel k(R"(
extern "C" __global__ void graph_first_use(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i] - 1.0f;
})",
                         "graph_first_use");
  s.synchronize();
  Graph g = Graph::capture(s, [&] { k.launch(8, 128, {x.data(), y.data(), static_cast<int>(n)}, 0, s); });
  for (int round = 0; round < 2; ++round) {
    const std::vector<float> xv = random_values(static_cast<std::size_t>(n), rng);
    copyto(x, from_vector(xv, {n}, Device::cpu()), s);
    fill(y, std::nanf(""), s);
    g.replay(s);
    s.synchronize();
    const std::vector<float> got = y.to_vector<float>();
    for (std::size_t i = 0; i < xv.size(); ++i) ASSERT_EQ(got[i], 2.0f * xv[i] - 1.0f) << "round " << round << " " << i;
  }
  EXPECT_TRUE(k.kernel(device()).launches_through_driver());
}

TEST_P(GraphTest, ReplayAfterInputsFreedIsAnError) {
  TESSEL_SKIP_UNAVAILABLE(device());
  SKIP_UNDER_DIRECT_ALLOCATOR();
  if (device().is_cpu()) GTEST_SKIP() << "the CPU replays by running the function again";
  TESSEL_SEEDED_RNG(rng);
  const Stream s = stream();
  Array x = from_vector(random_values(128, rng), {128}, device(), s);
  chain(x, x, s);
  Array y;
  Graph g = Graph::capture(s, [&] { y = chain(x, x, s); });
  g.replay();
  s.synchronize();
  x = Array();  // the captured input goes
  expect_error<Error>([&] { g.replay(); }, {"Graph.replay", "freed", "512"});
}

TEST_P(GraphTest, CaptureAllocationsComeFromTheReservation) {
  TESSEL_SKIP_UNAVAILABLE(device());
  SKIP_UNDER_DIRECT_ALLOCATOR();
  if (device().is_cpu()) GTEST_SKIP() << "no reservation on the CPU";
  const Stream s = stream();
  const MemoryStats before = device_allocator(device().index).stats();
  GraphOptions o;
  o.reserve_bytes = 4 << 20;
  Array y;
  Graph g = Graph::capture(s, [&] { y = zeros({1000}, DType::float32, device(), s); }, o);
  const MemoryStats after = device_allocator(device().index).stats();
  // Only the reservation touched the raw allocator (before the capture began).
  EXPECT_LE(after.raw_allocations - before.raw_allocations, 2);
  expect_error<OutOfMemory>([&] {
    Graph::capture(s, [&] { zeros({std::int64_t(1) << 28}, DType::float32, device(), s); }, o);  // 1 GiB
  }, {"graph capture", "reserve"});
  g.replay();
  s.synchronize();
  EXPECT_EQ(y.to_vector<float>(), std::vector<float>(1000, 0.0f));
}

// The other side of SKIP_UNDER_DIRECT_ALLOCATOR: under TESSEL_ALLOCATOR=direct a capture that
// allocates raises a clear OutOfMemory (never calls cudaMalloc mid-capture), and the stream works
// afterwards.
TEST_P(GraphTest, DirectAllocatorRefusesCaptureThatAllocates) {
  TESSEL_SKIP_UNAVAILABLE(device());
  if (!direct_allocator(device())) GTEST_SKIP() << "runs under TESSEL_ALLOCATOR=direct on a CUDA device only";
  TESSEL_SEEDED_RNG(rng);
  const Stream s = stream();
  const std::vector<float> xv = random_values(64, rng);
  Array x = from_vector(xv, {64}, device(), s);
  expect_error<OutOfMemory>([&] { Graph::capture(s, [&] { multiply(x, Scalar(2.0f), std::nullopt, s); }); },
                            {"caching disabled", "graph capture"});
  const std::vector<float> y = multiply(x, Scalar(2.0f), std::nullopt, s).to_vector<float>();
  for (std::size_t i = 0; i < xv.size(); ++i) ASSERT_EQ(y[i], xv[i] * 2.0f) << i;
}

INSTANTIATE_TEST_SUITE_P(All, GraphTest, ::testing::ValuesIn(tessel::testing::all_backends()),
                         tessel::testing::backend_name);

}  // namespace
