// Pipeline and CUDA graph layer: ts.Pipeline (host -> device -> compute -> host in chunks over
// several streams), ts.PipelineReport, ts.cuda.Graph and the capture behind `with ts.cuda.graph()`.
//
// GIL: the blocking C++ parts (Pipeline::run, Graph::capture's synchronize, replays) run with
// the GIL released; the Python callables (compute, the chunk iterator, on_chunk, a captured
// function) are called from the thread that called run/capture/replay, with the GIL taken only
// for the call. tessel never calls them from a CUDA callback or another thread.
#include <nanobind/stl/function.h>
#include <nanobind/stl/shared_ptr.h>

#include <memory>
#include <mutex>
#include <utility>

#include "common.hpp"
#include "tessel/ops/cast.hpp"
#include "tessel/pipeline/graph.hpp"
#include "tessel/pipeline/pipeline.hpp"

namespace tessel::python {
namespace {

// A Python object shared by C++ closures. The closures (std::function) are copied by the C++
// pipeline with the GIL released, so they hold a shared_ptr (copying it touches no Python
// reference count); the last owner drops the Python reference with the GIL taken.
using SharedObject = std::shared_ptr<nb::object>;
SharedObject share(nb::handle h) {
  return SharedObject(new nb::object(nb::borrow(h)), [](nb::object* p) {
    nb::gil_scoped_acquire gil;
    delete p;
  });
}

// Python 3.11+: adds "note" to a Python exception (shown under its message), else nothing.
void add_note(const nb::python_error& e, const std::string& note) {
  nb::handle value = e.value();
  if (value.is_valid() && nb::hasattr(value, "add_note")) {
    try {
      value.attr("add_note")(note);
    } catch (const nb::python_error&) {
      // a note is a courtesy: never replace the user's exception by one about the note
    }
  }
}

// True for objects that are arrays themselves (tessel, NumPy, anything with an array
// protocol), as opposed to iterables of chunks.
bool has_array_protocol(nb::handle h) {
  return is_array(h) || nb::hasattr(h, "__array_interface__") || nb::hasattr(h, "__array_struct__") ||
         nb::hasattr(h, "__dlpack__") || nb::hasattr(h, "__cuda_array_interface__");
}

// A host array for the pipeline: tessel arrays as they are; NumPy (and other host arrays) as a
// zero-copy tessel CPU view; device arrays (CuPy, torch CUDA) are imported where they live, so
// the pipeline names the problem (DeviceError) instead of copying silently.
Array host_array(nb::handle h, const char* what) {
  if (is_array(h)) return as_array(h);
  if (!has_array_protocol(h)) {
    throw nb::type_error(("Pipeline.run: " + std::string(what) + " must be an array (tessel, NumPy, ...), got " +
                          nb::inst_name(h).c_str())
                             .c_str());
  }
  bool on_host = !nb::hasattr(h, "__cuda_array_interface__");
  if (on_host && nb::hasattr(h, "__dlpack_device__")) {
    const int type = nb::cast<int>(h.attr("__dlpack_device__")()[0]);
    on_host = type == 1 || type == 3;  // kDLCPU, kDLCUDAHost (pinned)
  }
  return on_host ? to_array(h, Device::cpu()) : to_array(h);
}

// A host array handed to Python: a NumPy array (zero-copy, through DLPack) in NumPy mode.
nb::object to_python(const Array& a, bool numpy) {
  nb::object obj = nb::cast(a);
  if (!numpy) return obj;
  return numpy_module().attr("from_dlpack")(obj);
}

ProgressMode to_progress(nb::handle h) {
  if (h.is_none()) return ProgressMode::automatic;
  if (nb::isinstance<nb::bool_>(h)) return nb::cast<bool>(h) ? ProgressMode::on : ProgressMode::off;
  throw nb::type_error(("Pipeline: progress must be None (automatic), True or False, got " +
                        std::string(nb::inst_name(h).c_str()))
                           .c_str());
}

// ts.Pipeline: the options and the Python compute callable; a C++ Pipeline is made per run
// (chunk_size counts rows, which depend on the input's row size).
struct PyPipeline {
  SharedObject compute;
  std::optional<std::int64_t> chunk_rows;
  std::optional<std::int64_t> chunk_bytes;
  std::optional<int> streams;
  int buffering = 2;
  ProgressMode progress = ProgressMode::automatic;
  Device device;
  std::optional<PipelineReport> report;

