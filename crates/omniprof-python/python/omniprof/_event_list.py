"""PyTorch's ``EventList``: what ``prof.events()`` and ``prof.key_averages()`` return.

A ``list`` (as PyTorch's is), of ``FunctionEvent``s or of ``KeyAverage`` rows, so that code
written for torch.profiler can sort it in place, slice it, append to it or test
``isinstance(events, list)``. Its methods read what it holds when they are called: a table
of a list sorted or filtered in place prints those rows. The numbers come from omniprof's
Rust analysis (``_native``): ``table()`` prints what ``omniprof summary`` prints, and
``events.key_averages()`` gives the rows ``prof.key_averages()`` gives.
"""

import json
import os
from collections import namedtuple
from typing import Any, List, Optional, Union

from . import _native

#: Device work linked to a host op (PyTorch's ``Kernel``): ``duration`` in µs.
Kernel = namedtuple("Kernel", ["name", "device", "duration"])

_STACK_METRICS = [
    "self_cpu_time_total",
    "self_cuda_time_total",
    "self_xpu_time_total",
    "self_privateuse1_time_total",
]


class EventList(list):
    """PyTorch's ``EventList``: a ``list`` of ``FunctionEvent``s (``prof.events()``) or of
    ``KeyAverage`` rows (``prof.key_averages()``), with ``table()``, ``key_averages()``,
    ``total_average()``, ``export_stacks()``, ``export_chrome_trace()`` and
    ``self_cpu_time_total`` over what it holds.

    ``use_device`` is the device's name where the profile has device work; ``profile_memory``
    and ``with_flops`` add the table's memory and FLOPs columns, as in PyTorch."""

    def __init__(
        self,
        *args: Any,
        use_device: Optional[str] = None,
        profile_memory: bool = False,
        with_flops: bool = False,
    ) -> None:
        super().__init__(*args)
        self._use_device = use_device
        self._profile_memory = profile_memory
        self._with_flops = with_flops

    def __str__(self) -> str:
        return self.table()

    @property
    def self_cpu_time_total(self) -> float:
        """Self CPU time of every event or row, µs."""
        return sum(item.self_cpu_time_total for item in self)

    def table(
        self,
        sort_by: Optional[str] = None,
        row_limit: Optional[int] = 100,
        max_src_column_width: int = 75,
        max_name_column_width: int = 55,
        max_shapes_column_width: int = 80,
        header: Optional[str] = None,
        top_level_events_only: bool = False,
        time_unit: Optional[str] = None,
    ) -> str:
        """PyTorch's table of what the list holds, one row per event or row, in the list's
        order unless ``sort_by`` names a column (``self_cpu_time_total``,
        ``cuda_time_total``, ``cpu_memory_usage``, ``count``, ...; another is a
        ``ValueError`` listing them). ``row_limit`` ``None`` or -1 prints every row;
        ``time_unit`` ``s``, ``ms`` or ``us`` prints every time in it. An item that is no
        ``FunctionEvent`` or ``KeyAverage`` is a ``TypeError`` naming its place."""
        return _native.events_table(
            self,
            self._profile_memory,
            self._with_flops,
            sort_by,
            row_limit,
            max_src_column_width,
            max_name_column_width,
            max_shapes_column_width,
            header,
            top_level_events_only,
            time_unit,
        )

    def key_averages(
        self,
        group_by_input_shapes: bool = False,
        group_by_stack_n: int = 0,
        group_by_overload_name: bool = False,
        include_python_functions: bool = False,
    ) -> "EventList":
        """The events averaged over their keys, as ``prof.key_averages()`` with the same
        arguments averages every event: an ``EventList`` of ``KeyAverage``s. Needs
        ``FunctionEvent``s (a ``TypeError`` names the first item that is not one)."""
        rows = _native.average_events(
            self,
            group_by_input_shapes,
            group_by_stack_n,
            group_by_overload_name,
            include_python_functions,
        )
        return EventList(
            rows,
            use_device=self._use_device,
            profile_memory=self._profile_memory,
            with_flops=self._with_flops,
        )

    def total_average(self) -> "_native.KeyAverage":
        """Every event or row summed into one ``KeyAverage`` named ``Total``."""
        return _native.events_total(self)

    def supported_export_stacks_metrics(self) -> List[str]:
        """The metrics ``export_stacks`` takes."""
        return list(_STACK_METRICS)

    def export_stacks(self, path: Union[str, "os.PathLike[str]"], metric: str) -> None:
        """Writes each event's Python stack, outermost frame first, with its ``metric`` in
        whole µs: the folded format flame graph tools read (see ``profile.export_stacks``).
        Needs ``FunctionEvent``s; an unknown ``metric`` is a ``ValueError`` naming the
        accepted ones."""
        if metric not in _STACK_METRICS:
            raise ValueError(f"metric should be one of: {_STACK_METRICS}")
        _native.events_stacks(self, os.fspath(path), metric)

    def export_chrome_trace(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes the events as PyTorch's ``EventList.export_chrome_trace`` does: a JSON
        array of one complete event per ``FunctionEvent`` (``pid`` ``"CPU functions"``,
        times in µs, no args; memory events left out) and a flow start for each of its
        kernels. For a whole trace, with device timelines and every arg, use
        ``prof.export_chrome_trace``."""
        flow = f"cpu_to_{self._use_device or 'cuda'}"
        entries: List[dict] = []
        flows = 0
        for event in self:
            if event.activity_type is None:
                continue
            name = event.trace_name
            span = event.time_range
            entries.append(
                {
                    "name": name,
                    "ph": "X",
                    "ts": span.start,
                    "dur": span.elapsed_us(),
                    "tid": event.thread,
                    "pid": "CPU functions",
                    "args": {},
                }
            )
            for _ in event.kernels:
                entries.append(
                    {
                        "name": name,
                        "ph": "s",
                        "ts": span.start,
                        "tid": event.thread,
                        "pid": "CPU functions",
                        "id": flows,
                        "cat": flow,
                        "args": {},
                    }
                )
                flows += 1
        with open(os.fspath(path), "w") as f:
            json.dump(entries, f)
