"""Bad input: each case raises the documented exception with a message naming the problem."""

import datetime
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

import omniprof

from conftest import missing, require_torch


def test_a_second_profiler_while_one_runs() -> None:
    with omniprof.profile():
        other = omniprof.profile()
        with pytest.raises(omniprof.ProfilerError, match="already active"):
            other.start()
    # Released: the other one may run now.
    with other:
        pass


def test_starting_twice_and_stopping_when_not_running() -> None:
    prof = omniprof.profile()
    with pytest.raises(omniprof.ProfilerError, match="not running"):
        prof.stop()
    # As torch.profiler's, a step without a start and a schedule only counts.
    prof.step()
    assert prof.step_num == 1
    with prof:
        with pytest.raises(omniprof.ProfilerError, match="already running"):
            prof.start()


def test_export_before_stop_raises_and_results_are_empty_with_a_warning(tmp_path: Path) -> None:
    with omniprof.profile() as prof:
        with omniprof.record_function("kept"):
            pass
        with pytest.raises(omniprof.ProfilerError, match="no trace yet"):
            prof.export_chrome_trace(tmp_path / "early.json")
        # As torch.profiler's, empty lists: code that prints a table every N steps goes on.
        with pytest.warns(RuntimeWarning, match=r"^key_averages\(\) is empty: no trace has finished yet"):
            assert prof.key_averages() == []
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # once per profile
            assert prof.events() == [] and prof.key_averages().table() == ""
    assert [e.name for e in prof.events()] == ["kept"]
    with pytest.raises(omniprof.ProfilerError, match="no trace yet"):
        omniprof.profile().events()


def test_an_unwritable_path_raises_and_the_trace_stays(tmp_path: Path) -> None:
    with omniprof.profile() as prof:
        with omniprof.record_function("kept"):
            pass
    bad = tmp_path / "missing-dir" / "trace.json"
    with pytest.raises(omniprof.ProfilerError, match="missing-dir"):
        prof.export_chrome_trace(bad)
    good = tmp_path / "trace.json"
    prof.export_chrome_trace(good)
    assert good.stat().st_size > 0


def test_an_unwritable_export_names_the_path_and_keeps_the_trace(tmp_path: Path) -> None:
    with omniprof.profile() as prof:
        with omniprof.record_function("kept"):
            pass
    missing = tmp_path / "no-such-dir" / "trace.json"
    with pytest.raises(omniprof.ProfilerError, match=re.escape(str(missing))):
        prof.export_chrome_trace(missing)
    assert list(tmp_path.iterdir()) == []
    # Any other name is Chrome JSON, as torch.profiler writes it.
    prof.export_chrome_trace(tmp_path / "trace.txt")
    assert json.loads((tmp_path / "trace.txt").read_text())["traceEvents"]
    prof.export_chrome_trace(tmp_path / "trace.pftrace")
    assert (tmp_path / "trace.pftrace").read_bytes()[:1] == b"\x0a"


def test_bad_schedule_values_are_listed() -> None:
    with pytest.raises(ValueError) as e:
        omniprof.schedule(wait=-1, warmup=0, active=0, repeat=-2)
    for part in ("wait=-1", "warmup=0", "active=0", "repeat=-2", "skip_first=0"):
        assert part in str(e.value)
    with pytest.raises(TypeError, match="omniprof.schedule"):
        omniprof.profile(schedule=0)


def test_bad_activities() -> None:
    with pytest.raises(ValueError, match="invalid activity type: \"tpu\""):
        omniprof.profile(activities=["tpu"])
    with pytest.raises(ValueError, match="more than once"):
        omniprof.profile(activities=[omniprof.ProfilerActivity.CPU, omniprof.ProfilerActivity.CPU])
    with pytest.raises(AssertionError, match="No valid profiler activities found"):
        omniprof.profile(activities=[])
    with pytest.raises(TypeError, match="activities holds 3"):
        omniprof.profile(activities=[3])


def test_bad_config_and_sort_key() -> None:
    with pytest.raises(ValueError, match="ACTIVITY_TYPES"):
        omniprof.profile(config="ACTIVITY_TYPES=nonsense")
    with omniprof.profile() as prof:
        with omniprof.record_function("x"):
            pass
    # The error lists the valid keys.
    with pytest.raises(ValueError, match="unknown sort key \"flop\".*self_cpu_memory_usage.*flops"):
        prof.key_averages().table(sort_by="flop")
    with pytest.raises(IndexError):
        prof.key_averages()[5]


def test_the_panic_hook_is_not_among_the_native_modules_public_names() -> None:
    public = {name for name in dir(omniprof._native) if not name.startswith("_")}
    assert not {name for name in public if "panic" in name.lower()} - {"PanicException"}
    assert "_panic_for_test" not in dir(omniprof._native)


@pytest.mark.parametrize(
    "install, expected",
    [
        (omniprof._native.install_torch_observer, "omniprof.observer.entry_points"),
        (omniprof._native.install_torch_stubs, "omniprof.observer.stubs_api"),
    ],
)
def test_the_install_functions_take_only_their_named_capsule(install: Any, expected: str) -> None:
    # An address as an integer (what they once took) is refused, whatever its value.
    for address in (0, 1, id(object())):
        with pytest.raises(TypeError, match=f"expected a capsule named '{re.escape(expected)}'.*int"):
            install(address)
    with pytest.raises(TypeError, match=re.escape(expected)):
        install(None)
    # A capsule of another name: the standard library's datetime C API.
    capsule = datetime.datetime_CAPI
    with pytest.raises(
        TypeError,
        match=f"expected a capsule named '{re.escape(expected)}'.*'datetime.datetime_CAPI'",
    ):
        install(capsule)


def test_the_observers_capsules_are_not_taken_for_each_other() -> None:
    require_torch()
    from omniprof import _observer

    observer = _observer.module()
    if observer is None:
        missing("the op observer could not be built (a C++ compiler and ninja are needed)")
    entry_points, stubs_api = observer.entry_points(), observer.stubs_api()
    assert type(entry_points).__name__ == type(stubs_api).__name__ == "PyCapsule"
    with pytest.raises(TypeError, match="'omniprof.observer.entry_points'.*'omniprof.observer.stubs_api'"):
        omniprof._native.install_torch_observer(stubs_api)
    with pytest.raises(TypeError, match="'omniprof.observer.stubs_api'.*'omniprof.observer.entry_points'"):
        omniprof._native.install_torch_stubs(entry_points)


def test_a_rust_panic_is_an_exception_and_the_interpreter_survives() -> None:
    with pytest.raises(omniprof.PanicException, match="injected"):
        omniprof._native._testing.panic()
    with omniprof.profile() as prof:
        with omniprof.record_function("after_panic"):
            pass
    assert [r.key for r in prof.key_averages()] == ["after_panic"]
    # In a fresh interpreter too: it catches the panic, goes on and exits normally.
    script = (
        "import omniprof\n"
        "try:\n"
        "    omniprof._native._testing.panic()\n"
        "except BaseException as e:\n"
        "    print('caught', type(e).__name__)\n"
        "with omniprof.profile() as p:\n"
        "    omniprof.instant('alive')\n"
        "print('alive')\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["caught", "PanicException", "alive"]
