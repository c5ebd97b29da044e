// Profiling from C++: a profile::Session around some work, the op table and a Chrome trace, and
// a user range (docs/guide/profiling.rst).
// doc:begin profile
#include <tessel/tessel.hpp>

#include <filesystem>
#include <iostream>

int main() {
  using namespace tessel;
  Array x = random::uniform({512, 512}, -1, 1);
  profile::Session session;  // records until stop(); sessions do not nest
  for (int i = 0; i < 3; ++i) {
    TESSEL_RANGE("step");  // a user range: contains the ops below in the trace and the table
    Array y = matmul(x, x);
    x = tanh(y / 512.0);
  }
  session.stop();
  std::cout << session.table("gpu_time", "op");
  const auto trace = std::filesystem::temp_directory_path() / "tessel-example-trace.json";
  session.export_chrome_trace(trace.string());  // open in https://ui.perfetto.dev
  std::cout << "trace: " << trace.string() << " (" << session.ops().size() << " ops)\n";
}
// doc:end profile
