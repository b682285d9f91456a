"""Profiling a process that ``omniprof run`` started, with no change to its code.

``omniprof run`` puts a directory holding only a ``sitecustomize`` module first on
``PYTHONPATH`` and its options, as JSON, in ``OMNIPROF_RUN``; every Python process the
command starts (a ``torchrun`` job's launcher and ranks too) inherits both. That module
hands over to the ``sitecustomize`` it hides, if there is one, and calls ``boot()``, which:

- starts a profile when the program imports torch (at once when torch is not installed, or
  already imported), so that PyTorch's op observer is there from the first op; nothing
  imports torch that the program does not;
- counts steps as the drop-in's schedule does: each optimizer step (right after its
  ``Optimizer.step#...`` range) and each ``omniprof.step()`` ends one (a loop without an
  optimizer calls the latter);
- records what the options ask: steps ``A..B`` (a schedule's wait, warm-up and active
  steps, so the trace's ``ProfilerStep#N`` are those steps), a time window, or the whole
  life of the process; with ``--ondemand`` only ``OMNIPROF_ONDEMAND`` serves triggers;
- writes one trace per process into the run directory, named by its rank (from
  ``torch.distributed``, else ``RANK``/``LOCAL_RANK``) and pid, when its window closes or,
  for a window still open, when the process exits (normally, by Ctrl-C, or by ``SIGTERM``
  where the program has no handler of its own);
- or, with ``--flight-recorder``, runs the flight recorder instead of a profile, from the
  program's import of torch to its exit (``omniprof._flight``'s switch, dumping into the
  run directory or ``--dump-dir``);
- keeps a status file per process (steps seen, steps recorded) where the command reads it
  for its status line, and where a process that cannot profile says why.

torchrun's launcher (the elastic agent, which runs no step) writes no trace, nor does a
DataLoader worker unless ``--dataloader-workers`` asked for them.
"""

import atexit
import functools
import importlib.util
import json
import os
import signal
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import _native, _observer
from .profiler import _DISTRIBUTED_INFO, ProfilerAction, _distributed_info, profile

#: The environment variable holding the options of ``omniprof run`` (JSON).
ENV = "OMNIPROF_RUN"
#: The run's state directory, where each process keeps its status file.
STATE_ENV = "OMNIPROF_RUN_STATE"
# How often, at most, a step that changes nothing recorded rewrites the status file.
_STATUS_EVERY_S = 0.25
# How often a time window's thread looks at the clock, and how long after a window is due
# it waits for a step to open or close it on the thread that steps.
_WINDOW_POLL_S = 0.02
_WINDOW_GRACE_S = 0.2
# The environment variables a launcher names a process's rank by, first found wins.
_RANK_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "LOCAL_RANK")
# The actions of a schedule's recording steps.
_RECORDING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


def _env_rank() -> Optional[int]:
    for name in _RANK_VARS:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def _is_elastic_agent() -> bool:
    """Whether this process is torchrun's launcher, which starts the ranks and runs none."""
    return "torch.distributed.elastic.agent.server.api" in sys.modules and _env_rank() is None


def _torch_half_imported() -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and getattr(getattr(torch, "__spec__", None), "_initializing", False)


def _is_dataloader_worker() -> bool:
    """Whether this process is a DataLoader's worker: a multiprocessing child running its
    worker loop (asked of the process, since the loop clears its worker info as it ends)."""
    mp = sys.modules.get("multiprocessing")
    if mp is None:
        return False
    target = getattr(mp.current_process(), "_target", None)
    return getattr(target, "__module__", None) == "torch.utils.data._utils.worker"


