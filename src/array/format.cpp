// Array::str(): NumPy-style repr for small arrays, summarized with "..." for large ones.
#include <cmath>
#include <complex>
#include <cstdio>
#include <string>
#include <vector>

#include "array/backend.hpp"
#include "array/cast.hpp"
#include "tessel/array/array.hpp"

namespace tessel {

namespace {

constexpr std::int64_t summarize_threshold = 1000;  // NumPy's default threshold
constexpr std::int64_t edge_items = 3;
constexpr int max_fraction_digits = 8;              // NumPy's default precision

// The fewest significant digits that read back as the same value in the array's precision.
template <class T>
int shortest_digits(double value) {
  for (int digits = 1; digits < 17; ++digits) {
    char text[64];
    std::snprintf(text, sizeof text, "%.*e", digits - 1, value);
    const double parsed = std::strtod(text, nullptr);
    if constexpr (detail::is_half_v<T>) {
      if (T(parsed).bits == T(value).bits) return digits;
    } else {
      if (static_cast<T>(parsed) == static_cast<T>(value)) return digits;
    }
  }
  return 17;
}

struct FloatStyle {
  bool scientific = false;
};

template <class T>
std::string format_real(double value, const FloatStyle& style) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  const int digits = shortest_digits<T>(value);
  char text[96];
  if (style.scientific) {
    std::snprintf(text, sizeof text, "%.*e", std::min(digits - 1, max_fraction_digits), value);
    // Trim trailing zeros of the mantissa, keeping "1.e+00" as NumPy writes it.
    std::string s = text;
    const auto e = s.find('e');
    std::string mantissa = s.substr(0, e), exponent = s.substr(e);
    if (mantissa.find('.') == std::string::npos) mantissa += ".";
    while (mantissa.back() == '0') mantissa.pop_back();
    return mantissa + exponent;
  }
  const int exponent = value == 0 ? 0 : static_cast<int>(std::floor(std::log10(std::fabs(value))));
  const int fraction = std::max(0, std::min(max_fraction_digits, digits - 1 - exponent));
  std::snprintf(text, sizeof text, "%.*f", fraction, value);
  std::string s = text;
  if (s.find('.') == std::string::npos) s += ".";
  while (s.back() == '0') s.pop_back();
  return s;
}

// NumPy lines up the decimal points: the integer part is padded on the left and the fraction
// on the right ("0. ", "0.5"). Texts without a point (nan, inf) count as all integer part.
void align_decimal_points(std::vector<std::string>& texts) {
  std::size_t left = 0, right = 0;
  for (const std::string& text : texts) {
    const std::size_t point = std::min(text.find_first_of(".e"), text.size());
    left = std::max(left, point);
    right = std::max(right, text.size() - point);
  }
  for (std::string& text : texts) {
    const std::size_t point = std::min(text.find_first_of(".e"), text.size());
    text = std::string(left - point, ' ') + text + std::string(right - (text.size() - point), ' ');
  }
}

template <class T>
std::vector<std::string> format_elements(const std::vector<T>& values) {
  std::vector<std::string> texts;
  texts.reserve(values.size());
  if constexpr (std::is_same_v<T, bool>) {
    for (bool v : values) texts.push_back(v ? "True" : "False");
  } else if constexpr (std::is_integral_v<T>) {
    for (T v : values) texts.push_back(std::to_string(v));
  } else {
    using Part = detail::real_part_t<T>;
    // Scientific notation when the magnitudes span too much, as NumPy decides it.
    double largest = 0, smallest = INFINITY;
    auto note = [&](double v) {
      if (!std::isfinite(v) || v == 0) return;
      largest = std::max(largest, std::fabs(v));
      smallest = std::min(smallest, std::fabs(v));
    };
    for (const T& v : values) {
      if constexpr (detail::is_complex_v<T>) {
        note(static_cast<double>(v.real()));
        note(static_cast<double>(v.imag()));
      } else {
        note(static_cast<double>(v));
      }
    }
    FloatStyle style;
    style.scientific = largest >= 1e16 || (smallest < 1e-4 && smallest < INFINITY) || (largest / smallest > 1e3 && smallest < INFINITY && largest >= 1e8);
    for (const T& v : values) {
      if constexpr (detail::is_complex_v<T>) {
        std::string imag = format_real<Part>(static_cast<double>(v.imag()), style);
        if (imag[0] != '-') imag = "+" + imag;
        texts.push_back(format_real<Part>(static_cast<double>(v.real()), style) + imag + "j");
      } else {
        texts.push_back(format_real<T>(static_cast<double>(v), style));
      }
    }
    if constexpr (!detail::is_complex_v<T>) align_decimal_points(texts);
  }
  return texts;
}

// Lays out the formatted elements (C order) with NumPy's brackets, separators and padding.
// `shape` is what was gathered; `full_shape` tells which axes were elided.
void layout(const std::vector<std::string>& texts, const Shape& shape, const Shape& full_shape, std::size_t axis,
            std::int64_t& next, std::size_t width, bool summarize, const std::string& indent, std::string& out) {
  if (axis == shape.size()) {
    out += std::string(width - texts[static_cast<std::size_t>(next)].size(), ' ') + texts[static_cast<std::size_t>(next)];
    ++next;
    return;
  }
  out += "[";
  const std::int64_t extent = shape[axis];
  const bool elide = summarize && full_shape[axis] > 2 * edge_items;
  const std::int64_t shown = elide ? 2 * edge_items : extent;
  const bool innermost = axis + 1 == shape.size();
  const std::string separator = innermost ? ", " : "," + std::string(shape.size() - axis - 1, '\n') + indent + " ";
  for (std::int64_t i = 0; i < shown; ++i) {
    if (i > 0) out += separator;
    if (elide && i == edge_items) out += "..." + separator;
    layout(texts, shape, full_shape, axis + 1, next, width, summarize, indent + " ", out);
  }
  out += "]";
}

bool dtype_is_implied(DType dtype) {
  return dtype == DType::float64 || dtype == DType::int64 || dtype == DType::bool_ || dtype == DType::complex128;
}

}  // namespace

