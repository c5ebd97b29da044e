#pragma once
// Every function of tessel.fft that takes or makes a transform's data, one row each: the one place
// where its Python name, parameters and docstring are written. The Python bindings
// (python/bindings/fft.cpp), tessel.fft's names (python/tessel/fft.py), the stubs
// (python/tessel/fft.pyi, by scripts/gen_op_stubs.py) and the API reference follow from the rows.
// The plan (ts.fft.Plan) and the plan cache controls are not transforms and are bound by hand.
//
//   X(name, "python_name", shape, "docstring")
//
// name: the C++ function tessel::fft::name (include/tessel/ops/fft.hpp), with its shape's
//   parameters, so a row without that declaration does not compile
// shape: the parameters, in C++ (after the array; the stream is last) and in Python:
//   one_axis  (n, axis, norm); Python: x, /, *, n=None, axis=-1, norm="backward"
//   n_axes    (s, axes, norm); Python: x, /, *, s=None, axes=None, norm="backward"
//   two_axes  (s, axes, norm); Python: x, /, *, s=None, axes=(-2, -1), norm="backward"
//   freq      (n, d, dtype, device), no array; Python: n, /, *, d=1.0, dtype=None, device=None
//             (dtype None is float32, the default real floating-point dtype)
//   shift     (axes); Python: x, /, *, axes=None
// docstring: the Python function's (its binding's __doc__, stub and API reference entry): the
//   Array API standard's fft extension description, then what tessel adds.

#define TESSEL_FFT_OPS(X) \
  X(fft, "fft", one_axis, \
    "Computes the one-dimensional discrete Fourier transform along ``axis`` (``n`` pads with zeros " \
    "or crops; ``norm``: \"backward\", \"ortho\" or \"forward\").") \
  X(ifft, "ifft", one_axis, "Computes the one-dimensional inverse discrete Fourier transform: the inverse of :func:`fft`.") \
  X(rfft, "rfft", one_axis, \
    "Computes the one-dimensional discrete Fourier transform for real-valued input: ``n // 2 + 1`` " \
    "complex outputs along ``axis``.") \
  X(irfft, "irfft", one_axis, \
    "Computes the one-dimensional inverse of :func:`rfft` for complex-valued input: ``n`` real " \
    "outputs (default ``2 * (m - 1)``).") \
  X(hfft, "hfft", one_axis, \
    "Computes the one-dimensional discrete Fourier transform of a signal with Hermitian symmetry " \
    "(a real spectrum): irfft(conj(x)) with the norm swapped.") \
  X(ihfft, "ihfft", one_axis, \
    "Computes the one-dimensional inverse discrete Fourier transform of a signal with Hermitian " \
    "symmetry: conj(rfft(x)) with the norm swapped.") \
  X(fftn, "fftn", n_axes, \
    "Computes the n-dimensional discrete Fourier transform over ``axes`` (all axes, or the last " \
    "``len(s)`` when only ``s`` is given).") \
  X(ifftn, "ifftn", n_axes, "Computes the n-dimensional inverse discrete Fourier transform: the inverse of :func:`fftn`.") \
  X(rfftn, "rfftn", n_axes, \
    "Computes the n-dimensional discrete Fourier transform for real-valued input (the last axis is " \
    "the real one).") \
  X(irfftn, "irfftn", n_axes, "Computes the n-dimensional inverse of :func:`rfftn` for complex-valued input.") \
  X(fft2, "fft2", two_axes, "Computes the two-dimensional discrete Fourier transform: :func:`fftn` over the last two axes.") \
  X(ifft2, "ifft2", two_axes, \
    "Computes the two-dimensional inverse discrete Fourier transform: :func:`ifftn` over the last " \
    "two axes.") \
  X(rfft2, "rfft2", two_axes, \
    "Computes the two-dimensional discrete Fourier transform for real-valued input: :func:`rfftn` " \
    "over the last two axes.") \
  X(irfft2, "irfft2", two_axes, \
    "Computes the two-dimensional inverse of :func:`rfft2` for complex-valued input: :func:`irfftn` " \
    "over the last two axes.") \
  X(fftfreq, "fftfreq", freq, \
    "Computes the discrete Fourier transform sample frequencies of an ``n``-point transform with " \
    "sample spacing ``d``.") \
  X(rfftfreq, "rfftfreq", freq, \
    "Computes the discrete Fourier transform sample frequencies of an ``n``-point :func:`rfft`: " \
    "[0, 1, ..., n/2] / (d * n).") \
  X(fftshift, "fftshift", shift, \
    "Shifts the zero-frequency component to the center of the spectrum, over ``axes`` (default: all).") \
  X(ifftshift, "ifftshift", shift, "Inverse of :func:`fftshift`.")
