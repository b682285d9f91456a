"""Python stacks (``with_stack=True``): Python calls recorded as ``python_function`` events,
``nn.Module`` calls named as PyTorch names them, and each op's ``Call stack``, compared with
torch.profiler's in the same process; every Python thread traced; bad input (recursion past
the depth limit, generators, exceptions, code objects that go away, C calling back into
Python) never breaks the stacks.
"""

import json
import re
import sys
import threading
import warnings
from pathlib import Path
from typing import Any, Dict, List, Tuple

import omniprof
from conftest import require_torch, summary

torch = require_torch()

from torch._C._profiler import _ExperimentalConfig  # noqa: E402
from torch.profiler import ProfilerActivity, profile as torch_profile  # noqa: E402

THIS_FILE = Path(__file__).name


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x: "torch.Tensor") -> "torch.Tensor":
        return torch.relu(self.linear(x))


BLOCK = Block()


def first_user(x: "torch.Tensor") -> "torch.Tensor":
    return BLOCK(x)


def second_user(x: "torch.Tensor") -> "torch.Tensor":
    return BLOCK(x * 2)


def workload() -> None:
    x = torch.randn(4, 8, requires_grad=True)
    (first_user(x) + second_user(x)).sum().backward()


def events(path: Path) -> List[Dict[str, Any]]:
    return json.loads(path.read_text())["traceEvents"]


def of(trace: List[Dict[str, Any]], cat: str) -> List[Dict[str, Any]]:
    return [e for e in trace if e.get("cat") == cat]


def without_addresses(text: str) -> str:
    return re.sub(r" at 0x[0-9a-f]+", "", text)


def user_stack(stack: str) -> str:
    """The frames of a Call stack from the workload down, without addresses: what both
    profilers see the same way (above it are each profiler's own entry frames)."""
    frames = without_addresses(stack).split(";")
    cut = next(i for i, f in enumerate(frames) if f.endswith(": workload"))
    return ";".join(frames[: cut + 1])


def test_python_calls_modules_and_call_stacks_match_torch_profiler(tmp_path: Path) -> None:
    workload()  # warm: lazy imports happen outside both profiles
    with torch_profile(
        activities=[ProfilerActivity.CPU],
        with_stack=True,
        record_shapes=True,
        experimental_config=_ExperimentalConfig(verbose=True),
    ) as theirs:
        workload()
    with omniprof.profile(with_stack=True, record_shapes=True) as ours:
        workload()
    theirs.export_chrome_trace(str(tmp_path / "theirs.json"))
    ours.export_chrome_trace(str(tmp_path / "ours.json"))
    t, o = events(tmp_path / "theirs.json"), events(tmp_path / "ours.json")

    def frames(trace: List[Dict[str, Any]]) -> List[str]:
        # The test's own frame is named at the line each profile started from.
        names = [without_addresses(e["name"]) for e in of(trace, "python_function")]
        return sorted(
            n for n in names if (n.startswith(THIS_FILE) or n.startswith("nn.Module")) and ": test_" not in n
        )

    assert frames(o) == frames(t)
    assert f"{THIS_FILE}({first_user.__code__.co_firstlineno}): first_user" in frames(o)
    assert frames(o).count("nn.Module: Block_0") == 2
    assert frames(o).count("nn.Module: Linear_0") == 2

    ops = of(o, "cpu_op")
    with_stack = [e for e in ops if "Call stack" in e["args"]]
    assert len(with_stack) >= 0.8 * len(ops), (len(with_stack), len(ops))

    def stacks(trace: List[Dict[str, Any]]) -> List[str]:
        return sorted(
            e["name"] + "|" + user_stack(e["args"]["Call stack"])
            for e in of(trace, "cpu_op")
            if "workload" in e["args"].get("Call stack", "")
        )

    assert stacks(o) == stacks(t)

    modules = [e for e in of(o, "python_function") if e["name"].startswith("nn.Module")]
    assert {e["args"]["Python module id"] for e in modules} == {0}
    ids = {e["args"]["Python id"] for e in of(o, "python_function")}
    assert len(ids) == len(of(o, "python_function"))
    assert all(e["args"].get("Python parent id", 0) in ids | {0} for e in of(o, "python_function"))

    # The same ids on the events: each workload frame's parent and module id as PyTorch's.
    def parents(prof: Any) -> List[Tuple[str, str, int]]:
        calls = [e for e in prof.events() if e.is_python_function]
        by_id = {e.python_id: without_addresses(e.name) for e in calls}
        assert len(by_id) == len(calls) and -1 not in by_id
        line = re.compile(rf"^{re.escape(THIS_FILE)}\(\d+\): test_")
        return sorted(
            (name, line.sub("test_", by_id.get(e.python_parent_id, "")), e.python_module_id)
            for e in calls
            for name in [without_addresses(e.name)]
            if (name.startswith(THIS_FILE) or name.startswith("nn.Module")) and ": test_" not in name
        )

    assert parents(ours) == parents(theirs)
    assert any(
        name == "nn.Module: Block_0" and parent.endswith(": first_user") and module == 0
        for name, parent, module in parents(ours)
    )
    assert {e.python_id for e in ours.events() if not e.is_python_function} == {-1}


