"""``omniprof.profile``: ``torch.profiler.profile``'s API over omniprof's session engine."""

import enum
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Set, Tuple, Union

from . import _cuda, _native, _observer, _warn
from ._event_list import EventList
from ._native import ProfilerError, Schedule, Trace

_cuda.set_search_path()


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


def _as_schedule(schedule: Any) -> Any:
    """An ``omniprof.schedule``; the same schedule read from a
    ``torch.profiler.schedule(...)`` (so switching the import is enough, and the schedule's
    table runs in Rust); or any other callable, which, as in PyTorch, is called with each
    step's number for its ``ProfilerAction`` (the native session says what is neither)."""
    if schedule is None or isinstance(schedule, Schedule):
        return schedule
    code = getattr(schedule, "__code__", None)
    cells = getattr(schedule, "__closure__", None) or ()
    if code is not None and getattr(schedule, "__module__", "") == "torch.profiler.profiler":
        values = dict(zip(code.co_freevars, (c.cell_contents for c in cells)))
        if all(k in values for k in _SCHEDULE_PARAMS):
            return Schedule(**{k: int(values[k]) for k in _SCHEDULE_PARAMS})
    return schedule


class ProfilerAction(enum.Enum):
    """``torch.profiler.ProfilerAction``: what a schedule does at a step. Its members equal
    PyTorch's of the same value (and hash as they do), so code that compares an action with
    either enum, or keys a ``dict`` by them, works whichever profiler gave the action; torch
    is not imported for it."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3
    # PyTorch's profiler takes it when the device stopped collecting mid-cycle; omniprof's
    # backends keep collecting, so no step takes it here (a schedule must not return it).
    DEVICE_STOPPED = 4

    def __eq__(self, other: object) -> bool:
        if isinstance(other, enum.Enum) and type(other).__name__ == "ProfilerAction":
            return bool(self.value == other.value)
        return NotImplemented

    def __hash__(self) -> int:
        # Enum's own hash, which PyTorch's members keep: equal members hash alike.
        return hash(self._name_)


def _record_every_step(step: int) -> ProfilerAction:
    """torch.profiler's schedule of a profile without one: every step records."""
    return ProfilerAction.RECORD


def _first_action(schedule: Callable[[int], Any]) -> "ProfilerAction":
    """Step 0's action, which torch.profiler's ``current_action`` holds from its
    construction on (it asks the schedule then, as this does); ``NONE`` where the schedule
    gives no action (the start then says what it gave)."""
    action = schedule(0)
    try:
        return ProfilerAction(getattr(action, "value", action))
    except ValueError:
        return ProfilerAction.NONE


# torch.profiler.profile's arguments that omniprof accepts without acting on them yet, each
# with the value that asks for nothing: any other value warns once per process.
_NOT_YET_SUPPORTED = {
    "experimental_config": None,
}
_warned: Set[str] = set()


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        _warn.warn(message)


def _flag_positions(flag: str) -> List[int]:
    """Where an ``_ExperimentalConfig``'s boolean ``flag`` sits in ``__getstate__`` (which
    differs between PyTorch releases): the positions that setting it changes."""
    from torch._C._profiler import _ExperimentalConfig

    make: Any = _ExperimentalConfig
    default, flipped = make().__getstate__(), make(**{flag: True}).__getstate__()
    return [i for i, (a, b) in enumerate(zip(default, flipped)) if a != b]


def _asks_flag(config: Any, flag: str) -> bool:
    """Whether an ``_ExperimentalConfig`` has its boolean ``flag`` set."""
    if config is None:
        return False
    try:
        at = _flag_positions(flag)
        return len(at) == 1 and bool(config.__getstate__()[at[0]])
    except Exception:  # a PyTorch without the flag
        return False


def _asks_cuda_sync(config: Any) -> bool:
    """Whether an ``_ExperimentalConfig`` has ``enable_cuda_sync_events=True``: then CUDA
    synchronization (``cuda_sync``) is recorded with ``ProfilerActivity.CUDA``."""
    return _asks_flag(config, "enable_cuda_sync_events")


def _asks_overload_names(config: Any) -> bool:
    """Whether an ``_ExperimentalConfig`` has ``capture_overload_names=True``: then each
    op's overload name is recorded, for ``key_averages(group_by_overload_name=True)``."""
    return _asks_flag(config, "capture_overload_names")


def _asks_event_metadata(config: Any) -> bool:
    """Whether an ``_ExperimentalConfig`` has ``expose_kineto_event_metadata=True``: then
    the events of device work and runtime calls expose their args as ``metadata``."""
    return _asks_flag(config, "expose_kineto_event_metadata")


def _asks_beyond_verbose(config: Any) -> bool:
    """Whether an ``_ExperimentalConfig`` asks for more than ``verbose`` (the ``Call stack``
    arg, which omniprof always writes with stacks), ``enable_cuda_sync_events``,
    ``capture_overload_names`` and ``expose_kineto_event_metadata`` (acted on) and the
    deprecated, ignored
    ``adjust_profiler_step``: what it asks then is not acted on."""
    if config is None:
        return False
    try:
        from torch._C._profiler import _ExperimentalConfig

        given, default = config.__getstate__(), _ExperimentalConfig().__getstate__()
        acted_on = (
            "verbose",
            "enable_cuda_sync_events",
            "capture_overload_names",
            "expose_kineto_event_metadata",
            "adjust_profiler_step",
        )
        ignored = {i for flag in acted_on for i in _flag_positions(flag)}
        return any(a != b for i, (a, b) in enumerate(zip(given, default)) if i not in ignored)
    except Exception:  # another torch's config: say it is not acted on
        return True


