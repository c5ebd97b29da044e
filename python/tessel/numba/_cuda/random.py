"""``numba.cuda.random`` for tessel: the xoroshiro128+ generator with Numba's seeding, so the
same seed gives the same numbers as Numba.

Host side: :func:`create_xoroshiro128p_states` (and :func:`init_xoroshiro128p_states`) make
one generator state per thread. As in Numba, state 0 is seeded with SplitMix64 (both words set
to its first output), advanced by ``subsequence_start`` jumps of 2**64 steps, and state i is
state i-1 jumped once more. tessel computes the states with NumPy on the host and copies them;
instead of Numba's one jump at a time it applies powers of the jump (a linear map on the 128
state bits) to whole blocks of states, so n states cost O(log n) vectorized passes and any
``subsequence_start`` O(log subsequence_start) ones.

Device side: :func:`xoroshiro128p_next`, :func:`xoroshiro128p_uniform_float32` / ``_float64``,
:func:`xoroshiro128p_normal_float32` / ``_float64`` and :func:`xoroshiro128p_jump` are Python
functions of ``(states, index)``, made tessel device functions (``tessel.kernel.jit(device=True)``)
when the kernel compiler imports, so kernels call them; outside kernels they run as plain Python. ``states`` is what a kernel receives for the states array: the storage of the
structured ``xoroshiro128p_dtype`` array, a ``uint64`` array of shape ``(n, 2)`` (``s0``,
``s1``). They also run in plain Python on such NumPy arrays (``np.asarray(states).view(np.uint64)
.reshape(-1, 2)``), with the same results.

As Numba, ``xoroshiro128p_normal_float64`` draws its two uniforms as float32.
"""
from __future__ import annotations

import math
import threading

import numpy as np

from ..types import float32, float64, int64, uint32, uint64

__all__ = [
    "xoroshiro128p_dtype", "create_xoroshiro128p_states", "init_xoroshiro128p_states",
    "init_xoroshiro128p_states_cpu", "init_xoroshiro128p_state", "rotl", "xoroshiro128p_next",
    "xoroshiro128p_jump", "uint64_to_unit_float32", "uint64_to_unit_float64",
    "xoroshiro128p_uniform_float32", "xoroshiro128p_uniform_float64", "xoroshiro128p_normal_float32",
    "xoroshiro128p_normal_float64",
]

xoroshiro128p_dtype = np.dtype([("s0", np.uint64), ("s1", np.uint64)], align=True)

# Constants, typed so that compiled code and NumPy both compute in uint64.
_SPLITMIX_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_SPLITMIX_M1 = np.uint64(0xBF58476D1CE4E5B9)
_SPLITMIX_M2 = np.uint64(0x94D049BB133111EB)
_JUMP0 = np.uint64(0xBEAC0467EBA5FACB)
_JUMP1 = np.uint64(0xD86B048B86AA9922)
_MAX_U64 = np.uint64(0xFFFFFFFFFFFFFFFF)
_ZERO = np.uint64(0)
_ONE = np.uint64(1)
_TWO_POW_M53 = np.float64(1.0 / 9007199254740992.0)  # 2**-53, as Numba's float64(1) / (uint64(1) << 53)
_MINUS_TWO_F32 = np.float32(-2.0)
_MINUS_TWO_F64 = np.float64(-2.0)
TWO_PI_FLOAT32 = np.float32(2 * math.pi)
TWO_PI_FLOAT64 = np.float64(2 * math.pi)
_MASK64 = (1 << 64) - 1


# ---- device functions (plain Python; compiled by tessel's kernel compiler) ----
def _add_u64(a, b):
    """a + b modulo 2**64, written so that NumPy scalars do not overflow (and warn)."""
    room = _MAX_U64 - b
    if a > room:
        return a - room - _ONE
    return a + b


def rotl(x, k):
    """x rotated left by k bits (0 < k < 64)."""
    x = uint64(x)
    k = uint32(k)
    return (x << k) | (x >> uint32(64 - k))


def init_xoroshiro128p_state(states, index, seed):
    """Seeds ``states[index]`` from a 64-bit seed with SplitMix64 (both words its first output)."""
    index = int64(index)
    z = _add_u64(uint64(seed), _SPLITMIX_GAMMA)
    z = _mul_u64(z ^ (z >> uint32(30)), _SPLITMIX_M1)
    z = _mul_u64(z ^ (z >> uint32(27)), _SPLITMIX_M2)
    z = z ^ (z >> uint32(31))
    states[index, 0] = z
    states[index, 1] = z


def _mul_u64(a, b):
    """a * b modulo 2**64 from 32-bit halves (no NumPy overflow)."""
    mask = np.uint64(0xFFFFFFFF)
    a_lo, a_hi = a & mask, a >> uint32(32)
    b_lo, b_hi = b & mask, b >> uint32(32)
    cross = ((a_hi * b_lo) & mask) + ((a_lo * b_hi) & mask)
    return _add_u64(a_lo * b_lo, (cross & mask) << uint32(32))


