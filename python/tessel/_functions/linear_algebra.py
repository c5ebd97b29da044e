"""NumPy's linear algebra functions of the main namespace: dot, outer, trace, cross and einsum.
tessel.linalg (python/tessel/linalg.py) is the Array API's linalg extension; matmul and vecdot
are C++ functions."""
from __future__ import annotations

import builtins
import math

from .. import _tessel
from .. import linalg
from .._tessel import Array
from ._helpers import finish, unsupported
from .creation import asarray
from .manipulation import moveaxis
from .statistics import sum


def dot(a, b, out=None):
    """NumPy's dot: a product by a scalar, of vectors, or of matrices (b with at most 2 dimensions)."""
    if a.ndim == 0 or b.ndim == 0:
        return finish(a * b, out, "dot")
    if b.ndim <= 2:
        return finish(_tessel.matmul(a, b), out, "dot")
    raise unsupported("numpy.dot of an array with more than 2 dimensions as the second operand")


def outer(a, b, out=None):
    """NumPy's outer: the outer product of the flattened a and b."""
    a, b = _tessel.reshape(a, (-1, 1)), _tessel.reshape(b, (1, -1))
    return finish(a * b, out, "outer")


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """NumPy's trace: the sum along a diagonal of the axes axis1 and axis2."""
    a = moveaxis(a, (axis1, axis2), (-2, -1))
    return finish(linalg.trace(a, offset=offset, dtype=dtype), out, "trace")


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """NumPy's cross: the cross product of 3-vectors along axis."""
    if axis is None and (axisa, axisb, axisc) != (-1, -1, -1):
        raise unsupported("numpy.cross with axisa, axisb or axisc")
    return linalg.cross(a, b, axis=-1 if axis is None else axis)


def _einsum_parse(subscripts, operands):
    """Per operand its labels (ellipsis dims as private labels), and the output labels (NumPy's
    implicit output: the ellipsis dims, then the labels that occur once, in alphabetical order)."""
    subscripts = subscripts.replace(" ", "")
    inputs, arrow, output = subscripts.partition("->")
    parts = inputs.split(",")
    if len(parts) != len(operands):
        raise ValueError(f"einsum: {len(parts)} operand subscripts for {len(operands)} operands")
    ellipsis_ndim = 0
    for part, op in zip(parts, operands):
        if "..." in part:
            ellipsis_ndim = builtins.max(ellipsis_ndim, op.ndim - (len(part) - 3))
    fill = [chr(0x3B1 + k) for k in range(ellipsis_ndim)]  # private labels (Greek letters)
    labels = []
    for part, op in zip(parts, operands):
        if "..." in part:
            n = op.ndim - (len(part) - 3)
            head, _, tail = part.partition("...")
            part_labels = list(head) + fill[ellipsis_ndim - n:] + list(tail)
        else:
            part_labels = list(part)
        for c in part_labels:
            if not (c.isalpha() or c in fill):
                raise ValueError(f"einsum: invalid subscript {c!r} in {subscripts!r}")
        if len(part_labels) != op.ndim:
            raise ValueError(f"einsum: subscripts {part!r} name {len(part_labels)} axes of an operand with {op.ndim}")
        labels.append(part_labels)
    if arrow:
        out = list(output.replace("...", "".join(fill)))
        for c in out:
            if not builtins.any(c in ls for ls in labels):
                raise ValueError(f"einsum: output subscript {c!r} does not occur in an input")
        if len(set(out)) != len(out):
            raise ValueError(f"einsum: output subscripts {output!r} repeat a label")
    else:
        counts = {}
        for ls in labels:
            for c in ls:
                counts[c] = counts.get(c, 0) + 1
        out = fill + sorted(c for c, k in counts.items() if k == 1 and c not in fill)
    return labels, out