std::string Array::str() const {
  if (!defined()) return "array(<undefined>)";
  const std::string dtype_suffix = dtype_is_implied(dtype_) ? "" : std::string(", dtype=") + dtype_name(dtype_);
  if (size_ == 0) {
    const std::string shape_part = ndim() == 1 ? "" : ", shape=" + shape_str(shape_);
    return "array([]" + shape_part + (dtype_suffix.empty() ? ", dtype=" + std::string(dtype_name(dtype_)) : dtype_suffix) + ")";
  }
  const bool summarize = size_ > summarize_threshold;
  // Gather the shown elements in C order (all of them, or the edges of each axis).
  Array shown = *this;
  if (summarize) {
    for (std::int64_t axis = 0; axis < ndim(); ++axis) {
      if (shown.dim(axis) > 2 * edge_items) {
        const Array head = shown.slice(axis, Slice(std::nullopt, edge_items));
        const Array tail = shown.slice(axis, Slice(-edge_items, std::nullopt));
        Shape joined = head.shape();
        joined[static_cast<std::size_t>(axis)] = 2 * edge_items;
        Array both = empty(joined, dtype_, Device::cpu());
        detail::copy_into(both.slice(axis, Slice(std::nullopt, edge_items)), head, std::nullopt);
        detail::copy_into(both.slice(axis, Slice(edge_items, std::nullopt)), tail, std::nullopt);
        shown = both;
      }
    }
  }
  std::vector<std::string> texts = dispatch_dtype(dtype_, [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<T> values;
    if constexpr (std::is_same_v<T, bool>) {
      std::vector<unsigned char> bytes(static_cast<std::size_t>(shown.size()));  // a bool is one byte, 0 or 1
      shown.to_host(bytes.data());
      for (unsigned char v : bytes) values.push_back(v != 0);
    } else {
      values.resize(static_cast<std::size_t>(shown.size()));
      shown.to_host(values.data());
    }
    return format_elements(values);
  });
  std::size_t width = 0;
  for (const std::string& text : texts) width = std::max(width, text.size());
  std::string body;
  std::int64_t next = 0;
  layout(texts, shown.shape(), shape_, 0, next, width, summarize, "      ", body);
  return "array(" + body + dtype_suffix + ")";
}

}  // namespace tessel