class _Run:
    """This process's part of a run: its profile, its step count and its status file."""

    def __init__(self, options: Dict[str, Any], state: str) -> None:
        self.options = options
        self.dir: str = options["dir"]
        self.status_path = os.path.join(state, "status", str(os.getpid()))
        self.lock = threading.RLock()
        self.prof: Optional[profile] = None
        self.steps = 0
        self.recorded = 0
        self.written: List[str] = []
        self.done = False
        self.status_at = 0.0
        # Between the program's import of torch starting and ending, nothing may start a
        # profile on another thread.
        self.torch_importing = False
        # Whether the program built an optimizer (it steps).
        self.stepping = False
        # A time window's opening and closing times (monotonic), when it is one.
        self.window_at: Optional[float] = None
        self.window_end = float("inf")
        # A forked child (a DataLoader worker, a multiprocessing fork) inherits this state
        # but not the threads behind the profile: it leaves both alone.
        self.pid = os.getpid()
        self.write_status(force=True)

    def forked(self) -> bool:
        return os.getpid() != self.pid

    # -- the profile ------------------------------------------------------------------

    def new_profile(self, schedule: Optional[_native.Schedule]) -> profile:
        o = self.options
        return profile(
            activities=o.get("activities"),
            schedule=schedule,
            on_trace_ready=self.save,
            record_shapes=o.get("record_shapes", False),
            profile_memory=o.get("profile_memory", False),
            with_stack=o.get("with_stack", False),
            with_flops=o.get("with_flops", False),
            with_modules=o.get("with_modules", False),
        )

    def begin(self) -> None:
        """Starts what the options ask, once torch is imported (or will never be)."""
        with self.lock:
            if self.prof is not None or self.done:
                return
            steps: Optional[Tuple[int, int]] = self.options.get("steps")
            if steps is not None:
                first, last = steps
                warmup = 1 if first > 0 else 0
                schedule = _native.Schedule(
                    wait=first - warmup, warmup=warmup, active=last - first + 1, repeat=1
                )
                self.prof = self.new_profile(schedule)
                self.prof.start()
            elif self.options.get("duration_s") is None and self.options.get("delay_s") is None:
                self.prof = self.new_profile(None)
                self.prof.start()

    def window(self) -> None:
        """``--delay``/``--duration``, on a thread of its own: the window opens at the first
        step after the delay, on the thread that steps (or from here, a moment later, in a
        program that does not step), and closes the same way after its duration. A program
        that has built an optimizer steps: its window waits for its first step (see
        ``optimizer_built``)."""
        self.window_at = time.monotonic() + (self.options.get("delay_s") or 0.0)
        duration = self.options.get("duration_s")
        while not self.done:
            time.sleep(_WINDOW_POLL_S)
            now = time.monotonic()
            # A program that steps gets a moment to open or close the window at a step.
            grace = _WINDOW_GRACE_S if self.steps else 0.0
            if self.prof is None and now >= self.window_at + grace:
                if self.stepping and not self.steps:
                    continue
                # Python does not hold another thread's import of torch's submodules back
                # while the program's import of torch runs: the observer is built here once
                # that import has returned, holding no lock the import takes.
                if _torch_half_imported():
                    continue
                if "torch" in sys.modules:
                    _observer.install()
                self.window_step()
            elif duration is not None and now >= self.window_end + grace:
                self.window_step()

    def window_step(self) -> None:
        """Opens the time window when it is due, or closes it when it is over. The clock is
        read here, under the lock, and again once the observer is built (which takes a
        while, the first time): the duration counts from the start."""
        with self.lock:
            now = time.monotonic()
            if self.done or self.torch_importing or self.window_at is None:
                return
            # A program that built an optimizer opens it at a step: the check above, made
            # without the lock, may be older than the optimizer.
            if self.prof is None and now >= self.window_at and (self.steps or not self.stepping):
                if "torch" in sys.modules:
                    _observer.install()
                self.window_end = time.monotonic() + (self.options.get("duration_s") or 0.0)
                self.prof = self.new_profile(None)
                self.prof.start()
            elif self.prof is not None and self.options.get("duration_s") is not None and now >= self.window_end:
                self.finish()

    def drop_window(self) -> None:
        """Drops a time window open before the program's work began (it held start-up);
        it opens again when due (at once if it is), for its whole duration."""
        prof = self.prof
        if prof is not None and self.window_at is not None and not self.done:
            prof._session.abort()
            prof._announce_stop()
            self.prof = None

    def importing_torch(self) -> None:
        """The program starts importing torch: a window open already records without
        PyTorch's ops, so it is dropped and opens again once torch is there."""
        with self.lock:
            self.torch_importing = True
            self.drop_window()

    def torch_imported(self) -> None:
        """The program's import of torch is done: count its optimizer steps, and start what
        waited for it."""
        _count_optimizer_steps(self.step, around=True, built=self.optimizer_built)
        with self.lock:
            self.torch_importing = False
        self.begin()

    def optimizer_built(self) -> None:
        """The program builds its first optimizer of a class: it steps. Its start-up is not
        over (the first optimizer's construction imports torch._dynamo, seconds without an
        op), so a time window open before its first step is dropped, and the window opens
        at its first step once due instead of on time."""
        with self.lock:
            self.stepping = True
            if not self.steps:
                self.drop_window()

    def step(self) -> None:
        """Ends one step of the program."""
        if self.forked():
            return
        with self.lock:
            self.steps += 1
            prof = self.prof
            recording = prof is not None and prof._session.running and prof.current_action in _RECORDING
            if recording:
                self.recorded += 1
            if self.window_at is not None:
                self.window_step()
            elif prof is not None and prof._session.scheduled:
                self.tag_rank(prof)
                prof.step()
                if self.written:
                    # The window closed: nothing more to record in this process.
                    prof.stop()
                    self.prof = None
                    self.done = True
        self.write_status(force=recording)

    def tag_rank(self, prof: profile) -> None:
        """The rank HTA and ``omniprof ranks`` read: torch.profiler's ``distributedInfo``
        once ``torch.distributed`` is initialized, before that the launcher's rank."""
        info = _distributed_info()
        if info is None:
            rank = _env_rank()
            if rank is None:
                return
            info = {"rank": rank, "world_size": int(os.environ.get("WORLD_SIZE", "0") or 0)}
        prof.add_metadata_json(_DISTRIBUTED_INFO, json.dumps(info, default=str))

    def finish(self) -> None:
        """Stops the profile still recording, writing its trace: at a time window's end and
        at exit."""
        if self.forked():
            return
        with self.lock:
            prof, self.prof = self.prof, None
            self.done = True
            if prof is None or not prof._session.running:
                return
            self.tag_rank(prof)
            if prof.current_action in _RECORDING or not prof._session.scheduled:
                prof.stop()
            else:
                # A schedule that never reached its window: no trace, and no warm-up's.
                prof._session.abort()
                prof._announce_stop()
        self.write_status(force=True)

    def save(self, prof: profile) -> None:
        """``on_trace_ready``: writes the trace as ``rank<R>-pid<P>.pt.trace.json`` (a
        worker's as ``rank<R>-worker-pid<P>.pt.trace.json``; no rank, no ``rank<R>-``)."""
        if _is_elastic_agent():
            return
        name = f"pid{os.getpid()}.pt.trace.json"
        if _is_dataloader_worker():
            if not self.options.get("dataloader_workers"):
                return
            name = f"worker-{name}"
        info = _distributed_info()
        rank = info["rank"] if info is not None else _env_rank()
        if rank is not None:
            name = f"rank{rank}-{name}"
        path = os.path.join(self.dir, name)
        prof.export_chrome_trace(path)
        self.written.append(path)

    # -- the status file -------------------------------------------------------------

    def write_status(self, force: bool = False) -> None:
        """``<steps> <recorded>`` in this process's status file, which the command reads for
        its status line (written aside and renamed: it never reads half a line)."""
        now = time.monotonic()
        if not force and now - self.status_at < _STATUS_EVERY_S:
            return
        self.status_at = now
        write_status(self.status_path, f"{self.steps} {self.recorded}\n")


