"""Written by `omniprof run` into a directory of its own, first on PYTHONPATH: profiles this
Python process (omniprof._run.boot) once the sitecustomize module this one hides, if there
is one, has run. It takes its directory off sys.path first, so that the program imports what
it would have imported without `omniprof run`: where there is no other sitecustomize, this
one ends by raising the ImportError that `site` takes for "none" (it says nothing then),
so that no module of that name is left behind. A process that cannot import omniprof says
why in the run's state directory, where `omniprof run` reads it, and runs unprofiled."""


def _omniprof_run() -> bool:
    """Runs the hidden sitecustomize, then profiles; whether there was one."""
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    del sys.modules[__name__]
    try:
        import sitecustomize  # noqa: F401  (the one this hid, if any)
    except ImportError as e:
        if e.name != "sitecustomize":
            raise
        return False
    finally:
        _boot()
    return True


def _boot() -> None:
    try:
        from omniprof import _run
    except ImportError as e:
        _note(f"cannot import omniprof: {e}")
    else:
        try:
            _run.boot()
        except Exception as e:  # the program runs on, unprofiled
            _note(f"omniprof could not profile it: {type(e).__name__}: {e}")


def _note(why: str) -> None:
    import os
    import sys

    state = os.environ.get("OMNIPROF_RUN_STATE")
    if not state:
        return
    try:
        with open(os.path.join(state, "status", f"{os.getpid()}.error"), "w") as f:
            f.write(f"{sys.executable} (pid {os.getpid()}): {why}\n")
    except OSError:
        pass


if not _omniprof_run():
    raise ImportError("No module named 'sitecustomize'", name="sitecustomize")
