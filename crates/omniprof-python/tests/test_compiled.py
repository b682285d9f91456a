"""torch.compile and TorchScript under omniprof: the ranges PyTorch emits only while a
profiler listens (compiled regions, AOTAutograd's wrappers, TorchScript functions) are
recorded as torch.profiler records them, and the flag PyTorch reads is given back after.

torch is required (see test_torch.py); torch.compile on CPU needs a C++ compiler.
"""

import pytest

import omniprof
from conftest import require_torch

torch = require_torch()

from torch.profiler import ProfilerActivity, profile as torch_profile  # noqa: E402


def activation(x: "torch.Tensor") -> "torch.Tensor":
    return (x.sin() + x.cos()).relu()


@torch.jit.script
def scripted_fn(x: torch.Tensor) -> torch.Tensor:
    return x * 2 + 1


def names(averages: object) -> set:
    return {row.key for row in averages}  # type: ignore[attr-defined]


def flag() -> bool:
    return bool(torch.autograd.profiler._is_profiler_enabled)


def test_compiled_regions_and_torchscript_functions_are_recorded_as_under_torch_profiler() -> None:
    compiled = torch.compile(activation)
    x = torch.randn(16)
    compiled(x)  # compiles
    scripted_fn(x)
    scripted_fn(x)
    with torch_profile(activities=[ProfilerActivity.CPU]) as theirs:
        compiled(x)
        scripted_fn(x)
    assert not flag()
    with omniprof.profile() as ours:
        assert flag()
        compiled(x)
        scripted_fn(x)
    assert not flag(), "the flag reads as before once the session stopped"

    theirs_names, ours_names = names(theirs.key_averages()), names(ours.key_averages())
    regions = {n for n in theirs_names if n.startswith("## Call CompiledFxGraph")}
    assert regions and "Pregraph bytecode" in theirs_names and "scripted_fn" in theirs_names
    assert theirs_names <= ours_names, sorted(theirs_names - ours_names)


def test_compiled_regions_are_recorded_with_python_stacks_on_as_under_torch_profiler() -> None:
    compiled = torch.compile(activation)
    x = torch.randn(16)
    compiled(x)
    flags = dict(with_stack=True, with_modules=True, record_shapes=True)
    with torch_profile(activities=[ProfilerActivity.CPU], **flags) as theirs:
        compiled(x)
    with omniprof.profile(**flags) as ours:
        compiled(x)
    theirs_names, ours_names = names(theirs.key_averages()), names(ours.key_averages())
    assert any(n.startswith("## Call CompiledFxGraph") for n in theirs_names)
    assert theirs_names <= ours_names, sorted(theirs_names - ours_names)


def test_the_flag_is_given_back_after_a_session_that_raised() -> None:
    omniprof._observer.install()
    assert not flag()
    with pytest.raises(KeyError):
        with omniprof.profile():
            raise KeyError("inside")
    assert not flag()

    def fail(_: object) -> None:
        raise ValueError("from on_trace_ready")

    with pytest.raises(ValueError):
        with omniprof.profile(schedule=omniprof.schedule(wait=0, warmup=0, active=1), on_trace_ready=fail) as prof:
            prof.step()
    assert not flag()
    # Set by a torch.profiler session that outlives omniprof's, it stays set.
    with torch_profile(activities=[ProfilerActivity.CPU]):
        with omniprof.profile():
            pass
        assert flag()
    assert not flag()