  PipelineOptions options_for(std::int64_t row_elems) const {
    PipelineOptions o;
    if (chunk_rows) o.chunk_elems = *chunk_rows * std::max<std::int64_t>(1, row_elems);
    o.chunk_bytes = chunk_bytes;
    o.num_streams = streams;
    o.buffering = buffering;
    o.progress = progress;
    o.device = device;
    return o;
  }

  // The C++ pipeline of the last array run, kept so that later runs over rows of the same size
  // reuse its streams and sizes; `busy` makes a concurrent run (another thread) build its own.
  // Each C++ pipeline numbers its chunks with its own counter (for the errors' "chunk k"): the
  // kept one's is reset at every run; a concurrent run's or an iterable run's starts at 0.
  std::shared_ptr<Pipeline> kept;
  std::shared_ptr<std::int64_t> kept_counter;
  std::int64_t kept_row_elems = -1;
  std::shared_ptr<std::mutex> busy = std::make_shared<std::mutex>();

  // compute as the C++ pipeline calls it: chunk k -> the Python callable's result, where k
  // counts the calls in `counter`.
  Pipeline::Compute make_compute(std::shared_ptr<std::int64_t> counter) const {
    auto fn = compute;
    return [fn, counter](const Array& chunk, const Stream&) -> Array {
      nb::gil_scoped_acquire gil;
      const std::int64_t k = (*counter)++;
      nb::object result;
      try {
        result = (*fn)(nb::cast(chunk));
      } catch (const nb::python_error& e) {
        add_note(e, "(raised by the Pipeline's compute for chunk " + std::to_string(k) + ")");
        throw;
      }
      if (is_array(result)) return as_array(result);
      if (!has_array_protocol(result)) {
        throw nb::type_error(("Pipeline: compute must return an array, got " + std::string(nb::inst_name(result).c_str()) +
                              " for chunk " + std::to_string(k))
                                 .c_str());
      }
      return to_array(result);  // DLPack / CUDA array interface producers, zero-copy
    };
  }
};

// Rows [offset, offset + rows) of `out` (a host Array) <- chunk; ShapeError when out is too small.
void copy_rows(const Array& out, std::int64_t offset, const Array& chunk) {
  const std::int64_t rows = chunk.dim(0);
  if (out.ndim() == 0 || offset + rows > out.dim(0)) {
    throw ShapeError("Pipeline.run: the output has shape " + shape_str(out.shape()) + ", too small for rows " +
                     std::to_string(offset) + ".." + std::to_string(offset + rows) + " of the result");
  }
  copyto(out.slice(0, Slice(offset, offset + rows)), chunk);
}

nb::object run_pipeline(PyPipeline& self, nb::handle input, nb::handle out, nb::handle on_chunk) {
  if (!out.is_none() && !on_chunk.is_none()) {
    throw tessel::ValueError("Pipeline.run: give out or on_chunk, not both");
  }
  if (!on_chunk.is_none() && !PyCallable_Check(on_chunk.ptr())) {
    throw nb::type_error(("Pipeline.run: on_chunk must be callable, got " + std::string(nb::inst_name(on_chunk).c_str())).c_str());
  }
  if (!self.compute) throw tessel::ValueError("Pipeline.run: the compute function was cleared");
  SharedObject callback = on_chunk.is_none() ? nullptr : share(on_chunk);
  std::optional<Array> out_array;
  if (!out.is_none()) {
    out_array = host_array(out, "out");
    check_writable(*out_array, "Pipeline.run(out=)");
  }

  // Each chunk's result goes to Python as a copy: the C++ chunk may be a staging buffer that
  // the next chunk reuses, and Python code may keep what it is given.
  auto deliver = [callback](bool numpy) {
    return [callback, numpy](std::int64_t row, const Array& chunk) {
      nb::gil_scoped_acquire gil;
      (*callback)(row, to_python(chunk.copy(), numpy));
    };
  };

  if (has_array_protocol(input)) {
    const bool numpy = !is_array(input);
    const Array host = host_array(input, "the input");
    const std::int64_t row_elems = host.ndim() > 0 ? numel(Shape(host.shape().begin() + 1, host.shape().end())) : 1;
    std::unique_lock<std::mutex> reuse(*self.busy, std::try_to_lock);
    std::shared_ptr<Pipeline> run_pipeline;
    if (reuse.owns_lock()) {
      if (!self.kept || self.kept_row_elems != row_elems) {
        self.kept_counter = std::make_shared<std::int64_t>(0);
        self.kept = std::make_shared<Pipeline>(self.make_compute(self.kept_counter), self.options_for(row_elems));
        self.kept_row_elems = row_elems;
      }
      *self.kept_counter = 0;
      run_pipeline = self.kept;
    } else {
      run_pipeline = std::make_shared<Pipeline>(self.make_compute(std::make_shared<std::int64_t>(0)),
                                                self.options_for(row_elems));
    }
    Pipeline& pipeline = *run_pipeline;
    struct KeepReport {  // the report of this run, also when it fails (the chunks done so far)
      PyPipeline& self;
      Pipeline& pipeline;
      ~KeepReport() { self.report = pipeline.report(); }
    } keep{self, pipeline};
    if (out_array) {
      {
        nb::gil_scoped_release release;
        pipeline.run(host, *out_array);
      }
      return nb::borrow(out);
    }
    if (callback) {
      const Pipeline::ChunkCallback on = deliver(numpy);
      nb::gil_scoped_release release;
      pipeline.run(host, on);
      return nb::none();
    }
    Array result;
    {
      nb::gil_scoped_release release;
      result = pipeline.run(host);
    }
    return to_python(result, numpy);
  }

  // An iterable of host chunks.
  nb::object iterator;
  try {
    iterator = nb::iter(input);
  } catch (const nb::python_error&) {
    throw nb::type_error(("Pipeline.run: expected a host array or an iterable of host chunks, got " +
                          std::string(nb::inst_name(input).c_str()))
                             .c_str());
  }
  auto source_state = share(iterator);
  auto numpy_mode = std::make_shared<int>(-1);  // decided by the first chunk: tessel or not
  const Pipeline::ChunkSource next = [source_state, numpy_mode]() -> std::optional<Array> {
    nb::gil_scoped_acquire gil;
    PyObject* item = PyIter_Next(source_state->ptr());
    if (item == nullptr) {
      if (PyErr_Occurred()) throw nb::python_error();
      return std::nullopt;
    }
    nb::object chunk = nb::steal(item);
    if (*numpy_mode < 0) *numpy_mode = is_array(chunk) ? 0 : 1;
    return host_array(chunk, "a chunk");
  };
  PipelineOptions options = self.options_for(1);
  options.chunk_elems.reset();  // the chunks are given
  Pipeline pipeline(self.make_compute(std::make_shared<std::int64_t>(0)), options);
  struct KeepReport {
    PyPipeline& self;
    Pipeline& pipeline;
    ~KeepReport() { self.report = pipeline.report(); }
  } keep{self, pipeline};
  if (callback) {
    // numpy_mode is known once the first chunk has been read, before its result is delivered.
    const Pipeline::ChunkCallback on = [callback, numpy_mode](std::int64_t row, const Array& chunk) {
      nb::gil_scoped_acquire gil;
      (*callback)(row, to_python(chunk.copy(), *numpy_mode == 1));
    };
    nb::gil_scoped_release release;
    pipeline.run(next, on);
    return nb::none();
  }
  if (out_array) {
    const Array target = *out_array;
    std::int64_t rows = 0;
    {
      nb::gil_scoped_release release;
      pipeline.run(next, [&target, &rows](std::int64_t row, const Array& chunk) {
        copy_rows(target, row, chunk);
        rows = row + chunk.dim(0);
      });
    }
    if (target.ndim() == 0 || rows != target.dim(0)) {
      throw ShapeError("Pipeline.run: the output has shape " + shape_str(target.shape()) + " but the chunks gave " +
                       std::to_string(rows) + " rows");
    }
    return nb::borrow(out);
  }
  // Collect the pieces, then one host array (the total size is known only at the end).
  std::vector<Array> pieces;
  {
    nb::gil_scoped_release release;
    pipeline.run(next, [&pieces](std::int64_t, const Array& chunk) { pieces.push_back(chunk.copy()); });
  }
  const bool numpy = *numpy_mode == 1;
  if (pieces.empty()) return to_python(empty(Shape{0}, DType::float32, Device::cpu()), numpy);
  Array result;
  {
    nb::gil_scoped_release release;
    result = pieces.size() == 1 ? pieces.front() : concatenate(pieces, 0);
  }
  return to_python(result, numpy);
}

// Garbage collection: a compute closure that refers back to its Pipeline is a reference cycle
// the collector can see and break (nanobind's documented tp_traverse/tp_clear pattern).
int pipeline_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  PyPipeline* p = nb::inst_ptr<PyPipeline>(self);
  if (p->compute) Py_VISIT(p->compute->ptr());
  return 0;
}

int pipeline_clear(PyObject* self) {
  if (nb::inst_ready(self)) {
    PyPipeline* p = nb::inst_ptr<PyPipeline>(self);
    p->compute.reset();
    p->kept.reset();  // its compute holds the same callable
  }
  return 0;
}

PyType_Slot pipeline_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(pipeline_traverse)},
                                {Py_tp_clear, reinterpret_cast<void*>(pipeline_clear)},
                                {0, nullptr}};

