"""On-demand tracing of this Python process, as Kineto's daemon mode gives PyTorch.

With ``OMNIPROF_ONDEMAND=1`` in the environment, ``import omniprof`` starts serving
triggers: ``omniprof trigger --pid PID --duration-ms 500`` (or ``--iterations 3``) then
traces the running process without touching its code. With torch installed, the traces hold
PyTorch's ops (the op observer is installed as a backend, attached only while a trace
records), and each optimizer step ends one iteration; a loop without an optimizer calls
``omniprof.step()`` itself.

With ``KINETO_USE_DAEMON=1`` (as PyTorch's Kineto reads it), the process also polls a Kineto
daemon, dynolog or ``omniprof daemon``, the way Kineto does: ``dyno gputrace --pids PID`` or
``omniprof trigger --pid PID`` through the daemon then traces it with omniprof.
"""

import importlib.util

from . import _native, _observer, _warn


_counting = False


def count_optimizer_steps() -> None:
    """Makes each optimizer step end one iteration (``omniprof.step()``), once per process:
    on-demand tracing and the flight recorder share the hook, so a step counts once."""
    global _counting
    if _counting:
        return
    from torch.optim.optimizer import register_optimizer_step_post_hook

    register_optimizer_step_post_hook(lambda *_: _native.step())
    _counting = True


def enable_from_env() -> bool:
    """Serves triggers, polls the Kineto daemon, or both, as the environment asks; returns
    whether either runs. The op observer is ready before the first request can arrive. A
    failure is a warning: the program goes on untraced."""
    serve, poll = _native.on_demand_opted_in(), _native.kineto_daemon_opted_in()
    if not (serve or poll):
        return False
    if importlib.util.find_spec("torch") is not None:
        # Imports torch (the observer is built only for a program that has), so that a
        # program importing omniprof first still has its ops traced.
        count_optimizer_steps()
        _observer.install()
        _observer.install_privateuse1_profiler()
    running = False
    for wanted, start in ((serve, _native.serve_on_demand), (poll, _native.poll_kineto_daemon)):
        if not wanted:
            continue
        try:
            start()
            running = True
        except _native.ProfilerError as e:
            _warn.warn(f"omniprof: {e}")
    return running
