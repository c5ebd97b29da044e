#pragma once
// Shared helpers of the binding files: conversions from Python objects to tessel values
// (dtypes, devices, shapes, scalars, arrays) and the register functions of each layer.
// One file per library layer registers its part of the module (module.cpp calls them in order).
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "tessel/tessel.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace tessel::python {

// ---- per-layer registration (module.cpp calls these in this order) ----
void register_core(nb::module_& m);    // errors, dtypes, devices, streams
void register_memory(nb::module_& m);  // allocator statistics, pinned memory
void register_array(nb::module_& m);   // the Array class, creation, manipulation, reductions, sort
void register_ops(nb::module_& m);     // elementwise functions and operators
void register_interop(nb::module_& m); // DLPack and __cuda_array_interface__
void register_jit(nb::module_& m);     // fuse (Sym), ElementwiseKernel, RawKernel
void register_python_kernels(nb::module_& m);  // tessel.kernel's launch path (jit_python_kernels.cpp)
void register_matmul(nb::module_& m);  // matmul, @, vecdot, Matmul plans
void register_fft(nb::module_& m);     // the _fft submodule (tessel.fft)
void register_linalg(nb::module_& m);  // the _linalg submodule (tessel.linalg), LinAlgError
void register_pipeline(nb::module_& m);  // Pipeline, PipelineReport, Graph (ts.cuda.graph)
void register_sim(nb::module_& m);       // ts.sim: Particles (submodule _sim)
void register_set_ops(nb::module_& m);   // unique_all, isin, repeat (primitives of the namespace functions)
void register_profile(nb::module_& m);   // op ranges, profile sessions, checked mode (ts.profile)
void register_indexing(nb::module_& m);  // take, take_along_axis, put_along_axis, nonzero

// The Array class object, created by register_array; later layers add methods to it.
nb::class_<Array>& array_class();
// The Array type's number and comparison slots (nb_add, nb_inplace_add, tp_richcompare, nb_negative,
// ...; defined in ops.cpp): operators go straight from the interpreter into C++, without a method
// lookup or nanobind's argument dispatch. Null-terminated, for nb::type_slots at class creation.
const PyType_Slot* array_operator_slots();

// For type slots (which have no nanobind dispatch around them): sets the Python error for the
// C++ exception being handled, through the same translators as bound functions; returns nullptr.
// Call inside a catch block.
PyObject* set_python_error_from_current_exception() noexcept;

// ---- dtypes: one Python object per dtype, so `x.dtype is ts.float32` and no allocation ----
struct PyDType {
  DType value;
};
nb::object dtype_object(DType dtype);
// A tessel dtype object, a name ("float32"), a NumPy dtype or type, or the Python types
// bool/int/float/complex. DTypeError otherwise.
DType to_dtype(nb::handle h);
std::optional<DType> to_optional_dtype(nb::handle h);  // None -> nullopt

// ---- devices: a tessel.Device, "cpu", "cuda", "cuda:1", or None (nullopt) ----
std::optional<Device> to_optional_device(nb::handle h);
Device to_device_or_default(nb::handle h);

// ---- shapes and axes ----
Shape to_shape(nb::handle h);  // an int or a sequence of ints
std::optional<std::vector<std::int64_t>> to_axes(nb::handle h);  // None, an int or a sequence

// ---- Python scalars (bool, int, float, complex and their subclasses) ----
// False when h is not one. OverflowError for ints outside [-2^63, 2^64).
bool to_scalar(nb::handle h, Scalar& out);

// ---- arrays ----
// The hot paths (operators, elementwise functions) test and unwrap arrays through the Array's
// Python type object, cached by register_array: a pointer comparison instead of nanobind's lookup
// of the C++ type. (Subclasses of tessel.Array are still arrays.)
extern PyTypeObject* array_type_object;
inline bool is_array(nb::handle h) {
  PyTypeObject* type = Py_TYPE(h.ptr());
  return type == array_type_object || PyType_IsSubtype(type, array_type_object);
}
inline const Array& as_array(nb::handle h) {
  if (!is_array(h)) return nb::cast<const Array&>(h, false);  // raises the usual cast error
  return *nb::inst_ptr<Array>(h);
}
// A new tessel.Array object owning `a` (moved in), without nanobind's C++ type lookup.
inline nb::object wrap_array(Array&& a) {
  nb::object obj = nb::inst_alloc(nb::handle(reinterpret_cast<PyObject*>(array_type_object)));
  new (nb::inst_ptr<Array>(obj)) Array(std::move(a));
  nb::inst_mark_ready(obj);
  return obj;
}
// h itself when it is an Array, else tessel.asarray(h, device=device) (lists, NumPy arrays,
// DLPack / CUDA array interface producers). TypeError for objects that are not arrays.
// without_copy: asarray's copy=False (ValueError when only a copy would do, e.g. a NumPy array
// for a CUDA device), for arrays that are written in place.
Array to_array(nb::handle h, std::optional<Device> device = std::nullopt, bool without_copy = false);

// ---- Python objects owned by C++ (foreign-memory keep-alives, cached modules) ----
// A new reference to `owner`, dropped (with the GIL taken) when the last copy of the result goes.
// Buffer::wrap keeps it, so a producer object stays alive while any tessel view of its memory does.
std::shared_ptr<void> python_keep_alive(nb::handle owner);
// The numpy module, imported once (kept for the module's lifetime).
nb::handle numpy_module();
// The dtype of a NumPy scalar of NumPy's own sized types (np.float32, ...): a type-object
// comparison; nullopt for anything else (jit.cpp).
std::optional<DType> numpy_scalar_dtype(nb::handle h);
inline bool is_python_int(nb::handle h) { return PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr()); }

// ---- op rows whose namespace functions are written in Python (sort_list.hpp, set_ops_list.hpp) ----
// One row X(name, "python_name", shape, "docstring"): its docstring under its Python name in the
// nb::dict `rows` in scope, for the Python function's row_doc. Taking the C++ function's address
// makes a row without that function fail to compile.
#define TESSEL_PYTHON_ROW_DOC(name, python_name, shape, doc) \
  static_cast<void>(&tessel::name);                          \
  rows[python_name] = doc;

// ---- streams given from Python: None, a tessel.Stream, an int handle, torch/CuPy stream objects ----
std::optional<Stream> to_optional_stream(nb::handle h, Device device);

// The current stream of the device an array lives on.
inline Stream stream_of(const Array& a) {
  return a.device().is_cuda() ? current_stream(a.device()) : Stream::cpu();
}

}  // namespace tessel::python