def write_status(path: str, text: str) -> None:
    aside = f"{path}.tmp"
    try:
        with open(aside, "w") as f:
            f.write(text)
        os.replace(aside, path)
    except OSError:
        pass  # the command went away, or its state with it: nothing to tell


def _after_import(name: str, before: Callable[[], None], then: Callable[[], None]) -> None:
    """Calls ``before()`` when the program's own ``import name`` starts (before the module
    exists) and ``then()`` once it has run the module, without importing it and without
    changing its spec or loader (the loader's ``exec_module`` is wrapped for that one
    call)."""

    class Watch:
        def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
            if fullname != name:
                return None
            sys.meta_path.remove(self)
            before()
            spec = importlib.util.find_spec(fullname)
            loader = getattr(spec, "loader", None)
            if loader is None or not hasattr(loader, "exec_module"):
                then()
                return spec
            run = loader.exec_module

            def exec_module(module: Any) -> None:
                try:
                    run(module)
                finally:
                    del loader.exec_module
                then()

            loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, Watch())


def _count_optimizer_steps(
    step: Callable[[], None], around: bool, built: Optional[Callable[[], None]] = None
) -> None:
    """Calls ``step()`` after each optimizer step. ``around`` (a schedule's steps): outside
    its ``Optimizer.step#...`` range (as a loop calling ``prof.step()`` after
    ``optimizer.step()`` would), so that each ``ProfilerStep#N`` holds its whole optimizer
    step: the wrapper torch puts around every optimizer class's ``step`` is wrapped in turn,
    and an optimizer step inside another (a wrapper optimizer's) counts once. Otherwise, and
    in a torch without that wrapper, a global post-hook, which runs inside the range.
    ``built()``, with the wrapper, is called as the first optimizer of each class is built
    (torch wraps its class's ``step`` then)."""
    from torch.optim import Optimizer

    hook_step = getattr(Optimizer, "profile_hook_step", None) if around else None
    if hook_step is None:
        from torch.optim.optimizer import register_optimizer_step_post_hook

        register_optimizer_step_post_hook(lambda *_: step())
        return
    depth = threading.local()

    def profile_hook_step(func: Callable[..., Any]) -> Callable[..., Any]:
        if built is not None:
            built()
        hooked = hook_step(func)

        @functools.wraps(hooked)
        def counted(*args: Any, **kwargs: Any) -> Any:
            outer = getattr(depth, "n", 0) == 0
            depth.n = getattr(depth, "n", 0) + 1
            try:
                return hooked(*args, **kwargs)
            finally:
                depth.n -= 1
                if outer:
                    step()

        return counted

    Optimizer.profile_hook_step = staticmethod(profile_hook_step)  # type: ignore[method-assign]