def callers_of_workload(stack: str) -> str:
    """The frames of a Call stack from the workload up to the outermost, without addresses,
    the line a test function's frame was at (each profile runs from its own lines) left
    out."""
    frames = [f for f in without_addresses(stack).split(";") if f]
    cut = next(i for i, f in enumerate(frames) if f.endswith(": workload"))
    return ";".join(re.sub(rf"^{re.escape(THIS_FILE)}\(\d+\): test_", "test_", f) for f in frames[cut:])


def test_stacks_under_a_schedule_are_the_programs_as_under_torch_profiler(tmp_path: Path) -> None:
    # The window opens inside `step()`, after a warm-up: the frames running then (the test's
    # own, pytest's) are the callers of what follows, and the profiler's frames are not.
    workload()
    traces: Dict[str, List[Dict[str, Any]]] = {}

    def keep(name: str) -> Any:
        def handler(prof: Any) -> None:
            prof.export_chrome_trace(str(tmp_path / f"{name}.json"))
            traces[name] = events(tmp_path / f"{name}.json")

        return handler

    with torch_profile(
        activities=[ProfilerActivity.CPU],
        schedule=torch.profiler.schedule(wait=1, warmup=1, active=3),
        on_trace_ready=keep("theirs"),
        with_stack=True,
        experimental_config=_ExperimentalConfig(verbose=True),
    ) as theirs:
        for _ in range(5):
            workload()
            theirs.step()
    with omniprof.profile(
        schedule=omniprof.schedule(wait=1, warmup=1, active=3),
        on_trace_ready=keep("ours"),
        with_stack=True,
    ) as ours:
        for _ in range(5):
            workload()
            ours.step()

    def callers(trace: List[Dict[str, Any]]) -> List[str]:
        return sorted(
            callers_of_workload(e["args"]["Call stack"])
            for e in of(trace, "cpu_op")
            if ": workload;" in e["args"].get("Call stack", "")
        )

    theirs_callers, ours_callers = callers(traces["theirs"]), callers(traces["ours"])
    assert len(theirs_callers) > 30
    assert ours_callers == theirs_callers
    # Every step's ops run under the same callers: the test function, called by pytest.
    assert len(set(ours_callers)) == 1
    assert ours_callers[0].split(";")[1] == f"test_stacks_under_a_schedule_are_the_programs_as_under_torch_profiler"
    # No op or frame of the window has omniprof's own frames among its callers.
    assert not [
        e["name"] for e in of(traces["ours"], "cpu_op") if "omniprof/profiler.py" in e["args"].get("Call stack", "")
        and "ProfilerStep" not in e["name"]
    ]