nb::dict report_dict(const PipelineReport& r) {
  nb::dict d;
  d["h2d_GBps"] = r.h2d_GBps;
  d["d2h_GBps"] = r.d2h_GBps;
  d["compute_ms"] = r.compute_ms;
  d["wall_ms"] = r.wall_ms;
  d["throughput_GBps"] = r.throughput_GBps;
  d["overlap_percent"] = r.overlap_percent;
  d["chunks"] = r.chunks;
  d["chunk_bytes"] = r.chunk_bytes;
  d["input_bytes"] = r.input_bytes;
  d["output_bytes"] = r.output_bytes;
  d["streams"] = r.streams;
  d["pageable_input"] = r.pageable_input;
  d["pageable_output"] = r.pageable_output;
  d["device"] = r.device;
  return d;
}

void register_pipeline_class(nb::module_& m) {
  nb::class_<PipelineReport>(m, "PipelineReport", "What the last Pipeline.run achieved: the link and compute rates it reached.")
      .def_ro("h2d_GBps", &PipelineReport::h2d_GBps, "input bytes / time the host->device copies were busy")
      .def_ro("d2h_GBps", &PipelineReport::d2h_GBps, "output bytes / time the device->host copies were busy")
      .def_ro("compute_ms", &PipelineReport::compute_ms, "time compute was busy (union over streams)")
      .def_ro("wall_ms", &PipelineReport::wall_ms)
      .def_ro("throughput_GBps", &PipelineReport::throughput_GBps, "input bytes / wall time")
      .def_ro("overlap_percent", &PipelineReport::overlap_percent)
      .def_ro("chunks", &PipelineReport::chunks)
      .def_ro("chunk_bytes", &PipelineReport::chunk_bytes)
      .def_ro("input_bytes", &PipelineReport::input_bytes)
      .def_ro("output_bytes", &PipelineReport::output_bytes)
      .def_ro("streams", &PipelineReport::streams)
      .def_ro("pageable_input", &PipelineReport::pageable_input)
      .def_ro("pageable_output", &PipelineReport::pageable_output)
      .def_ro("device", &PipelineReport::device)
      .def("as_dict", &report_dict)
      .def("__str__", &PipelineReport::str)
      .def("__repr__", [](const PipelineReport& r) { return "<PipelineReport " + r.str() + ">"; });

  nb::class_<PyPipeline>(m, "Pipeline", nb::type_slots(pipeline_slots),
                         "Pipeline(compute, chunk_size=None, streams=None, buffering=None, progress=None, *, "
                         "chunk_bytes=None, device=None): host data -> device -> compute -> host in chunks of "
                         "rows over several streams. run(x) returns the result (NumPy in, NumPy out).")
      .def("__init__",
           [](PyPipeline* self, nb::handle compute, std::optional<std::int64_t> chunk_size, std::optional<int> streams,
              std::optional<int> buffering, nb::handle progress, std::optional<std::int64_t> chunk_bytes,
              nb::handle device) {
             if (!PyCallable_Check(compute.ptr())) {
               throw nb::type_error(("Pipeline: compute must be callable, got " + std::string(nb::inst_name(compute).c_str())).c_str());
             }
             if (chunk_size && *chunk_size <= 0) {
               throw tessel::ValueError("Pipeline: chunk_size (rows per chunk) must be positive, got " + std::to_string(*chunk_size));
             }
             if (chunk_bytes && *chunk_bytes <= 0) {
               throw tessel::ValueError("Pipeline: chunk_bytes must be positive, got " + std::to_string(*chunk_bytes));
             }
             if (streams && *streams <= 0) {
               throw tessel::ValueError("Pipeline: streams must be positive, got " + std::to_string(*streams));
             }
             if (buffering && *buffering <= 0) {
               throw tessel::ValueError("Pipeline: buffering must be positive (2: double, 3: triple), got " +
                                        std::to_string(*buffering));
             }
             const ProgressMode mode = to_progress(progress);
             const Device d = to_device_or_default(device);
             if (d.is_cuda()) check_device_index(d.index, "Pipeline");
             auto* p = new (self) PyPipeline();
             p->compute = share(compute);
             p->chunk_rows = chunk_size;
             p->chunk_bytes = chunk_bytes;
             p->streams = streams;
             p->buffering = buffering.value_or(2);
             p->progress = mode;
             p->device = d;
           },
           "compute"_a, "chunk_size"_a = nb::none(), "streams"_a = nb::none(), "buffering"_a = nb::none(),
           "progress"_a = nb::none(), nb::kw_only(), "chunk_bytes"_a = nb::none(), "device"_a = nb::none())
      .def("run", &run_pipeline, "input"_a, "out"_a = nb::none(), "on_chunk"_a = nb::none(),
           "Runs the pipeline over a host array (or an iterable of host chunks) and returns the result; with out= "
           "it fills out and returns it; with on_chunk=f it calls f(row_offset, chunk_result) in order and returns "
           "None.")
      .def_prop_ro("report", [](const PyPipeline& p) -> std::optional<PipelineReport> { return p.report; },
                   "The last run's PipelineReport (None before the first run).")
      .def_prop_ro("compute", [](const PyPipeline& p) { return *p.compute; })
      .def_prop_ro("chunk_size", [](const PyPipeline& p) { return p.chunk_rows; })
      .def_prop_ro("chunk_bytes", [](const PyPipeline& p) { return p.chunk_bytes; })
      .def_prop_ro("streams", [](const PyPipeline& p) { return p.streams; })
      .def_prop_ro("buffering", [](const PyPipeline& p) { return p.buffering; })
      .def_prop_ro("device", [](const PyPipeline& p) { return p.device; })
      .def("__repr__", [](const PyPipeline& p) {
        auto opt = [](const auto& v) { return v ? std::to_string(*v) : std::string("auto"); };
        return "Pipeline(device=" + p.device.str() + ", chunk_size=" + opt(p.chunk_rows) + ", streams=" + opt(p.streams) +
               ", buffering=" + std::to_string(p.buffering) + ")";
      });

  m.def("_measured_pinned_h2d_GBps", [] {
    nb::gil_scoped_release release;
    return measured_pinned_h2d_GBps();
  });
}

