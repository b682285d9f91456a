"""Type stubs of the native module (Rust, PyO3). See ``omniprof`` for the public API."""

from types import TracebackType
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Type, TypeVar, Union, final

from ._event_list import EventList

from typing_extensions import CapsuleType

__version__: str

__all__ = [
    "__version__",
    "ProfilerError",
    "PanicException",
    "record_function",
    "instant",
    "step",
    "cuda_unavailable_reason",
    "on_demand_opted_in",
    "serve_on_demand",
    "kineto_daemon_opted_in",
    "poll_kineto_daemon",
    "PROFILER_ACTIVITIES",
    "Session",
    "activity_filter",
    "Schedule",
    "Trace",
    "KeyAverage",
    "FunctionEvent",
    "Interval",
    "load_trace",
    "events_table",
    "events_total",
    "average_events",
    "events_stacks",
    "TraceDirHandler",
    "FlightRecorder",
    "install_torch_observer",
    "install_torch_stubs",
    "install_privateuse1_profiler",
    "privateuse1_profiler",
]

_F = TypeVar("_F", bound=Callable[..., Any])

class ProfilerError(RuntimeError): ...
class PanicException(BaseException): ...

@final
class record_function:
    """A user range (``user_annotation``) on the calling thread: a context manager, or a
    decorator that records every call of the function."""

    def __new__(cls, name: Union[str, bytes], args: Optional[str] = None) -> "record_function": ...
    def __enter__(self) -> "record_function": ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> "record_function": ...
    def __call__(self, func: _F) -> _F: ...
    @property
    def name(self) -> str: ...
    @property
    def args(self) -> Optional[str]: ...

def instant(name: str) -> None:
    """A point event (``cpu_instant_event``) on the calling thread."""

def step() -> int:
    """Marks the end of one iteration of the application (iteration-based on-demand traces
    count these); returns the new iteration number."""

def cuda_unavailable_reason() -> Optional[str]:
    """Why CUDA activity cannot be recorded in this process, in one line, or ``None``."""

def on_demand_opted_in() -> bool: ...
def serve_on_demand() -> None: ...
def kineto_daemon_opted_in() -> bool: ...
def poll_kineto_daemon() -> None: ...
def install_torch_observer(entry_points: CapsuleType) -> None:
    """Installs the op observer from its ``entry_points()`` capsule
    (``omniprof.observer.entry_points``); ``TypeError`` for anything else."""

def install_torch_stubs(api: CapsuleType) -> None:
    """Installs PyTorch's PrivateUse1 stubs from the observer's ``stubs_api()`` capsule
    (``omniprof.observer.stubs_api``); ``TypeError`` for anything else."""

def install_privateuse1_profiler(entry: CapsuleType) -> List[str]:
    """Installs the Kineto profiler a PrivateUse1 backend registered with PyTorch, from the
    observer's ``privateuse1_profiler()`` capsule (``omniprof.observer.privateuse1_profiler``);
    returns the warnings to give. ``TypeError`` for anything else."""

def privateuse1_profiler() -> Optional[str]:
    """The name of the installed PrivateUse1 Kineto profiler, if one is."""

@final
class Schedule:
    def __new__(
        cls,
        *,
        wait: int,
        warmup: int,
        active: int,
        repeat: int = 0,
        skip_first: int = 0,
        skip_first_wait: int = 0,
    ) -> "Schedule": ...
    def __call__(self, step: int) -> Any: ...

PROFILER_ACTIVITIES: Tuple[str, ...]
"""The names of ``torch.profiler.ProfilerActivity``'s members omniprof accepts, in order."""

def activity_filter(group: str, names: List[str]) -> List[str]: ...
@final
class Session:
    def __new__(
        cls,
        activities: Optional[List[str]] = None,
        schedule: Union[Schedule, Callable[[int], Any], None] = None,
        config: Optional[str] = None,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_flops: bool = False,
        with_stack: bool = False,
        with_modules: bool = False,
        groups: Optional[List[str]] = None,
    ) -> "Session": ...
    def start(self) -> None: ...
    def prepare(self) -> None: ...
    @property
    def prepared(self) -> bool: ...
    def step(self) -> None: ...
    def stop(self) -> None: ...
    def abort(self) -> None: ...
    def take_traces(self) -> List["Trace"]: ...
    def add_metadata(self, key: str, value: str) -> None: ...
    def add_metadata_json(self, key: str, json: str) -> None: ...
    def set_trace_id(self, id: Optional[str]) -> None: ...
    def toggle_collection(self, enable: bool, activities: List[str]) -> None: ...
    @property
    def running(self) -> bool: ...
    @property
    def scheduled(self) -> bool: ...
    @property
    def step_num(self) -> int: ...
    @property
    def current_action(self) -> int: ...
    @property
    def config_warnings(self) -> List[str]: ...
    @property
    def max_host_records(self) -> int: ...
    def unrecorded_activities(self) -> List[str]: ...

