// Streams, events, pipelines and CUDA graphs from C++ (docs/cpp/index.rst). On a machine without
// a GPU the same code runs on the CPU backend: the pipeline runs chunk by chunk on the host and a
// graph's replay runs the captured function again.
#include <tessel/tessel.hpp>

#include <cstdio>
#include <iostream>
#include <stdexcept>

using namespace tessel;

static void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("pipelines example: ") + what);
}

int main() {
  const Device device = default_device();

  // doc:begin streams
  Stream s = Stream::create(device, /*priority=*/-1);   // a new stream (the CPU stream on the CPU)
  Event start(device), stop(device);
  start.record(s);
  Array x = ones({1 << 20}, DType::float32, device, s); // work is queued on s
  Array y = multiply(x, 3.0, std::nullopt, s);          // the stream is the last argument
  stop.record(s);
  stop.synchronize();                                   // the host waits for s up to `stop`
  std::printf("%.3f ms on %s\n", start.elapsed_ms(stop), s.device().str().c_str());
  // doc:end streams
  check(sum(y).item<float>() == 3.0f * (1 << 20), "stream work");

  // doc:begin pipeline
  // Host data streamed through the device in chunks: copy in, compute, copy out, overlapped.
  Array host_in = arange(0, 1 << 22, 1, DType::float32, Device::cpu());
  FusedKernel twice_plus_one = fuse([](const std::vector<Sym>& v) { return v[0] * 2 + 1; }, 1);
  PipelineOptions options;
  options.chunk_elems = 1 << 20;                        // automatic when unset
  Pipeline pipeline([&](const Array& chunk, const Stream& stream) {
    return twice_plus_one({chunk}, std::nullopt, stream);
  }, options);
  Array host_out = pipeline.run(host_in);               // a host array of the same shape
  std::cout << pipeline.report().str() << "\n";         // GB/s each way, overlap, chunks
  // doc:end pipeline
  check(host_out.device().is_cpu() && host_out.shape() == host_in.shape(), "pipeline shape");
  check(host_out.index({100}).item<float>() == 201.0f, "pipeline values");
  check(pipeline.report().chunks == 4, "pipeline chunks");

  // doc:begin graph
  Stream capture_stream = Stream::create(device);
  Array in = zeros({1024}, DType::float32, device, capture_stream);
  auto step = [&] { return add(multiply(in, 2.0, std::nullopt, capture_stream), 1.0, std::nullopt, capture_stream); };
  Array out = step();                                   // once eagerly: first launches load kernels
  // Records the work (on the CPU: runs it once); replay() runs it again on in's current contents.
  Graph graph = Graph::capture(capture_stream, [&] { out = step(); });
  fill(in, 5.0, capture_stream);
  graph.replay(capture_stream);
  capture_stream.synchronize();
  // doc:end graph
  check(out.index({0}).item<float>() == 11.0f, "graph replay");
  std::printf("pipelines: ok (%s)\n", device.str().c_str());
  return 0;
}
