"""The flight recorder: omniprof's recorder left on, keeping the last seconds of every op in
bounded memory and writing them out as a normal trace when a step is slow, the job hangs or
fails, or someone asks.

``omniprof.flight_recorder(...)`` starts it, as a context manager or by ``start()``;
``OMNIPROF_FLIGHT_RECORDER=DIR`` in the environment starts it at ``import omniprof`` (or
under ``python -m omniprof script.py``) for a program that does not call it. The recording
is the engine's (see the Rust ``omniprof::FlightRecorder``); this module adds what only
Python sees: PyTorch's ops through the op observer, the optimizer's steps, an exception
escaping, and the warnings.
"""

import atexit
import importlib.util
import os
import sys
from types import TracebackType
from typing import Any, Dict, List, Optional, Type, Union

from . import _native, _observer, _ondemand, _warn

#: The environment switch: the dump directory. Its companions tune the recorder.
ENV = "OMNIPROF_FLIGHT_RECORDER"
_ENV_NUMBERS = {
    "OMNIPROF_FLIGHT_SECONDS": "seconds",
    "OMNIPROF_FLIGHT_MAX_MB": "max_mb",
    "OMNIPROF_FLIGHT_HANG_S": "hang_after_s",
    "OMNIPROF_FLIGHT_SLOW_FACTOR": "slow_factor",
}

#: How long a failing process waits for its failure dump.
_FAILURE_WAIT_S = 60.0


class FlightRecorder:
    """The process's flight recorder (at most one runs). Made by ``flight_recorder``; a
    context manager that starts it on entry, and on exit writes a ``failure`` dump when an
    exception escapes, then stops it."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._native: Optional[_native.FlightRecorder] = None

    def start(self) -> "FlightRecorder":
        """Starts recording; ``ProfilerError`` when a recorder or a profiling session
        already runs in this process. PyTorch's ops are recorded once torch is imported."""
        if importlib.util.find_spec("torch") is not None:
            # Imports torch first: the observer is built only once torch is imported.
            _ondemand.count_optimizer_steps()
            _observer.install()
        o = self._options
        self._native = _native.FlightRecorder(
            float(o["seconds"]),
            int(o["max_mb"] * (1 << 20)),
            None if o["dump_dir"] is None else os.fspath(o["dump_dir"]),
            int(o["keep"]),
            float(o["min_interval_s"]),
            float(o["slow_factor"]),
            int(o["warmup_steps"]),
            None if o["hang_after_s"] is None else float(o["hang_after_s"]),
            bool(o["record_shapes"]),
            bool(o["profile_memory"]),
            bool(o["serve_dump_requests"]),
        )
        return self

    def __enter__(self) -> "FlightRecorder":
        return self.start()

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if _is_failure(exc):
            self.dump_failure()
        self.stop()

    def dump(self, path: Union[str, "os.PathLike[str]"]) -> Dict[str, Any]:
        """Writes the last seconds, ending now, to ``path`` (Chrome JSON; ``.gz`` for
        gzip); returns what it holds: ``path``, ``events``, ``overwritten`` (records the
        memory bound overwrote inside the window since the start), ``cut_short``."""
        try:
            return self._running().dump(os.fspath(path))
        finally:
            self._warn()

    def dump_failure(self) -> None:
        """Writes a ``failure`` dump into the dump directory and waits for it."""
        native = self._running()
        native.trigger("failure")
        native.flush(_FAILURE_WAIT_S)
        self._warn()

    def trigger(self, reason: str = "request") -> None:
        """Asks for a dump into the dump directory (rate-limited), written in the
        background; ``flush`` waits for it."""
        self._running().trigger(reason)

    def flush(self, timeout_s: float = 60.0) -> bool:
        """Waits for the dumps asked for; False when some are still pending."""
        try:
            return self._running().flush(timeout_s)
        finally:
            self._warn()

    def dumps(self) -> List[str]:
        """The dumps kept in the dump directory, oldest first."""
        return self._running().dumps()

    def stats(self) -> Dict[str, int]:
        """``held_bytes``, ``max_bytes``, ``overwritten``, ``dumps_written``,
        ``dumps_skipped``."""
        return self._running().stats()

    def stop(self) -> None:
        """Stops recording, after the dumps asked for are written."""
        native, self._native = self._native, None
        if native is not None:
            for message in native.stop():
                _warn.warn(message)

    @property
    def running(self) -> bool:
        return self._native is not None

    def _running(self) -> "_native.FlightRecorder":
        if self._native is None:
            raise _native.ProfilerError("the flight recorder is not running")
        return self._native

    def _warn(self) -> None:
        if self._native is not None:
            for message in self._native.take_warnings():
                _warn.warn(message)