def load_trace(path: str) -> "Trace":
    """A trace file (Kineto / PyTorch Chrome JSON, plain or gzip) as a ``Trace``;
    ``ProfilerError`` when it cannot be read, a ``RuntimeWarning`` for each session health
    entry of the wrong shape (left out)."""

@final
class Trace:
    def export_chrome_trace(self, path: str) -> None: ...
    def key_averages(
        self,
        group_by_input_shape: bool = False,
        profile_memory: bool = False,
        with_flops: bool = False,
        group_by_stack_n: int = 0,
        include_python_functions: bool = False,
        group_by_overload_name: bool = False,
    ) -> "EventList": ...
    def export_stacks(self, path: str, metric: str = "self_cpu_time_total") -> None: ...
    def export_report(self, path: str) -> None: ...
    def events(
        self, profile_memory: bool = False, with_flops: bool = False, metadata: bool = False
    ) -> "EventList": ...
    def memory_timeline(
        self, device_type: int, device_index: int, has_schema: Callable[[str], bool]
    ) -> Tuple[List[Tuple[int, int, int, bool]], int]: ...
    @property
    def trace_id(self) -> Optional[str]: ...
    @property
    def activity_count(self) -> int: ...
    @property
    def dropped_events(self) -> int: ...
    @property
    def backend_errors(self) -> List[str]: ...

@final
class KeyAverage:
    """One row of ``key_averages()`` (PyTorch's ``FunctionEventAvg``); times in µs."""

    @property
    def key(self) -> str: ...
    @property
    def count(self) -> int: ...
    @property
    def self_cpu_time_total(self) -> float: ...
    @property
    def cpu_time_total(self) -> float: ...
    @property
    def cpu_time(self) -> float: ...
    @property
    def self_device_time_total(self) -> float: ...
    @property
    def device_time_total(self) -> float: ...
    @property
    def device_time(self) -> float: ...
    @property
    def cuda_time(self) -> float: ...
    @property
    def input_shapes(self) -> Union[List[Any], str]: ...
    @property
    def stack(self) -> List[str]: ...
    @property
    def cpu_memory_usage(self) -> int: ...
    @property
    def self_cpu_memory_usage(self) -> int: ...
    @property
    def device_memory_usage(self) -> int: ...
    @property
    def self_device_memory_usage(self) -> int: ...
    @property
    def flops(self) -> int: ...
    @property
    def is_user_annotation(self) -> bool: ...
    @property
    def on_device(self) -> bool: ...
    @property
    def device_type(self) -> Any: ...
    @property
    def is_async(self) -> bool: ...
    @property
    def is_legacy(self) -> bool: ...
    @property
    def node_id(self) -> int: ...
    @property
    def is_remote(self) -> bool: ...
    @property
    def overload_name(self) -> str: ...
    @property
    def use_device(self) -> Optional[str]: ...
    @property
    def self_cpu_time_total_str(self) -> str: ...
    @property
    def cpu_time_total_str(self) -> str: ...
    @property
    def cpu_time_str(self) -> str: ...
    @property
    def self_device_time_total_str(self) -> str: ...
    @property
    def device_time_total_str(self) -> str: ...
    @property
    def device_time_str(self) -> str: ...
    @property
    def cpu_parent(self) -> Optional["FunctionEvent"]: ...
    @property
    def cpu_children(self) -> Optional[List["FunctionEvent"]]: ...
    @property
    def scope(self) -> Optional[int]: ...
    def add(self, other: Union["FunctionEvent", "KeyAverage"]) -> "KeyAverage": ...
    def __iadd__(self, value: Union["FunctionEvent", "KeyAverage"], /) -> "KeyAverage": ...

@final
class Interval:
    start: float
    end: float
    def elapsed_us(self) -> float: ...