// ---- CUDA graphs ----

GraphOptions graph_options(std::int64_t reserve_bytes, const std::string& mode) {
  GraphOptions o;
  o.reserve_bytes = reserve_bytes;
  if (mode == "thread_local") {
    o.mode = CaptureMode::thread_local_;
  } else if (mode == "global") {
    o.mode = CaptureMode::global;
  } else if (mode == "relaxed") {
    o.mode = CaptureMode::relaxed;
  } else {
    throw tessel::ValueError("Graph.capture: capture_error_mode must be 'thread_local', 'global' or 'relaxed', got '" +
                             mode + "'");
  }
  return o;
}

// The stream a capture runs on: the given one, else a new stream of the device (a capture
// cannot use the legacy default stream, and a private stream keeps other work out of it).
Stream capture_stream(nb::handle stream, nb::handle device) {
  if (!stream.is_none()) {
    if (!nb::isinstance<Stream>(stream)) {
      throw nb::type_error(("Graph: stream must be a tessel.Stream, got " + std::string(nb::inst_name(stream).c_str())).c_str());
    }
    return nb::cast<Stream>(stream);
  }
  const Device d = to_device_or_default(device);
  return d.is_cpu() ? Stream::cpu() : Stream::create(d);
}

// The with-block form: begin() opens a capture on the stream, finish() ends it. A with block
// cannot be run again, so on the CPU (where replay re-runs the captured function) it is refused
// up front with the alternative named.
struct PyGraphCapture {
  std::unique_ptr<GraphCapture> capture;
};

