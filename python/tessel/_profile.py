"""Profiling: ts.profile() sessions, ts.profile.range, ts.benchmark and checked mode.

See docs/guide/profiling.rst. The recording itself is C++ (tessel/profile/session.hpp): this file
wraps it, turns records into Python objects and draws the memory timeline.
"""
from __future__ import annotations

import functools
import os
import time
import warnings

from . import _tessel


def _median(values):
    import statistics  # here, not at the top: it costs a few ms of import tessel (decimal, fractions)

    return statistics.median(values)


__all__ = ["profile", "Profile", "ProfileRange", "benchmark", "BenchmarkResult", "set_checks", "checks"]

#: Records kept per kind of event (host ops, GPU activities, compiles, memory events) before later
#: ones are dropped and counted in Profile.dropped.
DEFAULT_MAX_EVENTS = 1 << 18

_warned_host_only = False
_warned_unlinked = False

class ProfileRange:
    """``ts.profile.range(name)``: a named range, as a context manager or a decorator::

        with ts.profile.range("solver step"):
            ...

        @ts.profile.range("update")
        def update(x): ...

    It shows up in Nsight Systems (an NVTX range in the ``tessel`` domain) and in a recording
    ts.profile() session as a host op that contains the ops run inside it. Costs one C++ call
    when nothing listens.
    """

    __slots__ = ("name", "_tokens")

    def __init__(self, name):
        self.name = str(name)
        self._tokens = []

    def __enter__(self):
        self._tokens.append(_tessel._profile_range_begin(self.name))
        return self

    def __exit__(self, exc_type, exc, tb):
        _tessel._profile_range_end(self._tokens.pop())
        return False

    def __call__(self, fn):
        name = self.name
        begin, end = _tessel._profile_range_begin, _tessel._profile_range_end

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            token = begin(name)
            try:
                return fn(*args, **kwargs)
            finally:
                end(token)

        return wrapper

    def __repr__(self):
        return f"ts.profile.range({self.name!r})"


