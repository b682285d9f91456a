"""omniprof: a device-agnostic accelerator profiler with ``torch.profiler``'s API.

Switching from PyTorch's profiler is a changed import::

    import omniprof

    with omniprof.profile(activities=[omniprof.ProfilerActivity.CPU]) as prof:
        with omniprof.record_function("train_step"):
            train_step()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))
    prof.export_chrome_trace("trace.json")

Recording (``record_function``, ``instant``) goes straight to omniprof's Rust recorder;
traces are Kineto-compatible Chrome JSON that Perfetto, TensorBoard and HTA open.
``omniprof.load_trace(path)`` reads any such trace (PyTorch's too) back for the same
analyses (``key_averages()``, ``events()``, ``export_stacks()``).

``OMNIPROF_ONDEMAND=1`` in the environment makes the process traceable on demand
(``omniprof trigger --pid``); see ``omniprof._ondemand``. ``omniprof.flight_recorder()``
keeps the last seconds of every op and writes them out when a step is slow, the job hangs
or fails; ``OMNIPROF_FLIGHT_RECORDER=DIR`` turns it on at import (``python -m omniprof
script.py`` for a program that does not import omniprof); see ``omniprof._flight``.
"""

from ._event_list import EventList
from ._native import (
    __version__,
    FunctionEvent,
    KeyAverage,
    PanicException,
    ProfilerError,
    Schedule,
    Trace,
    TraceDirHandler,
    instant,
    load_trace,
    record_function,
    step,
)
from .profiler import (
    ProfilerAction,
    ProfilerActivity,
    ProfilerActivityConfig,
    kineto_available,
    profile,
    supported_activities,
    tensorboard_trace_handler,
)

from . import _flight, _ondemand
from ._flight import FlightRecorder, flight_recorder

#: ``torch.profiler.schedule``; see ``Schedule``.
schedule = Schedule

_ondemand.enable_from_env()
_flight.enable_from_env()

# torch.profiler's names that are PyTorch's own rather than a profiler's (its enums, its
# execution trace observer, its step tracker, ITT ranges, the optimizer hook, the
# experimental config): given as torch.profiler gives them, so that code reading them off
# the module it imported as its profiler keeps working. torch is imported on first use.
_FROM_TORCH_PROFILER = (
    "CuspyConfig",
    "DeviceType",
    "ExecutionTraceObserver",
    "KinetoStepTracker",
    "PerformanceMetricsConfig",
    "RecordScope",
    "_ExperimentalConfig",
    "itt",
    "register_optimizer_step_post_hook",
)


def __getattr__(name: str) -> object:
    if name in _FROM_TORCH_PROFILER:
        import torch.profiler

        return getattr(torch.profiler, name)
    raise AttributeError(f"module 'omniprof' has no attribute {name!r}")

__all__ = [
    "__version__",
    "EventList",
    "FlightRecorder",
    "FunctionEvent",
    "KeyAverage",
    "PanicException",
    "ProfilerAction",
    "ProfilerActivity",
    "ProfilerActivityConfig",
    "ProfilerError",
    "Schedule",
    "Trace",
    "TraceDirHandler",
    "instant",
    "flight_recorder",
    "kineto_available",
    "load_trace",
    "profile",
    "record_function",
    "schedule",
    "step",
    "supported_activities",
    "tensorboard_trace_handler",
]