def _finish_with_multiprocessing(finish: Callable[[], None]) -> None:
    """Calls ``finish()`` at multiprocessing's exit too: a multiprocessing child (mp.spawn's
    ranks, a spawned DataLoader worker) ends in os._exit, past atexit."""

    def register() -> None:
        from multiprocessing.util import Finalize

        Finalize(None, finish, exitpriority=0)

    if "multiprocessing.util" in sys.modules:
        register()
    else:
        _after_import("multiprocessing.util", lambda: None, register)


def _on_sigterm(run: _Run, previous: Any) -> Callable[[int, Any], None]:
    def handler(signum: int, frame: Any) -> None:
        run.finish()
        # Die of the signal, as the program would have.
        signal.signal(signum, previous)
        os.kill(os.getpid(), signum)

    return handler


def boot() -> None:
    """Profiles this process as ``OMNIPROF_RUN`` says; called by ``omniprof run``'s
    ``sitecustomize``. Does nothing without it, or with ``--ondemand`` (importing omniprof
    with ``OMNIPROF_ONDEMAND`` set already serves triggers)."""
    text, state = os.environ.get(ENV), os.environ.get(STATE_ENV)
    if not text or not state:
        return
    options = json.loads(text)
    if options.get("ondemand"):
        return
    if options.get("flight_recorder") is not None:
        _boot_flight_recorder(options, state)
        return
    run = _Run(options, state)
    import omniprof

    native_step = _native.step

    def step() -> int:
        n = native_step()
        run.step()
        return n

    # Before the program can import it: `omniprof.step()` and `from omniprof import step`.
    omniprof.step = step  # type: ignore[assignment]

    if "torch" in sys.modules:
        run.torch_imported()
    elif importlib.util.find_spec("torch") is None:
        run.begin()
    else:
        _after_import("torch", run.importing_torch, run.torch_imported)
    if options.get("delay_s") is not None or options.get("duration_s") is not None:
        threading.Thread(target=run.window, name="omniprof-run-delay", daemon=True).start()
    atexit.register(run.finish)
    _finish_with_multiprocessing(run.finish)
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm(run, signal.SIG_DFL))


def _boot_flight_recorder(options: Dict[str, Any], state: str) -> None:
    """``--flight-recorder``: the flight recorder's switch (``omniprof._flight``) instead of
    a profile, from the program's import of torch (at once without torch) to its exit,
    dumping into the run directory or ``--dump-dir``. A process that turns out to step
    nothing of the job stops its recorder as soon as it is known: torchrun's launcher (a
    rank's failure fails it too, and its dump would claim rank 0) and a spawned DataLoader
    worker (it would answer its rank's peer dumps under that rank's name)."""
    from . import _flight

    flight: Dict[str, Any] = options["flight_recorder"]
    tuned = {"record_shapes": options.get("record_shapes", False), "profile_memory": options.get("profile_memory", False)}
    if flight.get("seconds") is not None:
        tuned["seconds"] = flight["seconds"]
    # Counted among the run's processes; its dumps are found by its pid.
    write_status(os.path.join(state, "status", str(os.getpid())), "0 0\n")

    def stop() -> None:
        recorder = _flight.switched_on()
        if recorder is not None:
            recorder.stop()

    def start() -> None:
        if _flight.switch_on(flight["dump_dir"], "omniprof run --flight-recorder asked for it", **tuned):
            if "torch" in sys.modules:
                _stop_in_dataloader_workers(stop)

    def stop_in_launcher() -> None:
        if _is_elastic_agent():
            stop()

    if "torch" in sys.modules or importlib.util.find_spec("torch") is None:
        start()
    else:
        _after_import("torch", lambda: None, start)
    _after_import("torch.distributed.elastic.agent.server.api", lambda: None, stop_in_launcher)
    _finish_with_multiprocessing(stop)


def _stop_in_dataloader_workers(stop: Callable[[], None]) -> None:
    """Makes a DataLoader worker call ``stop()`` first. A spawned worker imports torch (and
    so starts the recorder) before it learns that it is one; its loop is found by name when
    the parent's process object is unpickled, so the wrapper put here in its place runs."""
    from torch.utils.data._utils import worker

    loop = worker._worker_loop

    @functools.wraps(loop)
    def stopped_first(*args: Any, **kwargs: Any) -> Any:
        stop()
        return loop(*args, **kwargs)

    worker._worker_loop = stopped_first