@final
class FunctionEvent:
    """One event of ``events()`` (PyTorch's ``FunctionEvent``); times in µs."""

    name: str
    key: str
    trace_name: Optional[str]
    id: int
    thread: int
    count: int
    time_range: Interval
    cpu_time_total: float
    self_cpu_time_total: float
    device_time_total: float
    self_device_time_total: float
    input_shapes: List[Any]
    sequence_nr: int
    input_dtypes: Optional[List[str]]
    overload_name: str
    cpu_memory_usage: int
    self_cpu_memory_usage: int
    device_memory_usage: int
    self_device_memory_usage: int
    flops: Optional[int]
    concrete_inputs: Optional[List[Any]]
    structured_input_shapes: Optional[List[Any]]
    structured_input_strides: Optional[List[Any]]
    scope: int
    fwd_thread: int
    python_id: int
    python_parent_id: int
    python_module_id: int
    cpu_children: List["FunctionEvent"]
    cpu_parent: Optional["FunctionEvent"]
    device_type: Any
    is_async: bool
    is_user_annotation: bool
    is_legacy: bool
    is_python_function: bool
    stack: List[str]
    cpu_time: float
    device_time: float
    cpu_time_str: str
    cpu_time_total_str: str
    self_cpu_time_total_str: str
    device_time_str: str
    device_time_total_str: str
    self_device_time_total_str: str
    cuda_time: float
    cuda_time_total: float
    self_cuda_time_total: float
    self_cuda_memory_usage: int
    node_id: int
    is_remote: bool
    device_index: int
    device_resource_id: int
    activity_type: Optional[str]
    external_id: int
    linked_correlation_id: int
    kernels: List[Any]
    use_device: Optional[str]
    flow_id: Optional[int]
    flow_type: Optional[int]
    flow_start: Optional[bool]
    kwinputs: Optional[Dict[str, Any]]
    metadata: Optional[Dict[str, Any]]
    event_metadata: Any
    self_cpu_percent: int
    total_cpu_percent: int
    total_device_percent: int
    def append_kernel(self, *_args: Any) -> None: ...
    def append_cpu_child(self, _child: Any) -> None: ...
    def set_cpu_parent(self, _parent: Any) -> None: ...

# What an EventList (omniprof/_event_list.py) holds, of FunctionEvents and KeyAverages.
_Items = Sequence[Union["FunctionEvent", KeyAverage]]

def events_table(
    items: _Items,
    profile_memory: bool,
    with_flops: bool,
    sort_by: Optional[str] = None,
    row_limit: Optional[int] = 100,
    max_src_column_width: int = 75,
    max_name_column_width: int = 55,
    max_shapes_column_width: int = 80,
    header: Optional[str] = None,
    top_level_events_only: bool = False,
    time_unit: Optional[str] = None,
) -> str: ...
def events_total(items: _Items) -> KeyAverage: ...
def average_events(
    items: Sequence["FunctionEvent"],
    group_by_input_shapes: bool = False,
    group_by_stack_n: int = 0,
    group_by_overload_name: bool = False,
    include_python_functions: bool = False,
) -> List[KeyAverage]: ...
def events_stacks(items: Sequence["FunctionEvent"], path: str, metric: str) -> None: ...

@final
class FlightRecorder:
    """The process's flight recorder; see ``omniprof.flight_recorder``."""

    def __new__(
        cls,
        seconds_kept: float,
        max_bytes: int,
        dump_dir: Optional[str],
        keep: int,
        min_interval_s: float,
        slow_factor: float,
        warmup_steps: int,
        hang_after_s: Optional[float],
        record_shapes: bool,
        profile_memory: bool,
        serve_dump_requests: bool,
    ) -> "FlightRecorder": ...
    def dump(self, path: Union[str, "os.PathLike[str]"]) -> Dict[str, Any]: ...
    def trigger(self, reason: str) -> None: ...
    def flush(self, timeout_s: float) -> bool: ...
    def dumps(self) -> List[str]: ...
    def take_warnings(self) -> List[str]: ...
    def stats(self) -> Dict[str, int]: ...
    def stop(self) -> List[str]: ...
    @property
    def running_now(self) -> bool: ...

@final
class TraceDirHandler:
    def __new__(
        cls, dir_name: str, worker_name: Optional[str] = None, use_gzip: bool = False
    ) -> "TraceDirHandler": ...
    def __call__(self, prof: Any) -> str: ...
    @property
    def dir_name(self) -> str: ...
    @property
    def worker_name(self) -> str: ...
    @property
    def written(self) -> List[str]: ...