def _einsum_diagonal(x, labels):
    """x with each repeated label taken once (its diagonal)."""
    labels = list(labels)
    while len(set(labels)) != len(labels):
        c = next(c for c in labels if labels.count(c) > 1)
        i = labels.index(c)
        j = labels.index(c, i + 1)
        x = linalg.diagonal(moveaxis(x, (i, j), (-2, -1)))
        labels = [l for k, l in enumerate(labels) if k not in (i, j)] + [c]
    return x, labels


def _einsum_pair(a, la, b, lb, keep):
    """The contraction of a and b over their shared labels that `keep` does not hold, as one
    batched matmul: (batch, a's own, shared) @ (batch, shared, b's own)."""
    sizes = dict(zip(la, a.shape))
    sizes.update(zip(lb, b.shape))
    batch = [c for c in la if c in lb and c in keep]
    summed = [c for c in la if c in lb and c not in keep]
    own_a = [c for c in la if c not in lb]
    own_b = [c for c in lb if c not in la]
    a = _tessel.permute_dims(a, tuple(la.index(c) for c in batch + own_a + summed))
    b = _tessel.permute_dims(b, tuple(lb.index(c) for c in batch + summed + own_b))
    nb = [sizes[c] for c in batch]
    na, ns, nbo = (math.prod(sizes[c] for c in g) for g in (own_a, summed, own_b))
    a = _tessel.reshape(a, tuple(nb) + (na, ns))
    b = _tessel.reshape(b, tuple(nb) + (ns, nbo))
    c = _tessel.matmul(a, b)
    return _tessel.reshape(c, tuple(nb) + tuple(sizes[c] for c in own_a) + tuple(sizes[c] for c in own_b)), \
        batch + own_a + own_b


def einsum(subscripts, *operands, out=None, dtype=None, order="K", casting="safe", optimize=False):
    """NumPy's einsum: labels, ellipses, repeated labels (diagonals), implicit and explicit output;
    the operands are contracted left to right, each pair by one batched matmul."""
    if not isinstance(subscripts, str):
        raise unsupported("numpy.einsum with subscripts given as integer lists")
    ops = [o if isinstance(o, Array) else asarray(o) for o in operands]
    if dtype is not None:
        ops = [o.astype(dtype) for o in ops]
    labels, out_labels = _einsum_parse(subscripts, ops)
    sizes = {}
    for op, ls in zip(ops, labels):
        for c, n in zip(ls, op.shape):
            known = sizes.setdefault(c, n)
            if known != n:
                if c.isascii() or 1 not in (known, n):  # ellipsis dims broadcast, as NumPy's
                    raise ValueError(f"einsum: label {c!r} has sizes {known} and {n}")
                sizes[c] = builtins.max(known, n)
    ops = [op if tuple(op.shape) == tuple(sizes[c] for c in ls) else
           _tessel.broadcast_to(op, tuple(sizes[c] for c in ls)) for op, ls in zip(ops, labels)]
    terms = [_einsum_diagonal(op, ls) for op, ls in zip(ops, labels)]
    # Sum each operand's labels that occur nowhere else and are not in the output, before any product.
    reduced = []
    for k, (x, ls) in enumerate(terms):
        elsewhere = set(out_labels).union(*[set(l) for j, (_, l) in enumerate(terms) if j != k])
        drop = [i for i, c in enumerate(ls) if c not in elsewhere]
        if drop:
            x = sum(x, axis=tuple(drop))
            ls = [c for i, c in enumerate(ls) if i not in drop]
        reduced.append((x, ls))
    x, ls = reduced[0]
    for k in range(1, len(reduced)):
        later = set(out_labels).union(*[set(l) for _, l in reduced[k + 1:]])
        y, ly = reduced[k]
        x, ls = _einsum_pair(x, ls, y, ly, later)
    drop = [i for i, c in enumerate(ls) if c not in out_labels]
    if drop:
        x = sum(x, axis=tuple(drop))
        ls = [c for i, c in enumerate(ls) if i not in drop]
    x = _tessel.permute_dims(x, tuple(ls.index(c) for c in out_labels)) if ls else x
    return finish(x, out, "einsum")
