// Profile layer: op ranges, profile sessions, checked mode, and the events ts.benchmark times with.
// The Python API around them is python/tessel/_profile.py.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "common.hpp"
#include "tessel/core/event.hpp"
#include "tessel/profile/checks.hpp"
#include "tessel/profile/hooks.hpp"
#include "tessel/profile/range.hpp"
#include "tessel/profile/session.hpp"

namespace tessel::python {
namespace {

nb::list op_dicts(const profile::Session& s) {
  nb::list out;
  for (const auto& e : s.ops()) {
    nb::dict d;
    d["id"] = e.id;
    d["name"] = e.name;
    d["args"] = e.args;
    d["device"] = e.device;
    d["stream"] = e.stream;
    d["thread"] = e.thread;
    d["depth"] = e.depth;
    d["start_ns"] = e.start_ns;
    d["end_ns"] = e.end_ns;
    out.append(d);
  }
  return out;
}

nb::list gpu_dicts(const profile::Session& s) {
  nb::list out;
  for (const auto& e : s.gpu()) {
    nb::dict d;
    d["kind"] = profile::kind_name(e.kind);
    d["name"] = e.name;
    d["device"] = e.device;
    d["stream"] = e.stream;
    d["start_ns"] = e.start_ns;
    d["end_ns"] = e.end_ns;
    d["correlation"] = e.correlation;
    d["op_id"] = e.op_id;
    d["bytes"] = e.bytes;
    out.append(d);
  }
  return out;
}

nb::list compile_dicts(const profile::Session& s) {
  nb::list out;
  for (const auto& e : s.compiles()) {
    nb::dict d;
    d["name"] = e.name;
    d["source"] = e.source;
    d["cache_hit"] = e.cache_hit();
    d["start_ns"] = e.start_ns;
    d["end_ns"] = e.end_ns;
    out.append(d);
  }
  return out;
}

nb::list memory_dicts(const profile::Session& s) {
  nb::list out;
  for (const auto& e : s.memory()) {
    nb::dict d;
    d["kind"] = profile::kind_name(e.kind);
    d["device"] = e.device;
    d["bytes"] = e.bytes;
    d["allocated"] = e.allocated;
    d["reserved"] = e.reserved;
    d["time_ns"] = e.time_ns;
    d["detail"] = e.detail;
    out.append(d);
  }
  return out;
}

}  // namespace

void register_profile(nb::module_& m) {
  m.def("_profile_range_begin", &profile::range_begin, "name"_a);
  m.def("_profile_range_end", &profile::range_end, "token"_a);
  m.def("_profile_ranges_compiled", [] {
#if defined(TESSEL_HAVE_RANGES)
    return true;
#else
    return false;
#endif
  });
  m.def("_profile_now_ns", &profile::now_ns);
  m.def("_profile_finish_env", &profile::finish_env_session);
  m.def("_set_checks", [](const std::string& items) { profile::set_checks(items); }, "items"_a);
  m.def("_checks", &profile::checks_str);

  nb::class_<profile::Session>(m, "_ProfileSession")
      .def("__init__",
           [](profile::Session* self, std::size_t max_events, bool gpu) {
             profile::SessionOptions options;
             options.max_events = max_events;
             options.gpu = gpu;
             new (self) profile::Session(options);
           },
           "max_events"_a, "gpu"_a)
      .def("stop", &profile::Session::stop, nb::call_guard<nb::gil_scoped_release>())
      .def_prop_ro("recording", &profile::Session::recording)
      .def_prop_ro("dropped", &profile::Session::dropped)
      .def_prop_ro("gpu_recorded", &profile::Session::gpu_recorded)
      .def_prop_ro("gpu_linked", &profile::Session::gpu_linked)
      .def_prop_ro("cupti_status", &profile::Session::cupti_status)
      .def("ops", &op_dicts)
      .def("gpu", &gpu_dicts)
      .def("compiles", &compile_dicts)
      .def("memory", &memory_dicts)
      .def("export_chrome_trace", &profile::Session::export_chrome_trace, "path"_a,
           nb::call_guard<nb::gil_scoped_release>())
      .def("table", &profile::Session::table, "sort_by"_a, "group_by"_a, "limit"_a,
           nb::call_guard<nb::gil_scoped_release>());

  // Timing events for ts.benchmark (host timestamps on the CPU backend).
  nb::class_<Event>(m, "_Event")
      .def(nb::init<Device, bool>(), "device"_a, "timing"_a = true)
      .def("record", [](Event& e, const Stream& s) { e.record(s); }, "stream"_a)
      .def("synchronize", &Event::synchronize, nb::call_guard<nb::gil_scoped_release>())
      .def("elapsed_ms", &Event::elapsed_ms, "end"_a);
}

}  // namespace tessel::python