# The legacy profiler's `use_device` names and the activity each selects; any other name is
# a PrivateUse1 backend's.
_DEVICE_ACTIVITIES = {"cuda": "CUDA", "xpu": "XPU", "mtia": "MTIA", "hpu": "HPU"}


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


@dataclass
class ProfilerActivityConfig:
    """``torch.profiler.ProfilerActivityConfig``: what to record of one ``ProfilerActivity``,
    given as a ``dict`` value in ``activities`` (``{ProfilerActivity.CUDA: config}``).

    Args:
        activity_types: the activity types to record (Kineto's names, ``"GPU_MEMCPY"``, or
            omniprof's, ``"gpu_memcpy"``); ``None`` records the member's defaults, ``[]``
            none of its types.
        profiler_configs: PyTorch's profiler extensions (``PerformanceMetricsConfig``,
            ``CuspyConfig``): accepted, not acted on (omniprof warns once).
    """

    activity_types: Optional[List[str]] = None
    profiler_configs: List[Any] = field(default_factory=list)


def _parse_activities(
    activities: Iterable[Any],
) -> Tuple[List[str], List[str], Dict[ProfilerActivity, Any]]:
    """torch.profiler's ``activities``, read as PyTorch reads them: ``ProfilerActivity``
    members (omniprof's or torch's), activity type names, and ``dict``s from a member to
    the names of the types to record of it (or to a ``ProfilerActivityConfig``).

    Returns the names to select (members, types), the members whose types a ``dict``
    filters, and each ``dict`` key's config (a ``ProfilerActivityConfig``, as PyTorch's
    ``activity_configs`` holds them). A member given twice is a ``ValueError``,
    an item of another kind a ``TypeError``, a type that is unknown or not the member's a
    ``ProfilerError`` (a ``RuntimeError``), as in PyTorch."""
    names: List[str] = []
    groups: List[str] = []
    configs: Dict[ProfilerActivity, Any] = {}
    members = ProfilerActivity.__members__

    def given(member: str) -> None:
        if member in names or member in groups:
            raise ValueError(f"Activity ProfilerActivity.{member} specified more than once")

    for item in activities:
        if not isinstance(item, dict):
            name = _activity_name(item)
            if name in members:
                given(name)
            names.append(name)
            continue
        for key, value in item.items():
            member = _activity_name(key)
            if member not in members:
                raise TypeError(
                    f"activities holds a dict keyed by {key!r}: expected a ProfilerActivity"
                )
            given(member)
            is_config = hasattr(value, "activity_types")  # omniprof's or torch's config
            types = value.activity_types if is_config else value
            if types is not None and (
                isinstance(types, (str, bytes))
                or not isinstance(types, Iterable)
                or not all(isinstance(t, str) for t in types)
            ):
                raise TypeError(
                    f"activities[{member}] is {value!r}: expected a list of activity type "
                    "names or a ProfilerActivityConfig"
                )
            configs[ProfilerActivity[member]] = (
                value if is_config else ProfilerActivityConfig(activity_types=value)
            )
            if types is None:
                names.append(member)
            else:
                groups.append(member)
                # A type two members' filters name (a runtime's calls: CPU's and its
                # device's) is selected once.
                filtered = _native.activity_filter(member, list(types))
                names.extend(t for t in dict.fromkeys(filtered) if t not in names)
    return names, groups, configs