void register_graph(nb::module_& m) {
  nb::class_<Graph>(m, "Graph",
                    "A captured sequence of tessel ops (a CUDA graph). Graph.capture(fn) captures fn's work; "
                    "replay() launches it again. On the CPU capture runs fn and replay runs it again.")
      .def(nb::init<>())
      .def_static(
          "capture",
          [](nb::handle fn, nb::handle stream, nb::handle device, std::int64_t reserve_bytes,
             const std::string& capture_error_mode) {
            if (!PyCallable_Check(fn.ptr())) {
              throw nb::type_error(("Graph.capture: fn must be callable, got " + std::string(nb::inst_name(fn).c_str())).c_str());
            }
            const Stream s = capture_stream(stream, device);
            const GraphOptions options = graph_options(reserve_bytes, capture_error_mode);
            SharedObject f = share(fn);
            std::function<void()> call = [f] {
              nb::gil_scoped_acquire gil;
              (*f)();
            };
            nb::gil_scoped_release release;  // the capture synchronizes the device first
            return Graph::capture(s, call, options);
          },
          "fn"_a, nb::kw_only(), "stream"_a = nb::none(), "device"_a = nb::none(), "reserve_bytes"_a = 64ll << 20,
          "capture_error_mode"_a = "thread_local")
      .def(
          "replay",
          [](const Graph& g, nb::handle stream) {
            if (stream.is_none()) {
              // Default: the device's current stream, so the replay is ordered after the writes
              // the caller made to the captured inputs and before its later reads and writes
              // (the capture stream is private: replaying there would race with them).
              nb::gil_scoped_release release;  // on the CPU, replay calls fn (which takes the GIL)
              if (!g.defined() || g.stream().device().is_cpu()) {
                g.replay();
              } else {
                g.replay(current_stream(g.stream().device()));
              }
              return;
            }
            if (!nb::isinstance<Stream>(stream)) {
              throw nb::type_error(("Graph.replay: stream must be a tessel.Stream, got " + std::string(nb::inst_name(stream).c_str())).c_str());
            }
            const Stream s = nb::cast<Stream>(stream);
            nb::gil_scoped_release release;
            g.replay(s);
          },
          "stream"_a = nb::none(), "Launches the captured work (asynchronous), on the device's current stream by default.")
      .def_prop_ro("defined", &Graph::defined)
      .def_prop_ro("stream", &Graph::stream)
      .def_prop_ro("num_nodes", &Graph::num_nodes)
      .def_prop_ro("held_bytes", &Graph::held_bytes)
      .def_prop_ro("num_replays", &Graph::num_replays)
      .def("__repr__", [](const Graph& g) {
        if (!g.defined()) return std::string("<Graph (empty)>");
        return "<Graph on " + g.stream().device().str() + ": " + std::to_string(g.num_nodes()) + " nodes, " +
               std::to_string(g.num_replays()) + " replays>";
      });

  nb::class_<PyGraphCapture>(m, "_GraphCapture")
      .def("__init__",
           [](PyGraphCapture* self, nb::handle stream, nb::handle device, std::int64_t reserve_bytes,
              const std::string& capture_error_mode) {
             const GraphOptions options = graph_options(reserve_bytes, capture_error_mode);
             const Stream s = capture_stream(stream, device);
             if (s.device().is_cpu()) {
               throw DeviceError(
                   "ts.cuda.graph(): the with-block form captures CUDA work and cannot be replayed on cpu (a with "
                   "block cannot be run again); use ts.cuda.Graph.capture(fn), which runs anywhere (on the CPU "
                   "replay calls fn again)");
             }
             auto* p = new (self) PyGraphCapture();
             nb::gil_scoped_release release;  // synchronizes the device before capturing
             p->capture = std::make_unique<GraphCapture>(s, options);
           },
           "stream"_a = nb::none(), "device"_a = nb::none(), "reserve_bytes"_a = 64ll << 20,
           "capture_error_mode"_a = "thread_local")
      .def("finish", [](PyGraphCapture& c) {
        if (!c.capture) throw Error("ts.cuda.graph: the capture is not open");
        std::unique_ptr<GraphCapture> capture = std::move(c.capture);
        return capture->finish();
      })
      .def("abort", [](PyGraphCapture& c) { c.capture.reset(); });  // ends and discards the capture
}

}  // namespace

void register_pipeline(nb::module_& m) {
  register_pipeline_class(m);
  register_graph(m);
}

}  // namespace tessel::python
