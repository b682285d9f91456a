"""``omniprof.profile``: ``torch.profiler.profile``'s API over omniprof's session engine."""

import enum
import os
from typing import Any, Callable, Iterable, List, Optional, Union

from . import _native, _observer, _warn
from ._native import KeyAverages, ProfilerError, Schedule, Trace


class ProfilerActivity(enum.Enum):
    """``torch.profiler.ProfilerActivity``: what to record.

    ``CPU`` selects host ops, user ranges and instants; each device member selects the device
    activity classes (kernels, memory copies and sets, runtime and driver calls, syncs) of the
    backends that take part (a plugin in ``KINETO_PLUGIN_LIB_DIR_PATH``, a registered backend).
    Activity type names (``"kernel"``, ``"gpu_pm_counter"``, ``"cpu_op"``, ...) may be given
    as strings beside or instead of these.
    """

    CPU = "CPU"
    CUDA = "CUDA"
    XPU = "XPU"
    MTIA = "MTIA"
    HPU = "HPU"
    PrivateUse1 = "PrivateUse1"


# The parameters of PyTorch's schedule, as ``torch.profiler.schedule``'s closure holds them.
_SCHEDULE_PARAMS = ("wait", "warmup", "active", "repeat", "skip_first", "skip_first_wait")


def _as_schedule(schedule: Any) -> Optional[Schedule]:
    """An ``omniprof.schedule``, or the same schedule read from a
    ``torch.profiler.schedule(...)`` (so switching the import is enough); any other callable
    is refused, since omniprof runs the schedule's action table in Rust."""
    if schedule is None or isinstance(schedule, Schedule):
        return schedule
    code = getattr(schedule, "__code__", None)
    cells = getattr(schedule, "__closure__", None) or ()
    if code is not None and getattr(schedule, "__module__", "") == "torch.profiler.profiler":
        values = dict(zip(code.co_freevars, (c.cell_contents for c in cells)))
        if all(k in values for k in _SCHEDULE_PARAMS):
            return Schedule(**{k: int(values[k]) for k in _SCHEDULE_PARAMS})
    raise TypeError(
        "schedule must come from omniprof.schedule(...) or torch.profiler.schedule(...), "
        f"not {type(schedule).__name__}"
    )