def xoroshiro128p_next(states, index):
    """The next uint64 of generator ``index``; advances it."""
    index = int64(index)
    s0 = uint64(states[index, 0])
    s1 = uint64(states[index, 1])
    result = _add_u64(s0, s1)
    s1 = s1 ^ s0
    states[index, 0] = rotl(s0, uint32(55)) ^ s1 ^ (s1 << uint32(14))
    states[index, 1] = rotl(s1, uint32(36))
    return result


def xoroshiro128p_jump(states, index):
    """Advances generator ``index`` by 2**64 steps."""
    index = int64(index)
    s0 = _ZERO
    s1 = _ZERO
    for b in range(64):
        if (_JUMP0 >> uint32(b)) & _ONE:
            s0 = s0 ^ uint64(states[index, 0])
            s1 = s1 ^ uint64(states[index, 1])
        xoroshiro128p_next(states, index)
    for b in range(64):
        if (_JUMP1 >> uint32(b)) & _ONE:
            s0 = s0 ^ uint64(states[index, 0])
            s1 = s1 ^ uint64(states[index, 1])
        xoroshiro128p_next(states, index)
    states[index, 0] = s0
    states[index, 1] = s1


def uint64_to_unit_float64(x):
    """x as a float64 in [0, 1): its top 53 bits times 2**-53."""
    x = uint64(x)
    return float64(x >> uint32(11)) * _TWO_POW_M53


def uint64_to_unit_float32(x):
    """x as a float32 in [0, 1] (the float64 value rounded to float32, as Numba)."""
    x = uint64(x)
    return float32(uint64_to_unit_float64(x))


def xoroshiro128p_uniform_float32(states, index):
    """A float32 uniform in [0, 1) from generator ``index`` (one step)."""
    index = int64(index)
    return uint64_to_unit_float32(xoroshiro128p_next(states, index))


def xoroshiro128p_uniform_float64(states, index):
    """A float64 uniform in [0, 1) from generator ``index`` (one step)."""
    index = int64(index)
    return uint64_to_unit_float64(xoroshiro128p_next(states, index))


def xoroshiro128p_normal_float32(states, index):
    """A standard normal float32 (Box-Muller, the cosine branch; two steps)."""
    index = int64(index)
    u1 = xoroshiro128p_uniform_float32(states, index)
    u2 = xoroshiro128p_uniform_float32(states, index)
    radius = float32(math.sqrt(float32(_MINUS_TWO_F32 * float32(math.log(u1)))))
    return float32(radius * float32(math.cos(float32(TWO_PI_FLOAT32 * u2))))


def xoroshiro128p_normal_float64(states, index):
    """A standard normal float64 (Box-Muller from two float32 uniforms, as Numba; two steps)."""
    index = int64(index)
    u1 = xoroshiro128p_uniform_float32(states, index)
    u2 = xoroshiro128p_uniform_float32(states, index)
    radius = math.sqrt(_MINUS_TWO_F64 * float64(float32(math.log(u1))))
    return float64(radius * math.cos(TWO_PI_FLOAT64 * float64(u2)))


# ---- host initialization: the jump as a linear map on 128 bits ----
_SHIFTS = np.arange(0, 64, 8, dtype=np.uint64)
_BYTE = np.uint64(0xFF)


def _step(s0, s1):
    """One xoroshiro128+ state transition of arrays of states."""
    s1 = s1 ^ s0
    new0 = ((s0 << np.uint64(55)) | (s0 >> np.uint64(9))) ^ s1 ^ (s1 << np.uint64(14))
    new1 = (s1 << np.uint64(36)) | (s1 >> np.uint64(28))
    return new0, new1


def _jump_arrays(s0, s1):
    """Numba's jump applied to arrays of states (128 transitions)."""
    a0 = np.zeros_like(s0)
    a1 = np.zeros_like(s1)
    for word in (0xBEAC0467EBA5FACB, 0xD86B048B86AA9922):
        for b in range(64):
            if (word >> b) & 1:
                a0 ^= s0
                a1 ^= s1
            s0, s1 = _step(s0, s1)
    return a0, a1


def _tables(c0, c1):
    """Byte tables of the linear map whose image of state bit k is (c0[k], c1[k]): entry [j, v]
    is the image of byte j (0-7: s0's bytes, 8-15: s1's) holding v."""
    t0 = np.zeros((16, 256), dtype=np.uint64)
    t1 = np.zeros((16, 256), dtype=np.uint64)
    values = np.arange(256)
    for i in range(8):
        has = ((values >> i) & 1).astype(bool)
        t0[:, has] ^= c0[i::8][:, None]
        t1[:, has] ^= c1[i::8][:, None]
    return t0, t1