class Profile:
    """A profile session: ``with ts.profile() as prof: ...``, then ``prof.table()``,
    ``prof.export_chrome_trace(path)`` and ``prof.memory_timeline(path)``.

    Records host ops (name, shapes/dtypes, device, stream, thread, start/end), GPU kernels,
    memcpys and memsets (CUPTI, linked to their op), JIT compiles and allocator events. Sessions
    do not nest: starting one while another records raises tessel.TesselError. Each kind of event
    keeps at most ``max_events`` records (later ones are counted in ``dropped``). Without CUPTI
    (no GPU, libcupti missing, or Nsight holding it) only host ops, compiles and memory are
    recorded; a warning says so once. When another CUPTI subscriber holds CUPTI's Callback API,
    GPU activities are recorded but not linked to their ops (``op_id`` 0, ``gpu_linked`` False);
    a warning says that once too. ``gpu=False`` records host ops, compiles and memory only, which
    adds less host time per op; ``TESSEL_PROFILE_CUPTI`` chooses how CUPTI is driven.
    """

    def __init__(self, *, max_events=DEFAULT_MAX_EVENTS, gpu=True):
        if int(max_events) < 1:
            raise ValueError("ts.profile: max_events must be at least 1")
        self._max_events = int(max_events)
        self._gpu = bool(gpu)
        self._session = None

    def start(self):
        global _warned_host_only, _warned_unlinked
        if self._session is not None:
            raise _tessel.TesselError("ts.profile: this Profile was already started; make a new one")
        self._session = _tessel._ProfileSession(self._max_events, self._gpu)
        if self._gpu and not self._session.gpu_recorded and _tessel.cuda_available() and not _warned_host_only:
            _warned_host_only = True
            warnings.warn(f"ts.profile: recording host ops only (no GPU kernels): {self._session.cupti_status}",
                          RuntimeWarning, stacklevel=3)
        elif self._session.gpu_recorded and not self._session.gpu_linked and not _warned_unlinked:
            _warned_unlinked = True
            warnings.warn(f"ts.profile: {self._session.cupti_status}", RuntimeWarning, stacklevel=3)
        return self

    def stop(self):
        self._require().stop()
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, exc, tb):
        if self._session is not None:
            self._session.stop()
        return False

    def _require(self):
        if self._session is None:
            raise _tessel.TesselError("ts.profile: the session was never started (use `with ts.profile() as p:`)")
        return self._session

    @property
    def recording(self):
        return self._session is not None and self._session.recording

    @property
    def ops(self):
        """Host ops: dicts with id, name, args, device, stream, thread, depth, start_ns, end_ns."""
        return self._require().ops()

    @property
    def gpu_activities(self):
        """Kernels, memcpys and memsets: dicts with kind, name, device, stream, start_ns, end_ns,
        correlation, op_id (the launching op's id, 0 outside ops) and bytes."""
        return self._require().gpu()

    @property
    def compiles(self):
        """JIT compiles: dicts with name, source (memory, disk or nvrtc), cache_hit, start_ns, end_ns."""
        return self._require().compiles()

    @property
    def memory_events(self):
        """Allocator events: dicts with kind (alloc, free, cache_hit, cache_miss, oom_retry, oom),
        device (pool), bytes, allocated, reserved, time_ns, detail."""
        return self._require().memory()

    @property
    def dropped(self):
        return self._require().dropped

    @property
    def gpu_recorded(self):
        return self._require().gpu_recorded

    @property
    def gpu_linked(self):
        """True when the GPU activities were linked to the ops that launched them."""
        return self._require().gpu_linked

    @property
    def cupti_status(self):
        return self._require().cupti_status

    def export_chrome_trace(self, path):
        """Writes a Chrome trace (Perfetto, chrome://tracing): host ops on thread tracks, kernels on
        stream tracks, memory as counter tracks. Stops the session first."""
        self._require().export_chrome_trace(os.fspath(path))

    def table(self, sort_by="gpu_time", group_by="op", row_limit=0):
        """A text table of ops: calls, CPU and GPU time, share of GPU time, kernels.
        sort_by: gpu_time, cpu_time, count or name; group_by: op or op_args (with shapes)."""
        return self._require().table(str(sort_by), str(group_by), int(row_limit))

    def memory_timeline(self, path, *, title="tessel memory"):
        """Draws allocated and reserved bytes per pool over time into a PNG (matplotlib)."""
        events = self.memory_events
        try:
            from matplotlib.backends.backend_agg import FigureCanvasAgg
            from matplotlib.figure import Figure
        except ImportError as e:  # pragma: no cover - matplotlib is a test dependency
            raise _tessel.TesselError("ts.profile.memory_timeline needs matplotlib (pip install matplotlib)") from e
        fig = Figure(figsize=(8, 3.5), dpi=100)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(1, 1, 1)
        origin = min((e["time_ns"] for e in events), default=0)
        for pool in sorted({e["device"] for e in events}):
            mine = [e for e in events if e["device"] == pool]
            t = [(e["time_ns"] - origin) * 1e-6 for e in mine]
            ax.step(t, [e["allocated"] / 2**20 for e in mine], where="post", label=f"{pool} allocated")
            ax.step(t, [e["reserved"] / 2**20 for e in mine], where="post", linestyle="--", label=f"{pool} reserved")
            for e, x in zip(mine, t):
                if e["kind"] in ("oom_retry", "oom"):
                    ax.axvline(x, color="red", linewidth=0.8)
        ax.set_xlabel("time (ms)")
        ax.set_ylabel("MiB")
        ax.set_title(title if events else f"{title} (no allocator events)")
        if events:
            ax.legend(loc="upper left", fontsize="small")
        fig.tight_layout()
        path = os.fspath(path)
        try:
            fig.savefig(path, format="png")
        except OSError as e:
            raise _tessel.TesselError(f"ts.profile.memory_timeline: cannot write '{path}': {e.strerror or e}") from None

    def __repr__(self):
        if self._session is None:
            return "<ts.profile: not started>"
        s = self._session
        state = "recording" if s.recording else "stopped"
        return f"<ts.profile {state}: {len(s.ops())} ops, {len(s.gpu())} GPU activities, {len(s.memory())} memory events>"


class _ProfileEntry:
    """``ts.profile(...)`` makes a Profile; ``ts.profile.range`` is the range helper."""

    range = ProfileRange
    Profile = Profile
    DEFAULT_MAX_EVENTS = DEFAULT_MAX_EVENTS

    def __call__(self, *, max_events=DEFAULT_MAX_EVENTS, gpu=True):
        return Profile(max_events=max_events, gpu=gpu)

    def __repr__(self):
        return "<ts.profile: call it for a session (with ts.profile() as p: ...); ts.profile.range(name)>"