def test_torchs_own_ranges_nest_with_python_calls_as_under_torch_profiler(tmp_path: Path) -> None:
    # `Optimizer.step#AdamW.step` begins inside record_function's `__enter__` call, which
    # returns before the range ends: PyTorch's tree closes that call and nests the range in
    # the code around it, with the Python calls after as its children.
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 8)
    opt = torch.optim.AdamW(model.parameters())

    def train_step() -> None:
        loss = model(torch.randn(4, 8)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()

    train_step()
    with torch_profile(
        activities=[ProfilerActivity.CPU],
        with_stack=True,
        experimental_config=_ExperimentalConfig(verbose=True),
    ) as theirs:
        train_step()
    with omniprof.profile(with_stack=True) as ours:
        train_step()

    def children(prof: Any, name: str) -> List[List[str]]:
        return [
            sorted(without_addresses(c.name) for c in e.cpu_children) for e in prof.events() if e.name == name
        ]

    for name in ["Optimizer.step#AdamW.step", "Optimizer.zero_grad#AdamW.zero_grad"]:
        assert children(ours, name) == children(theirs, name), name
        assert children(ours, name) != [[]], name
        (row,) = [r for r in ours.key_averages() if r.key == name]
        assert 0 < row.self_cpu_time_total < row.cpu_time_total, name

    # `omniprof summary` of torch.profiler's own trace: torch's whole table.
    theirs.export_chrome_trace(str(tmp_path / "theirs.json"))
    table = summary(tmp_path / "theirs.json", "--sort-by", "self_cpu_time_total", "--row-limit", "-1")
    assert table == theirs.key_averages().table(sort_by="self_cpu_time_total", row_limit=-1)


def exported(prof: "omniprof.profile", tmp_path: Path) -> List[Dict[str, Any]]:
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    return events(path)


def test_the_frames_of_every_python_thread_are_recorded(tmp_path: Path) -> None:
    started = threading.Barrier(3)

    def worker_loop() -> None:
        started.wait()
        for _ in range(20):
            torch.ones(4).add_(1)

    before = threading.Thread(target=worker_loop)
    before.start()
    with omniprof.profile(with_stack=True) as prof:
        during = threading.Thread(target=worker_loop)
        during.start()
        started.wait()
        before.join()
        during.join()
    stacked = [
        (e["tid"], e["args"].get("Call stack"))
        for e in of(exported(prof, tmp_path), "cpu_op")
        if e["name"] == "aten::add_"
    ]
    threads = {tid for tid, stack in stacked if stack and "worker_loop" in stack}
    assert len(threads) == 2, stacked[:4]
    # The profile functions and threading's hook are taken back.
    assert sys.getprofile() is None and threading.getprofile() is None


def test_a_thread_profiled_by_another_tool_is_left_to_it(tmp_path: Path) -> None:
    import cProfile
    import pstats

    other = cProfile.Profile()
    other.enable()
    try:
        with omniprof.profile(with_stack=True) as prof:
            workload()
    finally:
        other.disable()
    assert any(f[2] == "workload" for f in pstats.Stats(other).stats), "cProfile kept its thread"
    trace = exported(prof, tmp_path)
    assert of(trace, "python_function") == []
    assert any(e["name"] == "aten::addmm" for e in of(trace, "cpu_op"))


def deep(n: int) -> int:
    return 0 if n == 0 else 1 + deep(n - 1)


def raises(n: int) -> None:
    if n == 0:
        raise ValueError("bottom")
    raises(n - 1)


def generator(n: int) -> Any:
    for i in range(n):
        yield torch.ones(1) * i


def test_bad_input_keeps_the_stacks_balanced_and_says_what_was_cut(tmp_path: Path) -> None:
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(5000)
    try:
        with warnings.catch_warnings(record=True) as caught, omniprof.profile(with_stack=True) as prof:
            warnings.simplefilter("always")
            deep(1500)
            try:
                raises(300)
            except ValueError:
                pass
            assert len(list(generator(5))) == 5
            namespace: Dict[str, Any] = {}
            exec("def transient(x):\n    return x.neg()\n", namespace)
            namespace["transient"](torch.ones(2))
            del namespace["transient"]
            exec("def replacement(x):\n    return x.abs()\n", namespace)
            namespace["replacement"](torch.ones(2))
            sorted([3, 1, 2], key=lambda v: torch.tensor(v).item())
    finally:
        sys.setrecursionlimit(limit)
    messages = [str(w.message) for w in caught]
    assert any("Python calls deeper than 1024 frames were not recorded" in m for m in messages), messages

    trace = exported(prof, tmp_path)
    frames = of(trace, "python_function")
    by_id = {e["args"]["Python id"]: e for e in frames}
    for frame in frames:
        assert frame["dur"] >= 0
        parent = by_id.get(frame["args"].get("Python parent id"))
        if parent is not None:
            assert parent["tid"] == frame["tid"]
            assert parent["ts"] <= frame["ts"], frame["name"]
            assert frame["ts"] + frame["dur"] <= parent["ts"] + parent["dur"] + 0.002, frame["name"]
    depth_of_deep = sum(1 for e in frames if e["name"].endswith(": deep"))
    # The stack was already some frames deep (pytest) when deep() began.
    assert 900 < depth_of_deep < 1024
    names = {e["name"] for e in frames}
    assert any(n.endswith(": generator") for n in names)
    assert any(n.endswith(": transient") for n in names) and any(n.endswith(": replacement") for n in names)
    assert any(n.endswith(": <lambda>") for n in names), "C calling back into Python"
    neg = next(e for e in of(trace, "cpu_op") if e["name"] == "aten::neg")
    assert neg["args"]["Call stack"].split(";")[1] == "<string>(1): transient"


def test_functions_made_and_freed_in_turn_each_keep_their_own_name(tmp_path: Path) -> None:
    import gc

    # Each function's code object is freed before the next is made, so CPython hands the
    # later ones the addresses of earlier ones: the tracer's names, cached by address, must
    # tell them apart.
    with omniprof.profile(with_stack=True) as prof:
        for i in range(40):
            namespace: Dict[str, Any] = {}
            exec(f"def made_{i}(x):\n    return x.neg()\n", namespace)
            namespace[f"made_{i}"](torch.ones(1))
            namespace.clear()
            gc.collect()
    frames = of(exported(prof, tmp_path), "python_function")
    made = sorted(e["name"] for e in frames if ": made_" in e["name"])
    assert made == sorted(f"<string>(1): made_{i}" for i in range(40))


def test_no_frame_is_recorded_without_with_stack(tmp_path: Path) -> None:
    with omniprof.profile() as prof:
        workload()
    trace = exported(prof, tmp_path)
    assert of(trace, "python_function") == []
    assert all("Call stack" not in e.get("args", {}) for e in trace)
    assert sys.getprofile() is None and threading.getprofile() is None


def flow_pairs(trace: List[Dict[str, Any]]) -> List[Any]:
    """(forward op, backward op) of each fwdbwd flow, by the ops the flow's ends sit on."""
    ops = {(e["tid"], e["ts"]): e["name"] for e in of(trace, "cpu_op")}
    ends: Dict[Any, Dict[str, str]] = {}
    for f in of(trace, "fwdbwd"):
        ends.setdefault(f["id"], {})[f["ph"]] = ops.get((f["tid"], f["ts"]), "?")
    return sorted((e.get("s"), e.get("f")) for e in ends.values())


OP_ARGS = ("Sequence number", "Fwd thread id", "Input type", "Input Strides", "Concrete Inputs", "Input Dims")


def traced_with_shapes(work: Any, tmp_path: Path) -> Any:
    """The events of `work` (run once before, to warm up) as torch.profiler and omniprof
    record them with ``record_shapes=True``, in that order."""
    work()
    with torch_profile(activities=[ProfilerActivity.CPU], record_shapes=True) as theirs:
        work()
    with omniprof.profile(record_shapes=True) as ours:
        work()
    theirs.export_chrome_trace(str(tmp_path / "theirs.json"))
    ours.export_chrome_trace(str(tmp_path / "ours.json"))
    return events(tmp_path / "theirs.json"), events(tmp_path / "ours.json")


def test_forward_backward_links_and_op_args_match_torch_profiler(tmp_path: Path) -> None:
    t, o = traced_with_shapes(workload, tmp_path)

    assert flow_pairs(o) == flow_pairs(t)
    assert len(flow_pairs(o)) >= 6  # addmm, relu, add, mul, sum, t... each to its node

    def op_args(trace: List[Dict[str, Any]]) -> List[Any]:
        # Sequence numbers count on from earlier runs: compare their presence, not values.
        rows = []
        for e in of(trace, "cpu_op"):
            args = {k: e["args"][k] for k in OP_ARGS if k in e["args"]}
            if "Sequence number" in args:
                args["Sequence number"] = "set"
            rows.append((e["name"], json.dumps(args, sort_keys=True)))
        return sorted(rows)

    assert op_args(o) == op_args(t)


def every_input_kind() -> None:
    """Ops whose inputs are of every kind torch.profiler describes with record_shapes: tensors
    of many dtypes and layouts, scalars of every type (floats that print in each notation),
    scalar lists short and long, tensor lists short and long, strings, None."""
    x = torch.ones(2, 3)
    floats = (0.1, 1e20, -0.0, 2.5, 1e-5, 1e10, 1e17, 2.0**63, -(2.0**63), 123456.789, 5e-324)
    for value in floats + (float("inf"), float("nan")):
        x.add(value)  # a wrapped-number tensor
        x.clamp(max=value)  # a Scalar, its value written
    x.add(-7).add(3, alpha=2).mul(True)
    x.to(torch.complex64).mul(1 + 2j).add(torch.ones(1), alpha=1 + 2j)
    x.t().contiguous()
    x.view([3, 2]).sum([0, 1])
    torch.ones(40).view([1] * 30 + [40])
    torch.ones(40).view([1] * 31 + [40])
    x.new_full([2, 2], 0.5)
    torch.cat([x, x]).div(2, rounding_mode="floor")
    torch.cat([x] * 30)  # the longest tensor list whose sizes PyTorch writes
    torch.cat([x] * 31)
    torch.cat([x] * 48)  # more words than the observer packs on its stack (observer.cpp)
    x.clamp(None, 0.5)
    for dtype in (torch.float16, torch.bfloat16, torch.int8, torch.bool, torch.float64, torch.int64):
        torch.zeros(2, dtype=dtype).clone()
    torch.ones(3, 3).to_sparse().coalesce()
    torch.ones(3).expand(2, 3).sum()
    # A list of bools: convolution_backward's output_mask (the image's gradient only).
    image = torch.ones(1, 1, 3, 3, requires_grad=True)
    torch.nn.functional.conv2d(image, torch.ones(1, 1, 2, 2)).sum().backward()


def test_every_kind_of_input_is_described_as_torch_profiler_describes_it(tmp_path: Path) -> None:
    theirs, ours = traced_with_shapes(every_input_kind, tmp_path)

    def described(trace: List[Dict[str, Any]]) -> List[Any]:
        keys = ("Input Dims", "Input Strides", "Input type", "Concrete Inputs")
        return [
            (e["name"], json.dumps({k: e["args"].get(k) for k in keys}))
            for e in sorted(of(trace, "cpu_op"), key=lambda e: e["ts"])
        ]

    ours_described = described(ours)
    assert ours_described == described(theirs)
    concrete = " ".join(row for _, row in ours_described)
    for text in ("0.10000000000000001", "1e+20", "100000000000000000.", "9.2233720368547758e+18", "inf"):
        assert f'"{text}"' in concrete, text
    assert '"ScalarList"' in concrete and '"TensorList"' in concrete and '"c10::Half"' in concrete
    assert '"[True, False, False]"' in concrete


def test_a_trace_with_stacks_and_links_loads_in_perfetto_and_hta(tmp_path: Path) -> None:
    from conftest import assert_loads_in_perfetto, hta_load

    with omniprof.profile(with_stack=True, record_shapes=True) as prof:
        workload()
    (tmp_path / "hta").mkdir()
    path = tmp_path / "hta" / "rank0.pt.trace.json"
    prof.export_chrome_trace(str(path))
    report = assert_loads_in_perfetto(path)
    assert report["slices"] > 0
    loaded = hta_load(tmp_path / "hta")
    assert loaded["events"] > 0


class Scripted(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x: "torch.Tensor") -> "torch.Tensor":
        return self.linear(x).relu()


def test_with_modules_writes_torchscript_module_hierarchies_as_torch_profiler_does(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.jit.script is deprecated
        scripted = torch.jit.script(Scripted())
    x = torch.randn(2, 4)
    scripted(x)
    scripted(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.profiler's with_modules is deprecated
        with torch_profile(activities=[ProfilerActivity.CPU], with_modules=True) as theirs:
            scripted(x)
    with omniprof.profile(with_modules=True) as ours:
        scripted(x)
    theirs.export_chrome_trace(str(tmp_path / "theirs.json"))
    ours.export_chrome_trace(str(tmp_path / "ours.json"))

    def hierarchies(path: Path) -> List[Any]:
        return sorted(
            (e["name"], e["args"]["Module Hierarchy"])
            for e in of(events(path), "cpu_op")
            if "Module Hierarchy" in e["args"]
        )

    ours_hierarchies = hierarchies(tmp_path / "ours.json")
    assert ours_hierarchies == hierarchies(tmp_path / "theirs.json")
    assert any(h.endswith("linear(Linear)::forward.") for name, h in ours_hierarchies if name == "aten::addmm")