def flight_recorder(
    seconds: float = 30.0,
    dump_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    *,
    max_mb: float = 64.0,
    keep: int = 5,
    min_interval_s: float = 30.0,
    slow_factor: float = 3.0,
    warmup_steps: int = 10,
    hang_after_s: Optional[float] = None,
    record_shapes: bool = False,
    profile_memory: bool = False,
    serve_dump_requests: bool = True,
) -> FlightRecorder:
    """The flight recorder: keeps the last ``seconds`` of every op, user range and step in
    at most ``max_mb`` MiB of records, and writes them to ``dump_dir`` as a Kineto-format
    trace (``flight_<reason>_step<N>_rank<R>_pid<P>_<n>.pt.trace.json``) when:

    - a step took more than ``slow_factor`` times the median of the steps before it, once
      ``warmup_steps`` have ended (steps: ``omniprof.step()``, the optimizer's ``step``, a
      profiler schedule's ``step``);
    - no step ended for ``hang_after_s`` seconds (off by default);
    - an exception escapes the ``with`` block (under the environment switch: the program;
      under ``python -m omniprof``, also a ``sys.exit`` with an error);
    - ``omniprof trigger --pid PID --dump`` or ``trigger()`` asks.

    At most one dump per ``min_interval_s`` (a failure's excepted), the last ``keep`` kept.
    A dump directory that is a link, another user's or not writable writes nothing and
    warns once; the job goes on. ``dump(path)`` writes the window anywhere, now.

    Use it as a context manager, or call ``start()``::

        with omniprof.flight_recorder(seconds=30, dump_dir="flight"):
            train()
    """
    return FlightRecorder(
        seconds=seconds,
        dump_dir=dump_dir,
        max_mb=max_mb,
        keep=keep,
        min_interval_s=min_interval_s,
        slow_factor=slow_factor,
        warmup_steps=warmup_steps,
        hang_after_s=hang_after_s,
        record_shapes=record_shapes,
        profile_memory=profile_memory,
        serve_dump_requests=serve_dump_requests,
    )


def _is_failure(exc: Optional[BaseException]) -> bool:
    """An exception that ends a program in error: not a clean ``sys.exit()``."""
    if exc is None:
        return False
    if isinstance(exc, SystemExit):
        return exc.code not in (None, 0)
    return True


def exiting(exc: BaseException) -> None:
    """The program ends with ``exc``: a failure dump from the switched-on recorder when it is
    an error (an exception, or ``sys.exit`` with a non-zero status)."""
    if _from_env is not None and _from_env.running and _is_failure(exc):
        _from_env.dump_failure()


#: The recorder the environment switch (or ``omniprof run``) started.
_from_env: Optional[FlightRecorder] = None


def enable_from_env() -> bool:
    """Starts the flight recorder when ``OMNIPROF_FLIGHT_RECORDER`` names a dump directory;
    returns whether it runs. Bad values and a refusal are warnings: the program goes on."""
    dump_dir = os.environ.get(ENV)
    if not dump_dir:
        return _from_env is not None
    return switch_on(dump_dir, f"{ENV} is set")


def switch_on(dump_dir: str, why: str, **options: Any) -> bool:
    """Starts the process's flight recorder for the rest of its life, dumping into
    ``dump_dir``: the environment switch's, and ``omniprof run --flight-recorder``'s. The
    companions of ``OMNIPROF_FLIGHT_RECORDER`` tune it, then ``options``. An uncaught
    exception writes a failure dump; the recorder stops at exit. Returns whether it runs;
    bad values and a refusal are warnings naming ``why`` it was asked for."""
    global _from_env
    if _from_env is not None:
        return True
    tuned: Dict[str, Any] = {}
    for key, name in _ENV_NUMBERS.items():
        text = os.environ.get(key)
        if text is None:
            continue
        try:
            tuned[name] = float(text)
        except ValueError:
            _warn.warn(f"omniprof: {key}={text!r} is not a number; the default is used")
    tuned.update(options)
    try:
        recorder = flight_recorder(dump_dir=dump_dir, **tuned).start()
    except (_native.ProfilerError, ValueError) as e:
        _warn.warn(f"omniprof: {why}, but the flight recorder did not start: {e}")
        return False
    _from_env = recorder
    previous = sys.excepthook

    def dump_then_report(
        exc_type: Type[BaseException], exc: BaseException, tb: Optional[TracebackType]
    ) -> None:
        exiting(exc)
        previous(exc_type, exc, tb)

    sys.excepthook = dump_then_report
    atexit.register(recorder.stop)
    return True


def switched_on() -> Optional[FlightRecorder]:
    """The recorder ``switch_on`` started, while it runs."""
    return _from_env if _from_env is not None and _from_env.running else None