profile = _ProfileEntry()


class BenchmarkResult:
    """Per-run host (CPU) and device (GPU) times in seconds of ts.benchmark; str() is one line."""

    def __init__(self, name, cpu_times, gpu_times, device):
        self.name = name
        self.cpu_times = list(cpu_times)
        self.gpu_times = list(gpu_times)
        self.device = device

    @staticmethod
    def _summary(label, times):
        us = sorted(t * 1e6 for t in times)
        median = _median(us)
        q1, q3 = us[len(us) // 4], us[(3 * len(us)) // 4]
        return f"{label}: {median:10.3f} us +/- {(q3 - q1) / 2:7.3f} (min {us[0]:10.3f} / max {us[-1]:10.3f}) us"

    @property
    def cpu_median(self):
        return _median(self.cpu_times)

    @property
    def gpu_median(self):
        return _median(self.gpu_times)

    def __str__(self):
        label = f"GPU-{self.device.index}" if self.device.type == "cuda" else "CPU-timer"
        return f"{self.name:<20}: {self._summary('CPU', self.cpu_times)}    {self._summary(label, self.gpu_times)}"

    __repr__ = __str__


def benchmark(fn, args=(), kwargs=None, *, n_warmup=10, n_repeat=100, name=None, device=None):
    """Times ``fn(*args, **kwargs)`` as cupyx.profiler.benchmark does: ``n_warmup`` untimed calls,
    then ``n_repeat`` calls, each with its host time (perf_counter around the call) and its device
    time (events recorded before and after it on the current stream, waited for after each call).
    The device is ``device``, else that of the first tessel array among the arguments, else the
    default device. On the CPU backend the device time is that of host timestamps around the call.
    Returns a BenchmarkResult; print it for one line with medians and spread (half the interquartile range)."""
    if not callable(fn):
        raise TypeError(f"ts.benchmark: fn must be callable, got {type(fn).__name__}")
    if int(n_repeat) < 1 or int(n_warmup) < 0:
        raise ValueError(f"ts.benchmark: n_repeat must be >= 1 and n_warmup >= 0, got {n_repeat} and {n_warmup}")
    kwargs = {} if kwargs is None else kwargs
    if device is None:
        arrays = [a for a in (*args, *kwargs.values()) if isinstance(a, _tessel.Array)]
        dev = arrays[0].device if arrays else _tessel.default_device()
    else:
        dev = device if isinstance(device, _tessel.Device) else _tessel.Device(str(device))
    stream = _tessel.current_stream(dev)
    for _ in range(int(n_warmup)):
        fn(*args, **kwargs)
    start, stop = _tessel._Event(dev, True), _tessel._Event(dev, True)
    cpu, gpu = [], []
    clock = time.perf_counter
    for _ in range(int(n_repeat)):
        start.record(stream)
        t0 = clock()
        fn(*args, **kwargs)
        t1 = clock()
        stop.record(stream)
        stop.synchronize()
        cpu.append(t1 - t0)
        gpu.append(start.elapsed_ms(stop) * 1e-3)
    return BenchmarkResult(name or getattr(fn, "__name__", "fn"), cpu, gpu, dev)


def set_checks(items):
    """Checked mode: ``ts.set_checks("sync,nan")`` (or a list of names; None or "" turns it off).
    sync: synchronize after every op, so an asynchronous error names the op and its arguments;
    nan: raise at the first op whose floating result holds NaN/Inf, naming it and the count;
    bounds: host-side bounds checks of RawKernel/ElementwiseKernel array arguments."""
    if items is None:
        items = ""
    elif not isinstance(items, str):
        items = ",".join(str(i) for i in items)
    _tessel._set_checks(items)


def checks():
    """The checks on now, as a tuple of names."""
    value = _tessel._checks()
    return tuple(value.split(",")) if value else ()


# `tessel profile -- python script.py` sets TESSEL_PROFILE: the library records from the first op
# and writes the trace and table at exit; Python's atexit runs while the interpreter (and CUDA)
# are still whole.
if os.environ.get("TESSEL_PROFILE"):
    import atexit

    atexit.register(_tessel._profile_finish_env)
