// The set functions (unique_all and its parts, isin) and repeat: the primitives that the
// namespace functions of python/tessel/_functions/sets.py and manipulation.py call, and the
// set functions' rows (set_ops_list.hpp).
#include "common.hpp"
#include "tessel/ops/set_ops_list.hpp"

namespace tessel::python {

void register_set_ops(nb::module_& m) {
  // The rows of set_ops_list.hpp, in row order: sets.py's docstrings.
  nb::dict rows;
  TESSEL_SET_OPS(TESSEL_PYTHON_ROW_DOC)
  m.attr("_set_functions") = rows;

  m.def("_unique_all", [](const Array& x, bool indices, bool inverse, bool counts) {
    const UniqueAllResult r = unique_all(x, UniqueParts{indices, inverse, counts});
    auto or_none = [](const Array& a) { return a.storage() ? nb::cast(a) : nb::none(); };
    return nb::make_tuple(r.values, or_none(r.indices), or_none(r.inverse_indices), or_none(r.counts));
  }, "x"_a, "indices"_a, "inverse"_a, "counts"_a,
        "(values, indices, inverse_indices, counts) of the flattened x; None for the parts not asked for.");
  m.def("_isin", [](const Array& x1, const Array& x2, bool invert) { return isin(x1, x2, invert); },
        "x1"_a, "x2"_a, "invert"_a);
  m.def("_repeat", [](const Array& x, nb::handle repeats, std::optional<std::int64_t> axis) {
    if (nb::isinstance<Array>(repeats)) return repeat(x, nb::cast<const Array&>(repeats), axis);
    if (PyBool_Check(repeats.ptr()) || !PyIndex_Check(repeats.ptr())) {
      throw nb::type_error(("repeat: repeats must be an int or an integer array, got " +
                            nb::cast<std::string>(nb::str(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(repeats.ptr()))).attr("__name__"))))
                               .c_str());
    }
    return repeat(x, nb::cast<std::int64_t>(repeats), axis);
  }, "x"_a, "repeats"_a, "axis"_a = nb::none());
}

}  // namespace tessel::python
