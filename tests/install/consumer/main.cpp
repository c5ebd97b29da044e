#include <cstdio>
#include <string>

#include <tessel/tessel.hpp>

int main() {
  // Works with or without a GPU: the default device is the CPU when CUDA is unavailable.
  tessel::Stream stream = tessel::current_stream();
  tessel::Event start(stream.device()), stop(stream.device());
  start.record(stream);
  stop.record(stream);
  std::printf("tessel %s on %s, %.3f ms\n", tessel::version(), stream.device().str().c_str(),
              static_cast<double>(start.elapsed_ms(stop)));
  return std::string(tessel::version()).empty() ? 1 : 0;
}