def _apply(tables, s0, s1):
    t0, t1 = tables
    out0 = np.zeros_like(s0)
    out1 = np.zeros_like(s1)
    for j in range(16):
        word = s0 if j < 8 else s1
        byte = ((word >> _SHIFTS[j % 8]) & _BYTE).astype(np.intp)
        out0 ^= t0[j][byte]
        out1 ^= t1[j][byte]
    return out0, out1


_powers = []  # _powers[k]: the tables of the jump applied 2**k times
_powers_lock = threading.Lock()


def _jump_power(k):
    with _powers_lock:
        if not _powers:
            basis = np.uint64(1) << np.arange(64, dtype=np.uint64)
            zeros = np.zeros(64, dtype=np.uint64)
            b0 = np.concatenate([basis, zeros])
            b1 = np.concatenate([zeros, basis])
            _powers.append(_tables(*_jump_arrays(b0, b1)))
        while len(_powers) <= k:
            last = _powers[-1]
            # Columns of M*M: M applied to M's columns (the images of the basis bits).
            basis = np.uint64(1) << np.arange(64, dtype=np.uint64)
            zeros = np.zeros(64, dtype=np.uint64)
            c0, c1 = _apply(last, *_apply(last, np.concatenate([basis, zeros]), np.concatenate([zeros, basis])))
            _powers.append(_tables(c0, c1))
        return _powers[k]


def _splitmix64(seed):
    z = (int(seed) + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def _host_states(n, seed, subsequence_start=0):
    """The (n, 2) uint64 states Numba's init_xoroshiro128p_states_cpu makes."""
    n = int(n)
    states = np.empty((n, 2), dtype=np.uint64)
    if n == 0:
        return states
    z = np.uint64(_splitmix64(int(seed) & _MASK64))
    s0 = np.array([z], dtype=np.uint64)
    s1 = np.array([z], dtype=np.uint64)
    start = int(subsequence_start) & _MASK64
    k = 0
    while start:
        if start & 1:
            s0, s1 = _apply(_jump_power(k), s0, s1)
        start >>= 1
        k += 1
    states[0, 0], states[0, 1] = s0[0], s1[0]
    filled, k = 1, 0
    while filled < n:
        count = min(filled, n - filled)
        s0, s1 = _apply(_jump_power(k), states[:count, 0].copy(), states[:count, 1].copy())
        states[filled:filled + count, 0] = s0
        states[filled:filled + count, 1] = s1
        filled += count
        k += 1
    return states


def init_xoroshiro128p_states_cpu(states, seed, subsequence_start):
    """Fills a host array of states (structured ``xoroshiro128p_dtype`` or ``uint64`` of shape
    ``(n, 2)``) as Numba's function of the same name."""
    n = states.shape[0]
    values = _host_states(n, seed, subsequence_start)
    if states.dtype.names is not None:
        states["s0"] = values[:, 0]
        states["s1"] = values[:, 1]
    else:
        states[...] = values


def init_xoroshiro128p_states(states, seed, subsequence_start=0, stream=0):
    """Initializes a device array of states (dtype ``xoroshiro128p_dtype``): generator i is
    2**64 * (subsequence_start + i) steps into the sequence of ``seed``."""
    host = _host_states(states.shape[0], seed, subsequence_start)
    states.copy_to_device(host.view(xoroshiro128p_dtype).reshape(states.shape[0]), stream=stream)
    if not stream:
        states.__tessel_array__.wait()


def create_xoroshiro128p_states(n, seed, subsequence_start=0, stream=0):
    """A new device array of ``n`` generator states (dtype ``xoroshiro128p_dtype``) on the
    selected device, initialized as :func:`init_xoroshiro128p_states`."""
    from . import _api

    states = _api.device_array(n, dtype=xoroshiro128p_dtype, stream=stream)
    init_xoroshiro128p_states(states, seed, subsequence_start, stream)
    return states


def __getattr__(name):
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(name)
    from ._unsupported import error

    if name == "xoroshiro128p_type":
        raise error("random.xoroshiro128p_type", "tessel has no Numba record types; the states are a uint64 "
                                                 "array of shape (n, 2) in kernels (dtype: xoroshiro128p_dtype)")
    raise error(f"random.{name}", "not a part of numba.cuda.random that tessel provides")


_DEVICE_FUNCTIONS = ("_add_u64", "_mul_u64", "rotl", "init_xoroshiro128p_state", "xoroshiro128p_next",
                     "xoroshiro128p_jump", "uint64_to_unit_float64", "uint64_to_unit_float32",
                     "xoroshiro128p_uniform_float32", "xoroshiro128p_uniform_float64",
                     "xoroshiro128p_normal_float32", "xoroshiro128p_normal_float64")


def _make_device_functions():
    """Makes the device functions tessel device functions (callable from kernels; outside them
    they still run as the plain Python above). Without the kernel compiler they stay plain."""
    try:
        from tessel.kernel import jit
    except ImportError:
        return
    names = globals()
    for name in _DEVICE_FUNCTIONS:
        names[name] = jit(device=True)(names[name])


_make_device_functions()