class ProfilerAction(enum.IntEnum):
    """``torch.profiler.ProfilerAction``: what a schedule does at a step."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def _activity_name(activity: Any) -> str:
    if isinstance(activity, ProfilerActivity):
        return activity.value
    if isinstance(activity, str):
        return activity
    # torch.profiler.ProfilerActivity members, so switching the import is enough.
    name = getattr(activity, "name", None)
    if isinstance(name, str) and name in ProfilerActivity.__members__:
        return name
    raise TypeError(
        f"activities holds {activity!r}: expected omniprof.ProfilerActivity or an activity "
        "type name"
    )


class profile:
    """``torch.profiler.profile``: records omniprof ranges (and the activities selected) while
    it runs, as a context manager or with ``start()``/``stop()``/``step()``.

    Args:
        activities: ``ProfilerActivity`` members and/or activity type names. ``None``: the
            configuration's selection, by default every default activity type, which is
            ``CPU`` plus whatever the backends present can record (as ``torch.profiler``
            takes CPU plus the available accelerator). An empty list raises
            ``AssertionError``, a name given twice or unknown ``ValueError``.
        schedule: an ``omniprof.schedule(...)``, or a ``torch.profiler.schedule(...)`` (read
            as the same schedule); ``step()`` then drives cycles of warm-up and recording,
            each step wrapped in a ``ProfilerStep#<n>`` range.
        on_trace_ready: called with this profiler when a trace is finished (each recorded
            cycle with a schedule, the stop without); ``export_chrome_trace`` and
            ``key_averages`` inside it see that trace. If it raises, the exception propagates
            from ``step()``/``stop()``, the profiler is stopped (the cycle in progress is
            discarded) and can be started again, and the trace stays exportable.
        record_shapes: record input shapes (``Input Dims``) of observed PyTorch ops.
            omniprof's own ``record_function`` ranges have no inputs.

    With ``torch`` installed, the session also records every op PyTorch reports through
    ``RecordFunction`` (ATen ops, autograd nodes, optimizer steps as ``cpu_op``;
    ``torch.profiler.record_function`` ranges as ``user_annotation``), on the thread that ran
    them, through a C++ observer built on first use (needs a C++ compiler and ninja).
        config: Kineto configuration text (``KEY=VALUE`` lines); ``ValueError`` when invalid.

    Example::

        with omniprof.profile() as prof:
            with omniprof.record_function("step"):
                work()
        print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))
        prof.export_chrome_trace("trace.json")
    """

    def __init__(
        self,
        *,
        activities: Optional[Iterable[Union[ProfilerActivity, str]]] = None,
        schedule: Any = None,
        on_trace_ready: Optional[Callable[["profile"], Any]] = None,
        record_shapes: bool = False,
        config: Optional[str] = None,
    ) -> None:
        names: Optional[List[str]] = None
        if activities is not None:
            names = [_activity_name(a) for a in activities]
            # torch.profiler asserts the same.
            assert names, "No valid profiler activities found"
        schedule = _as_schedule(schedule)
        self.on_trace_ready = on_trace_ready
        self.record_shapes = record_shapes
        self._session = _native.Session(names, schedule, config, record_shapes)
        # The last finished trace; the trace handler reads it.
        self._trace: Optional[Trace] = None

    def __enter__(self) -> "profile":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        """Starts recording (with a schedule: step 0's action). ``ProfilerError`` when
        another profiler runs in this process or this one already runs.

        With torch installed, PyTorch's ops are observed while a trace records (the
        observer is built on the first start, before recording begins)."""
        _observer.install()
        self._session.start()

    def stop(self) -> None:
        """Stops recording (with a schedule: ends the run, handing a recording cycle's trace
        to ``on_trace_ready``)."""
        try:
            self._session.stop()
        finally:
            self._deliver()

    def step(self) -> None:
        """Ends a step: with a schedule, takes the next step's action (which may finish a
        cycle and call ``on_trace_ready``)."""
        try:
            self._session.step()
        finally:
            self._deliver()

    def _deliver(self) -> None:
        failed: List[str] = []
        for trace in self._session.take_traces():
            self._trace = trace
            failed.extend(trace.backend_errors)
            if self.on_trace_ready is not None:
                try:
                    self.on_trace_ready(self)
                except BaseException:
                    self._session.abort()
                    raise
        # After every trace is delivered, so a warning raised as an error loses none. A
        # backend left out of a trace would otherwise show only in its `backend_errors` key.
        for error in failed:
            _warn.warn(f"omniprof: backend failed: {error}")

    def _require_trace(self, call: str) -> Trace:
        if self._trace is None:
            raise ProfilerError(
                f"cannot {call}: no trace yet (stop the profiler, or with a schedule let a "
                "recording cycle finish)"
            )
        return self._trace

    def key_averages(self, group_by_input_shape: bool = False) -> KeyAverages:
        """PyTorch's ``key_averages()``: per-name rows of the last trace; ``.table()`` prints
        them exactly as ``omniprof summary`` prints the exported file."""
        return self._require_trace("key_averages").key_averages(group_by_input_shape)

    def export_chrome_trace(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes the last trace in the format ``path``'s extension names: Kineto's Chrome
        JSON (``.json``, ``.json.gz``) or Perfetto's protobuf (``.pftrace``).
        ``ProfilerError`` before a trace exists, for another extension, or when the path
        cannot be written; the trace is kept, so export can be retried."""
        self._require_trace("export_chrome_trace").export_chrome_trace(os.fspath(path))

    def add_metadata(self, key: str, value: str) -> None:
        """Adds a top-level ``key: value`` to the traces finished from now on."""
        self._session.add_metadata(key, value)

    def add_metadata_json(self, key: str, value: str) -> None:
        """Adds a top-level key whose value is the JSON text ``value``."""
        self._session.add_metadata_json(key, value)

    @property
    def step_num(self) -> int:
        """The number of ``step()`` calls of the running profiler."""
        return self._session.step_num

    @property
    def current_action(self) -> ProfilerAction:
        """The current step's action (``NONE`` when not running)."""
        return ProfilerAction(self._session.current_action)


def tensorboard_trace_handler(
    dir_name: Union[str, "os.PathLike[str]"],
    worker_name: Optional[str] = None,
    use_gzip: bool = False,
) -> "_native.TraceDirHandler":
    """``torch.profiler.tensorboard_trace_handler``: an ``on_trace_ready`` callback writing
    each trace as ``{worker_name}.{time_ns}.pt.trace.json[.gz]`` into ``dir_name`` (created
    when missing; ``worker_name`` defaults to ``{hostname}_{pid}``). Its ``written`` lists the
    files written."""
    return _native.TraceDirHandler(os.fspath(dir_name), worker_name, use_gzip)