class profile:
    """``torch.profiler.profile``: records omniprof ranges (and the activities selected) while
    it runs, as a context manager or with ``start()``/``stop()``/``step()``.

    Args:
        activities: ``ProfilerActivity`` members and/or activity type names, and as in
            ``torch.profiler`` ``dict``s from a member to the types to record of it
            (``{ProfilerActivity.CUDA: ["GPU_MEMCPY", "CUDA_RUNTIME"]}``, ``[]`` for none)
            or to a ``ProfilerActivityConfig``. ``None``: the configuration's selection, by
            default every default activity type, which is ``CPU`` plus whatever the
            backends present can record (as ``torch.profiler`` takes CPU plus the available
            accelerator). An empty list raises ``AssertionError``, a name given twice or
            unknown ``ValueError``, a member given twice ``ValueError``, a type that is not
            the member's ``RuntimeError``. A type filtered out is left out of the trace, so
            of ``events()`` and ``key_averages()`` too (PyTorch leaves it out of the trace
            file only).
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
        profile_memory: record PyTorch's allocator reports (``[memory]`` events, on every
            thread that runs ops while recording, where no ``torch.profiler`` session holds
            them); rows gain ``cpu_memory_usage`` and ``self_cpu_memory_usage`` (and the
            device ones) and the table PyTorch's memory columns.
        with_flops: PyTorch's FLOP count of each op it counts (``mm``, ``addmm``, ``bmm``,
            ``baddbmm``, ``conv2d``, ``mul``, ``add``) as its ``flops`` arg and on rows;
            records shapes too, as PyTorch does.
        with_stack: record Python calls (``python_function`` events, ``nn.Module`` calls) and
            give each op its ``Call stack``, through omniprof's tracer.
        with_modules: each op TorchScript runs gets its ``Module Hierarchy``.
        execution_trace_observer: PyTorch's ``ExecutionTraceObserver`` (registered with
            ``register_callback(path)``), or another object with ``start()``, ``stop()`` and
            ``cleanup()``: as in ``torch.profiler``, started when recording starts and stopped
            when it stops (with a schedule, around each recording cycle), cleaned up (the
            file finalized) when the ``with`` block ends. Each op and user range then carries
            its ``Record function id`` (its node's ``rf_id``) and takes it as its
            ``External id``, so HTA's ``correlate_execution_trace`` and Chakra's
            ``chakra_trace_link`` join the two files. ``None`` with
            ``ENABLE_PYTORCH_EXECUTION_TRACE=1`` set: one writing to a temporary file, as
            ``torch.profiler`` builds it.
        custom_trace_id_callback: called at the start of each recording cycle for the id
            of its trace (its ``trace_id``, and ``get_trace_id()``), as torch.profiler
            calls it; one that raises or gives no string is warned about.
        acc_events: as in ``torch.profiler``, ``events()`` and ``key_averages()`` hold the
            events of every trace this profile finished (the newest first), not the last
            one's only; the exports write the last trace.
        experimental_config: accepted for ``torch.profiler`` compatibility; omniprof does
            not act on it yet (but for its ``verbose``, ``enable_cuda_sync_events`` and
            ``capture_overload_names``) and warns once when it asks for something.
        use_cuda: the deprecated spelling of ``ProfilerActivity.CUDA`` in ``activities``.
        use_device: the legacy profiler's spelling (``torch.autograd.profiler.profile``) of a
            device activity: ``"cuda"``, ``"xpu"``, ``"mtia"``, ``"hpu"``, else the
            PrivateUse1 backend's name, which selects ``ProfilerActivity.PrivateUse1``. A
            PrivateUse1 backend that registered PyTorch's profiler stubs then gets each op's
            device time measured as the legacy profiler measures it (see docs/python.md).
        post_processing_timeout_s: accepted; omniprof's post-processing does not time out.

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
        activities: Optional[Iterable[Union[ProfilerActivity, str, Dict[Any, Any]]]] = None,
        schedule: Any = None,
        on_trace_ready: Optional[Callable[["profile"], Any]] = None,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        with_modules: bool = False,
        experimental_config: Any = None,
        execution_trace_observer: Any = None,
        acc_events: bool = False,
        custom_trace_id_callback: Optional[Callable[[], str]] = None,
        post_processing_timeout_s: Optional[float] = None,
        use_cuda: Optional[bool] = None,
        config: Optional[str] = None,
        use_device: Optional[str] = None,
    ) -> None:
        names: Optional[List[str]] = None
        groups: List[str] = []
        #: torch.profiler's: each ``dict`` key's ``ProfilerActivityConfig``.
        self.activity_configs: Dict[ProfilerActivity, Any] = {}
        if activities is not None:
            names, groups, self.activity_configs = _parse_activities(activities)
            # torch.profiler asserts the same.
            assert names or self.activity_configs, "No valid profiler activities found"
            extensions = [
                extension
                for config in self.activity_configs.values()
                for extension in getattr(config, "profiler_configs", None) or []
            ]
            for extension in extensions:
                _warn_once(
                    f"extension {type(extension).__name__}",
                    f"omniprof does not act on {type(extension).__name__} (a "
                    "ProfilerActivityConfig's profiler_configs) yet; it is ignored",
                )
        if use_cuda:
            _warn_once(
                "use_cuda",
                "omniprof: use_cuda is deprecated (as in torch.profiler): pass "
                "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] instead",
            )
            names = (names or ["CPU"]) + ([] if "CUDA" in (names or []) else ["CUDA"])
        if use_device is not None:
            device = _DEVICE_ACTIVITIES.get(use_device, "PrivateUse1")
            names = (names or ["CPU"]) + ([] if device in (names or []) else [device])
            if device == "PrivateUse1":
                # The legacy profiler's timing: the stubs alone, without the backend's Kineto
                # profiler (which ProfilerActivity.PrivateUse1 uses where there is one).
                config = (config + "\n" if config else "") + "OMNIPROF_PRIVATEUSE1_PROFILER=false"
        given = {
            "experimental_config": experimental_config,
        }
        for key, value in given.items():
            if key == "experimental_config" and not _asks_beyond_verbose(value):
                continue
            if value != _NOT_YET_SUPPORTED[key]:
                _warn_once(key, f"omniprof does not support {key} yet; it is ignored")
        if _asks_overload_names(experimental_config):
            config = (config + "\n" if config else "") + "OMNIPROF_CAPTURE_OVERLOAD_NAMES=true"
        if names is not None and "CUDA" in names + groups and _asks_cuda_sync(experimental_config):
            names = names + ["cuda_sync"]
        #: torch.profiler's: the schedule as given (one that records every step without one).
        self.schedule: Callable[[int], Any] = schedule if schedule is not None else _record_every_step
        #: Whether steps are recorded as ``ProfilerStep#N`` ranges: with a schedule.
        self.record_steps = schedule is not None
        schedule = _as_schedule(schedule)
        self._activity_names: List[str] = list(names or [])
        # The members given as dict keys, their types filtered.
        self._activity_groups = groups
        self._activities_given = names is not None
        self.custom_trace_id_callback = custom_trace_id_callback
        #: Metadata preset with ``preset_metadata_json``, as torch.profiler keeps it.
        self.preset_metadata: Dict[str, str] = {}
        # The action of the last step seen, to tell when a recording cycle begins.
        self._last_action = ProfilerAction.NONE
        # The id custom_trace_id_callback gave the cycle recording now.
        self._cycle_trace_id: Optional[str] = None
        self.on_trace_ready = on_trace_ready
        # PyTorch records shapes whenever it counts FLOPs.
        self.record_shapes = record_shapes or with_flops
        self.profile_memory = profile_memory
        self.with_flops = with_flops
        self.with_stack = with_stack
        self.with_modules = with_modules
        self.experimental_config = experimental_config
        if execution_trace_observer is None:
            execution_trace_observer = _execution_trace_observer_from_env()
        self.execution_trace_observer = execution_trace_observer
        # Whether this profile started the execution trace observer and has not stopped it.
        self._execution_trace_running = False
        self.acc_events = acc_events
        self.post_processing_timeout_s = post_processing_timeout_s
        self._use_device = use_device
        self._session = _native.Session(
            names,
            schedule,
            config,
            self.record_shapes,
            profile_memory,
            with_flops,
            with_stack,
            with_modules,
            groups,
        )
        for warning in self._session.config_warnings:
            _warn.warn(warning)
        # The last finished trace; the trace handler reads it.
        self._trace: Optional[Trace] = None
        self._events: Optional[Any] = None
        # With acc_events: the events of the traces before the last, newest first.
        self._earlier_events: List[Any] = []
        self._started = False
        self._warned_no_trace = False
        self._frames_cut = 0
        # step_num once stopped: the last run's.
        self._last_step_num = 0
        # current_action while not running: step 0's before the first start, then the last
        # run's last (torch.profiler keeps it).
        self._action_at_stop = _first_action(self.schedule)
        # What PyTorch's profiler flag was before this profile set it (see start()).
        self._torch_flag: Optional[bool] = None

    def __enter__(self) -> "profile":
        self.start()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            self._exit(exc_type)
        finally:
            # As torch.profiler's exit: the execution trace is finalized.
            if self.execution_trace_observer is not None:
                self.execution_trace_observer.cleanup()

    def _exit(self, exc_type: Any) -> None:
        if exc_type is None:
            self.stop()
            return
        # The block raised, and its exception is the one the user sees. It may come from an
        # on_trace_ready that failed in step(), which stopped the profiler already; a stop
        # that fails now is said as a warning, not raised in the exception's place.
        if self._session.running:
            try:
                self.stop()
            except Exception as stop_error:
                _warn.warn(f"omniprof: stopping the profiler after an exception failed: {stop_error}")

    def start(self) -> None:
        """Starts recording (with a schedule: step 0's action). ``ProfilerError`` when
        another profiler runs in this process or this one already runs.

        With torch imported, PyTorch's ops are observed while a trace records (the
        observer is built on the first start, before recording begins)."""
        if not self._session.prepared:
            self._ready()
        self._session.start()
        self._recording_started()

    def prepare_trace(self) -> None:
        """torch.profiler's: claims the profiler and warms its backends up without
        recording yet; ``start_trace()`` then starts recording. Not with a schedule, whose
        steps warm up (``ProfilerError``)."""
        self._ready()
        self._session.prepare()

    def start_trace(self) -> None:
        """torch.profiler's: starts recording after ``prepare_trace()`` (``AssertionError``
        without it, as in PyTorch)."""
        if not self._session.prepared:
            raise AssertionError("Profiler must be initialized before starting trace")
        self._session.start()
        self._recording_started()

    def stop_trace(self) -> None:
        """torch.profiler's: stops recording, as ``stop()``."""
        self.stop()

    def _ready(self) -> None:
        """What a start needs before the session claims the profiler: CUDA that can be
        recorded, the observer built, the process's rank."""
        if self._records_cuda():
            refusal = _cuda.refusal()
            if refusal is not None:
                raise ProfilerError(refusal)
        _observer.install()
        _observer.install_privateuse1_profiler()
        self._frames_cut = _observer.stack_frames_cut()[0]
        info = _distributed_info()
        if info is not None:
            # As torch.profiler does on start: the rank HTA and `omniprof ranks` read.
            self.add_metadata_json(_DISTRIBUTED_INFO, json.dumps(info, default=str))

    def _recording_started(self) -> None:
        """What follows the session's start: the schedule's first action, PyTorch told,
        what nothing here records warned about."""
        self._started = True
        self._follow_recording()
        self._warn_if_torch_profiler_holds_what_this_asks()
        self._torch_flag = _observer.announce_start()
        for activity in self._session.unrecorded_activities():
            reason = _cuda.unavailable_reason() if activity == "CUDA" else None
            if reason is not None:
                _warn_once(
                    f"activity:{activity}",
                    f"omniprof: ProfilerActivity.CUDA was selected, but {reason}; the "
                    "trace has no CUDA timeline",
                )
                continue
            _warn_once(
                f"activity:{activity}",
                f"omniprof: ProfilerActivity.{activity} was selected, but nothing here "
                "records it: no backend offers its activities (a Kineto plugin in "
                "KINETO_PLUGIN_LIB_DIR_PATH, a backend registered with register_profiler!, "
                "or for PrivateUse1 a PyTorch backend that registered a Kineto profiler "
                "with REGISTER_PRIVATEUSE1_PROFILER, or profiler stubs with "
                "registerPrivateUse1Methods and enabled them); the trace has no device "
                "timeline for it",
            )

    def stop(self) -> None:
        """Stops recording (with a schedule: ends the run, handing a recording cycle's trace
        to ``on_trace_ready``)."""
        if self._records_cuda() and self._session.running:
            _cuda.synchronize()
        if self._session.running:
            self._last_step_num = self._session.step_num
            self._action_at_stop = self.current_action
        self._stop_execution_trace()
        self._last_action = ProfilerAction.NONE
        try:
            self._session.stop()
        finally:
            self._announce_stop()
            self._warn_frames_cut()
            self._deliver()

    def _records_cuda(self) -> bool:
        if self._activities_given:
            return "CUDA" in self._activity_names + self._activity_groups
        # No activities given: torch.profiler's default, which records CUDA where it can.
        return _cuda.unavailable_reason() is None

    def _warn_frames_cut(self) -> None:
        if not self.with_stack:
            return
        total, depth = _observer.stack_frames_cut()
        cut = total - self._frames_cut
        if cut > 0:
            _warn.warn(
                f"omniprof: {cut} Python calls deeper than {depth} frames "
                "were not recorded (with_stack records that many frames per thread)"
            )

    def _warn_if_torch_profiler_holds_what_this_asks(self) -> None:
        """Says what this profile will lack when torch.profiler records around it: the
        allocator's reports (``profile_memory``) are the outer profiler's, and so is the
        Python tracer (``with_stack``) when the outer profiler records stacks."""
        torch = sys.modules.get("torch")
        if torch is None or not torch.autograd._profiler_enabled():
            return
        held = []
        # Its Python tracer left a profile function on this thread, which ours leaves to it
        # (ours sets one without an object: getprofile() is then None).
        if self.with_stack and sys.getprofile() is not None:
            held.append("the Python tracer, so this profile has no Python stacks (with_stack=True)")
        if self.profile_memory:
            held.append("the allocator's reports, so this profile has no memory records (profile_memory=True)")
        if held:
            _warn.warn(
                "omniprof: torch.profiler is recording in this process and holds "
                + " and ".join(held)
                + "; stop torch.profiler first to have them here"
            )

    def _announce_stop(self) -> None:
        flag, self._torch_flag = self._torch_flag, None
        _observer.announce_stop(flag)

    def step(self) -> None:
        """Ends a step: with a schedule, takes the next step's action (which may finish a
        cycle and call ``on_trace_ready``).

        Before the first ``start()``, as torch.profiler's: with a schedule, the steps run it
        (the profiler starts at the first, as if started at step 0); without one, a step
        only counts. After a ``stop()``, a step only counts (torch.profiler's would run the
        schedule on, and record again where it repeats)."""
        if not self._session.running:
            if self._started or not self._session.scheduled:
                self._last_step_num += 1
                return
            self.start()
        if self.current_action == ProfilerAction.RECORD_AND_SAVE:
            # This step ends the recording cycle: as torch.profiler, the execution trace
            # stops first.
            self._stop_execution_trace()
        try:
            self._session.step()
        finally:
            self._deliver()
        self._follow_recording()

    def _follow_recording(self) -> None:
        """Starts the execution trace observer when a trace records now, stops it when none
        does: torch.profiler's ``start_trace``/``stop_trace`` around its recording. At the
        start of each recording cycle, asks ``custom_trace_id_callback`` for its trace's
        id."""
        action = self.current_action
        ended = (ProfilerAction.NONE, ProfilerAction.RECORD_AND_SAVE)
        if action != ProfilerAction.NONE and self._last_action in ended:
            self._begin_trace_id()
        self._last_action = action
        if action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            if self.execution_trace_observer is not None and not self._execution_trace_running:
                self.execution_trace_observer.start()
                self._execution_trace_running = True
        else:
            self._stop_execution_trace()

    def _begin_trace_id(self) -> None:
        """The trace that begins now takes its id from ``custom_trace_id_callback``, as
        torch.profiler's does; a callback that raises or gives no string is warned about,
        and the trace keeps an id of its own."""
        self._cycle_trace_id = None
        callback = self.custom_trace_id_callback
        if callback is not None:
            try:
                trace_id = callback()
            except Exception as error:  # noqa: BLE001 - any failure: said, and profiling goes on
                _warn.warn(f"omniprof: custom_trace_id_callback raised {error!r}; the trace keeps its own id")
            else:
                if isinstance(trace_id, str):
                    self._cycle_trace_id = trace_id
                else:
                    _warn.warn(
                        f"omniprof: custom_trace_id_callback returned {trace_id!r}, not a string; "
                        "the trace keeps its own id"
                    )
        self._session.set_trace_id(self._cycle_trace_id)

    def set_custom_trace_id_callback(self, callback: Optional[Callable[[], str]]) -> None:
        """torch.profiler's: the function each recording cycle's trace takes its id from,
        from the next cycle on (``None``: each trace gets an id of its own)."""
        self.custom_trace_id_callback = callback

    def get_trace_id(self) -> Optional[str]:
        """torch.profiler's: the id of the trace recording now where a
        ``custom_trace_id_callback`` gave it, else of the last finished trace (an id made
        for a trace is known once it finishes); ``None`` before either."""
        if self._session.running and self._cycle_trace_id is not None:
            return self._cycle_trace_id
        return self._trace.trace_id if self._trace is not None else None

    @property
    def activities(self) -> Set[ProfilerActivity]:
        """torch.profiler's: the activities selected, or with none given, each one this
        process records (``supported_activities()``)."""
        if not self._activities_given:
            return supported_activities()
        members = ProfilerActivity.__members__
        given = self._activity_names + self._activity_groups
        return {ProfilerActivity[name] for name in given if name in members}

    @property
    def use_device(self) -> Optional[str]:
        """torch.profiler's: the device backend the profile records (``use_device`` as
        given; else ``cuda`` with ``ProfilerActivity.CUDA``, then ``xpu``, ``mtia``, ``hpu``,
        and the PrivateUse1 backend's name), else ``None``."""
        if self._use_device is not None:
            return self._use_device
        selected = {a.name for a in self.activities}
        for device, activity in _DEVICE_ACTIVITIES.items():
            if activity in selected:
                return device
        if "PrivateUse1" in selected:
            torch = sys.modules.get("torch")
            return torch._C._get_privateuse1_backend_name() if torch is not None else "privateuse1"
        return None

    def toggle_collection_dynamic(self, enable: bool, activities: Iterable[Any]) -> None:
        """torch.profiler's: switches collection of ``activities`` (``ProfilerActivity``
        members, as ``activities`` takes them) off, or back on with ``enable``, from now.
        What begins while its collection is off is left out of the trace (an op begun
        before keeps its end); with ``CPU`` off, PyTorch's ops are not recorded at all
        meanwhile (the observer's callbacks are removed, as PyTorch removes its own).
        Nothing happens while the profile is not running, as in PyTorch."""
        if self._session.running:
            self._session.toggle_collection(enable, [_activity_name(a) for a in activities])

    def wait_for_exports(self) -> None:
        """torch.profiler's: waits for the exports written in the background; omniprof
        writes each export when it is called, so none is left to wait for."""

    def preset_metadata_json(self, key: str, value: str) -> None:
        """torch.profiler's: a top-level key whose value is the JSON text ``value``, for
        the traces finished from now on (as ``add_metadata_json``)."""
        self.add_metadata_json(key, value)
        self.preset_metadata[key] = value

    def _stop_execution_trace(self) -> None:
        if self._execution_trace_running:
            self._execution_trace_running = False
            self.execution_trace_observer.stop()

    def _deliver(self) -> None:
        notes: List[str] = []
        for trace in self._session.take_traces():
            if self.acc_events and self._trace is not None:
                # As PyTorch's: the events so far stay, after the new trace's.
                self._earlier_events = list(self.events())
            self._trace = trace
            self._events = None
            notes.extend(f"omniprof: backend failed: {e}" for e in trace.backend_errors)
            if trace.dropped_events:
                notes.append(
                    f"omniprof: {trace.dropped_events} host events were dropped: a thread "
                    f"reached its cap of {self._session.max_host_records} records; raise it "
                    'with config="OMNIPROF_MAX_HOST_RECORDS_PER_THREAD=<records>"'
                )
            if self.on_trace_ready is not None:
                try:
                    self.on_trace_ready(self)
                except BaseException:
                    self._stop_execution_trace()
                    self._session.abort()
                    self._announce_stop()
                    raise
        # After every trace is delivered, so a warning raised as an error loses none. A
        # backend left out of a trace, or events dropped, would otherwise show only in the
        # exported file.
        for note in notes:
            _warn.warn(note)

    def _no_trace_yet(self, call: str) -> bool:
        """Whether the profiler has started but no trace has finished: then ``events()`` and
        ``key_averages()`` are empty, as torch.profiler's are while its cycle is under way
        (code that prints a table every N steps must not fail), with a warning, once per
        profile, saying why."""
        if self._trace is not None or not self._started:
            return False
        if not self._warned_no_trace:
            self._warned_no_trace = True
            _warn.warn(
                f"{call}() is empty: no trace has finished yet (stop the profiler, or with a "
                "schedule let a recording cycle finish)"
            )
        return True

    def _empty_list(self) -> EventList:
        return EventList(profile_memory=self.profile_memory, with_flops=self.with_flops)

    def _require_trace(self, call: str) -> Trace:
        if self._trace is None:
            raise ProfilerError(
                f"cannot {call}: no trace yet (stop the profiler, or with a schedule let a "
                "recording cycle finish)"
            )
        return self._trace

    def key_averages(
        self,
        group_by_input_shape: bool = False,
        group_by_stack_n: int = 0,
        group_by_overload_name: bool = False,
        include_python_functions: bool = False,
    ) -> EventList:
        """PyTorch's ``key_averages()``: per-name rows of the last trace, ``KeyAverage``s in
        an ``EventList``; ``.table()`` prints them exactly as ``omniprof summary`` prints
        the exported file. ``group_by_stack_n=N``
        also groups by the first N frames of each op's Python stack (rows get ``stack``, the
        table PyTorch's ``Source Location`` column); ``include_python_functions`` makes rows
        of Python function events too. ``group_by_overload_name`` also groups by each op's
        overload name (``aten::add.Tensor`` apart from ``aten::add.Scalar``; rows get
        ``overload_name``, the table PyTorch's ``Overload Name`` column), which, as in
        PyTorch, is recorded only with
        ``experimental_config=_ExperimentalConfig(capture_overload_names=True)``: without
        it every op has the default overload's, ``""``, and rows are as by name. With
        ``acc_events``, of every trace's events."""
        if self._earlier_events:
            return self.events().key_averages(
                group_by_input_shape,
                group_by_stack_n,
                group_by_overload_name,
                include_python_functions,
            )
        if self._no_trace_yet("key_averages"):
            return self._empty_list()
        return self._require_trace("key_averages").key_averages(
            group_by_input_shape,
            self.profile_memory,
            self.with_flops,
            group_by_stack_n,
            include_python_functions,
            group_by_overload_name,
        )

    def events(self) -> EventList:
        """PyTorch's ``events()``: every op, user range, Python function and device activity
        of the last trace as ``FunctionEvent``s (``name``, ``id``, ``thread``,
        ``time_range``, ``cpu_time_total``, ``self_cpu_time_total``, ``cpu_memory_usage``,
        ``flops``, ``overload_name``, ``cpu_children``, ``cpu_parent``, ``stack``,
        ``kernels``, ``is_python_function``, ...) in an ``EventList``: a ``list``, the same
        one each call (as PyTorch's), with ``table()``, ``key_averages()``,
        ``total_average()``, ``export_stacks()`` and ``export_chrome_trace()``. Empty, with
        a warning, while no trace has finished, as PyTorch's is."""
        if self._events is None:
            if self._no_trace_yet("events"):
                return self._empty_list()
            self._events = self._require_trace("events").events(
                self.profile_memory, self.with_flops, _asks_event_metadata(self.experimental_config)
            )
            self._events.extend(self._earlier_events)
        return self._events

    @property
    def profiler(self) -> Optional["profile"]:
        """What ``torch.profiler.profile.profiler`` gives code that reads it: ``None`` before
        the first start, then an object with ``function_events`` (``events()``),
        ``key_averages()``, ``table()`` and ``total_average()``."""
        return _AutogradView(self) if self._started else None

    def export_chrome_trace(
        self,
        path: Union[str, "os.PathLike[str]"],
        use_python_export: bool = False,
        cuda_graph_annotations: Any = None,
        graph_lanes: str = "none",
        default_stream: int = 7,
    ) -> None:
        """Writes the last trace: Perfetto's protobuf under a ``.pftrace`` name, else
        Kineto's Chrome JSON (gzip-compressed under a ``.gz`` name), as torch.profiler writes
        any name. ``ProfilerError`` before a trace exists, or when the path cannot be
        written; the trace is kept, so export can be retried. PyTorch's other
        arguments are accepted: ``use_python_export`` changes nothing (there is one
        writer); CUDA graph annotations are not supported yet (warned once)."""
        if cuda_graph_annotations or graph_lanes != "none":
            _warn_once(
                "cuda_graph_annotations",
                "omniprof does not support cuda_graph_annotations or graph_lanes yet; they are ignored",
            )
        self._require_trace("export_chrome_trace").export_chrome_trace(os.fspath(path))

    def take_pending_cuspy_export(self) -> None:
        """torch.profiler's hand-off of a cycle's cuspy export to another thread: ``None``,
        as PyTorch gives for any backend but cuspy (omniprof's exports are written when
        called)."""
        return None

    def export_stacks(self, path: Union[str, "os.PathLike[str]"], metric: str = "self_cpu_time_total") -> None:
        """PyTorch's ``export_stacks``: writes each event's Python stack, outermost frame
        first, with its ``metric`` in whole µs (``frame;frame;...;frame 123`` per line, the
        folded format flame graph tools read). ``metric``: ``self_cpu_time_total``, or the
        device's ``self_device_time_total`` (``self_cuda_time_total``,
        ``self_xpu_time_total``, ``self_privateuse1_time_total``); another raises
        ``ValueError`` naming them. As in PyTorch, the profile must have been made with
        ``with_stack=True`` (``AssertionError`` otherwise)."""
        if not self.with_stack:
            raise AssertionError("export_stacks() requires with_stack=True")
        self._require_trace("export_stacks").export_stacks(os.fspath(path), metric)

    def export_memory_timeline(self, path: Union[str, "os.PathLike[str]"], device: Optional[str] = None) -> None:
        """PyTorch's ``export_memory_timeline``: memory over time on ``device`` (by
        default, as PyTorch: the ``use_device`` backend's device 0, else ``cuda:0`` where
        CUDA is available, else ``cpu``), written as PyTorch writes it for the suffix:
        ``.html`` a page with the stacked plot as an image, ``.raw.json.gz`` the raw events
        ``[time_ns, action, bytes, category]`` gzipped, ``.json.gz`` gzipped and any other
        name plain ``[times_us, sizes_by_category]``.

        Built from the allocator's reports and the storages the ops read: every allocation
        and free is counted, and the tensors ops read that were there before the window, so
        the total is PyTorch's; blocks allocated and freed inside one operator are
        temporary, every other byte unknown (PyTorch infers more categories from the data
        flow between its ops); a warning says so each time. As in PyTorch,
        needs ``record_shapes``, ``profile_memory`` and ``with_stack`` (``ValueError``
        naming those missing). See docs/python.md."""
        from . import _memory_timeline

        required = ("record_shapes", "profile_memory", "with_stack")
        missing = [f"{flag}=True" for flag in required if not getattr(self, flag)]
        if missing:
            raise ValueError(f"{', '.join(missing)} required for memory profiling.")
        trace = self._require_trace("export_memory_timeline")
        if device is None:
            device = _memory_timeline.default_device(self.use_device)
        _memory_timeline.write(trace, os.fspath(path), device)

    def export_report(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes the last trace's report: one self-contained HTML file with the views of
        TensorBoard's profiler plugin (steps, operators, kernels, memory, the trace), the
        page ``omniprof report`` writes. ``ProfilerError`` before a trace exists;
        ``OSError`` naming the path when it cannot be written."""
        self._require_trace("export_report").export_report(os.fspath(path))

    def add_metadata(self, key: str, value: str) -> None:
        """Adds a top-level ``key: value`` to the traces finished from now on."""
        self._session.add_metadata(key, value)

    def add_metadata_json(self, key: str, value: str) -> None:
        """Adds a top-level key whose value is the JSON text ``value``."""
        self._session.add_metadata_json(key, value)

    @property
    def step_num(self) -> int:
        """The number of ``step()`` calls: of the running profiler, or, once it stopped, of
        its last run (as torch.profiler keeps it)."""
        if self._session.running:
            return self._session.step_num
        return self._last_step_num

    @property
    def current_action(self) -> ProfilerAction:
        """The current step's action; once stopped, the last run's last, as torch.profiler
        keeps it (before the first start, step 0's, as torch.profiler's)."""
        if self._session.running:
            return ProfilerAction(self._session.current_action)
        return self._action_at_stop


_DISTRIBUTED_INFO = "distributedInfo"


def _execution_trace_observer_from_env() -> Any:
    """What ``torch.profiler.profile`` uses without an ``execution_trace_observer``: with
    ``ENABLE_PYTORCH_EXECUTION_TRACE=1``, PyTorch's observer writing to a temporary file
    (``ENABLE_PYTORCH_EXECUTION_TRACE_EXTRAS=1`` adds its extra resources), else ``None``."""
    if os.environ.get("ENABLE_PYTORCH_EXECUTION_TRACE", "0") != "1":
        return None
    from torch.profiler import ExecutionTraceObserver

    return ExecutionTraceObserver.build_execution_trace_obs_from_env()


def _distributed_info() -> Optional[Dict[str, Any]]:
    """``torch.profiler``'s ``distributedInfo`` of a process in an initialized
    ``torch.distributed`` job (backend, rank, world size, process groups; the NCCL version
    with NCCL), else ``None``. torch is not imported here: a program that did not import it
    runs no job."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    dist = getattr(torch, "distributed", None)
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    backend = dist.get_backend()
    info: Dict[str, Any] = {
        "backend": backend,
        "rank": dist.get_rank(),
        "world_size": dist.get_world_size(),
        "pg_count": dist.get_pg_count(),
        "pg_config": dist.distributed_c10d._get_all_pg_configs(),
    }
    if backend == "nccl":
        info["nccl_version"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    return info


def tensorboard_trace_handler(
    dir_name: Union[str, "os.PathLike[str]"],
    worker_name: Optional[str] = None,
    use_gzip: bool = False,
    use_python_export: bool = False,
) -> "_native.TraceDirHandler":
    """``torch.profiler.tensorboard_trace_handler``: an ``on_trace_ready`` callback writing
    each trace as ``{worker_name}.{time_ns}.pt.trace.json[.gz]`` into ``dir_name`` (created
    when missing; ``worker_name`` defaults to ``{hostname}_{pid}``). Its ``written`` lists the
    files written. ``use_python_export`` changes nothing, as in ``export_chrome_trace``
    (there is one writer)."""
    return _native.TraceDirHandler(os.fspath(dir_name), worker_name, use_gzip)


class _AutogradView:
    """``prof.profiler``: the parts of ``torch.autograd.profiler.profile`` that code reads
    after a run, over the same trace as the profile."""

    def __init__(self, prof: profile) -> None:
        self._prof = prof
        self.record_shapes = prof.record_shapes
        self.profile_memory = prof.profile_memory
        self.with_flops = prof.with_flops
        self.with_stack = prof.with_stack
        self.with_modules = prof.with_modules
        self.experimental_config = prof.experimental_config
        self.acc_events = prof.acc_events
        self.post_processing_timeout_s = prof.post_processing_timeout_s
        self.enabled = True
        # PyTorch's inner profiler has been entered once the profile started.
        self.entered = True
        # The profile's own, with its arguments.
        self.key_averages = prof.key_averages
        self.export_chrome_trace = prof.export_chrome_trace
        self.toggle_collection_dynamic = prof.toggle_collection_dynamic

    @property
    def function_events(self) -> EventList:
        return self._prof.events()

    @property
    def self_cpu_time_total(self) -> float:
        return self._prof.events().self_cpu_time_total

    @property
    def use_device(self) -> Optional[str]:
        return self._prof.use_device

    @property
    def use_cpu(self) -> bool:
        return ProfilerActivity.CPU in self._prof.activities

    @property
    def custom_trace_id_callback(self) -> Optional[Callable[[], str]]:
        return self._prof.custom_trace_id_callback

    @property
    def trace_id(self) -> Optional[str]:
        return self._prof.get_trace_id()

    def table(self, *args: Any, **kwargs: Any) -> str:
        return self.key_averages().table(*args, **kwargs)

    def total_average(self) -> Any:
        return self.key_averages().total_average()

    def export_stacks(self, path: Union[str, "os.PathLike[str]"], metric: str = "self_cpu_time_total") -> None:
        """As PyTorch's inner profiler: the events' stacks, whatever ``with_stack`` was (none
        recorded: an empty file)."""
        self._prof.events().export_stacks(path, metric)


def kineto_available() -> bool:
    """torch.profiler's: whether a Kineto profiler is there to record traces; omniprof is
    one, so always true."""
    return True


def supported_activities() -> Set[ProfilerActivity]:
    """``torch.profiler.supported_activities()``: ``CPU``, and each device activity that a
    backend registered now (a plugin, a registered profiler) can record."""
    names = [a.name for a in ProfilerActivity]
    unrecorded = set(_native.Session(names).unrecorded_activities())
    return {ProfilerActivity[name] for name in names if name not in unrecorded}
