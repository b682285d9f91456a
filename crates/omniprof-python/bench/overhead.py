"""What profiling a tiny-op PyTorch loop costs, alternated in one process on one tensor
(in a shuffled order each round), medians of several runs:

- no profiler;
- do-nothing callbacks: a `RecordFunction` callback pair that does nothing, registered like
  omniprof's observer (built here with torch.utils.cpp_extension): what PyTorch's callback
  machinery costs any observer, the floor no profiler goes under;
- clock-reading callbacks: the same pair reading the clock at each start and end, as
  torch.profiler does and any profiler that times ops must: the floor of a timing observer;
- torch.profiler.profile and omniprof.profile, each recording host ops only;

then one user range per iteration under each profiler's own record_function; then an
allocation-heavy loop (each iteration allocates and frees a tensor) under each profiler with
``profile_memory=True``; then a small MLP's training steps under each; then the tiny-op loop
with each profiler's CPU collection switched off around it (``toggle_collection_dynamic``).

    python crates/omniprof-python/bench/overhead.py [--ops 100000] [--runs 15]

Prints ns per iteration for each configuration, what each adds over none, and the ratio of
omniprof's added cost to torch.profiler's (the target is at most 1/3): in wall time, and in
the loop thread's CPU time, which another process competing for the CPUs disturbs less (it
leaves out what runs on other threads: the recorder's chunk refill). Also the loop thread's
page faults per run: torch.profiler keeps its events in memory it allocates as it goes, and
whether the allocator hands it fresh pages (faulted in at first touch) or memory freed by an
earlier run moves its cost by about 15 % from run to run, in one process; omniprof's
recorder writes into chunks faulted in beforehand, on another thread.

torch.profiler's cost per op grows with the length of the run (it keeps every event in
memory as it goes), so runs shorter than the issue's 100,000 ops flatter it.
"""

import argparse
import gc
import os
import random
import resource
import statistics
import sys
import time
import warnings
from functools import partial
from typing import Any, Callable, ContextManager, Dict, List, NamedTuple

import torch
from torch.profiler import ProfilerActivity, profile as torch_profile
from torch.profiler import record_function as torch_record_function
from torch.utils import cpp_extension

import omniprof


class Cost(NamedTuple):
    """One run (or the medians of several), per iteration: wall ns, this thread's CPU ns; and
    the run's page faults."""

    wall: float
    cpu: float
    faults: float


# The floors: callbacks that do nothing, or only read the clock (as torch.profiler does) at
# each start and end, for the scopes omniprof's observer registers.
FLOOR_CALLBACKS = r"""
#include <ATen/record_function.h>
#include <c10/core/Allocator.h>
#include <c10/util/ApproximateClock.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <atomic>
#include <memory>
#include <optional>

namespace {
std::optional<at::CallbackHandle> handle;
std::atomic<uint64_t> last_tick{0};

// An allocator reporter that keeps nothing. Asking for every report (`memory`), it is what the
// allocator's own bookkeeping costs any memory profiler (it tracks sizes only while one
// listens); asking for none, what a profiler's state in the thread's debug info costs PyTorch
// (torch.profiler keeps one there, and omniprof one for `_RecordFunctionFast`).
struct NothingReporter final : c10::MemoryReportingInfoBase {
  explicit NothingReporter(bool memory) : memory(memory) {}
  void reportMemoryUsage(void*, int64_t, size_t, size_t, c10::Device) override {}
  bool memoryProfilingEnabled() const override { return memory; }
  const bool memory;
};
bool reporting = false;

std::unique_ptr<at::ObserverContext> do_nothing(const at::RecordFunction&) { return nullptr; }
void end_nothing(const at::RecordFunction&, at::ObserverContext*) {}

std::unique_ptr<at::ObserverContext> read_clock(const at::RecordFunction&) {
  last_tick.store(c10::getApproximateTime(), std::memory_order_relaxed);
  return nullptr;
}
void end_read_clock(const at::RecordFunction&, at::ObserverContext*) {
  last_tick.store(c10::getApproximateTime(), std::memory_order_relaxed);
}
}  // namespace

// A Python profile hook that keeps nothing: what CPython's calls of any `with_stack` tracer
// cost (torch.profiler's and omniprof's are both such hooks).
int ignore_frame(PyObject*, PyFrameObject*, int, PyObject*) { return 0; }
bool hooked = false;

void attach(bool clock, bool reporter, bool memory, bool inputs, bool frames) {
  if (reporter && !reporting) {
    c10::ThreadLocalDebugInfo::_push(c10::DebugInfoKind::PROFILER_STATE,
                                     std::make_shared<NothingReporter>(memory));
    reporting = true;
  }
  if (!handle) {
    auto callback = clock ? at::RecordFunctionCallback(read_clock, end_read_clock)
                          : at::RecordFunctionCallback(do_nothing, end_nothing);
    // With `inputs`, PyTorch boxes every op's inputs for the callback, as it does for any
    // profiler that records shapes.
    handle = at::addGlobalCallback(callback.needsInputs(inputs).scopes(
        {at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
         at::RecordScope::TORCHSCRIPT_FUNCTION, at::RecordScope::USER_SCOPE}));
  }
  if (frames && !hooked) {
    PyEval_SetProfile(ignore_frame, nullptr);
    hooked = true;
  }
}

void detach() {
  if (hooked) {
    PyEval_SetProfile(nullptr, nullptr);
    hooked = false;
  }
  if (reporting) {
    c10::ThreadLocalDebugInfo::_pop(c10::DebugInfoKind::PROFILER_STATE);
    reporting = false;
  }
  if (handle) {
    at::removeCallback(*handle);
    handle.reset();
  }
}
"""


def floor_asks(flags: Dict[str, Any]) -> Dict[str, bool]:
    """What profiler `flags` ask of PyTorch and CPython for any profiler, as FloorCallbacks'
    arguments: each op's inputs (record_shapes, with_flops), allocator reports
    (profile_memory) and a Python profile hook (with_stack)."""
    return {
        "inputs": bool(flags.get("record_shapes") or flags.get("with_flops")),
        "memory": bool(flags.get("profile_memory")),
        "frames": bool(flags.get("with_stack")),
    }


class FloorCallbacks:
    """Registers the floor's callbacks while open (a context manager, like a profiler):
    reading the clock at each start and end when `clock`, else doing nothing; with `memory`,
    also an allocator reporter on this thread that takes every report and keeps none; with
    `state`, one that takes none (what a profiler's state in the thread's debug info costs,
    as torch.profiler and omniprof keep one); with `inputs`, asking PyTorch for every op's
    inputs (what `record_shapes` costs any profiler); with `frames`, a Python profile hook on
    this thread that keeps nothing (what `with_stack` costs any profiler)."""

    module = None

    def __init__(
        self,
        clock: bool,
        memory: bool = False,
        state: bool = False,
        inputs: bool = False,
        frames: bool = False,
    ) -> None:
        self.clock = clock
        self.memory = memory
        self.state = state
        self.inputs = inputs
        self.frames = frames

    def __enter__(self) -> "FloorCallbacks":
        if FloorCallbacks.module is None:
            # torch runs ninja from PATH: one pip installed into this environment is beside
            # its interpreter, which is not on PATH unless the environment is activated.
            path = os.environ.get("PATH", "")
            os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + path
            FloorCallbacks.module = cpp_extension.load_inline(
                name="omniprof_bench_floor_callbacks",
                cpp_sources=[FLOOR_CALLBACKS],
                functions=["attach", "detach"],
                extra_cflags=["-O2", "-DNDEBUG"],
            )
        FloorCallbacks.module.attach(
            self.clock, self.memory or self.state, self.memory, self.inputs, self.frames
        )
        return self

    def __exit__(self, *exc: object) -> None:
        FloorCallbacks.module.detach()


def page_faults() -> int:
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt


def timed(n: int, body: Callable[[], None]) -> Cost:
    # What earlier runs left to the cycle collector (torch.profiler's results are a cycle) is
    # collected now, not inside a later run of any configuration.
    gc.collect()
    faults, wall, cpu = page_faults(), time.perf_counter_ns(), time.thread_time_ns()
    body()
    return Cost(
        (time.perf_counter_ns() - wall) / n,
        (time.thread_time_ns() - cpu) / n,
        page_faults() - faults,
    )


def add_loop(n: int, x: torch.Tensor) -> Callable[[], Cost]:
    def body() -> None:
        for _ in range(n):
            x.add_(1)

    return lambda: timed(n, body)


def range_loop(n: int, record_function: Callable[[str], ContextManager]) -> Callable[[], Cost]:
    def body() -> None:
        for _ in range(n):
            with record_function("range"):
                pass

    return lambda: timed(n, body)


def alloc_loop(n: int) -> Callable[[], Cost]:
    """`torch.empty(64)`, dropped at once: an op, an allocation and a free per iteration."""

    def body() -> None:
        for _ in range(n):
            torch.empty(64)

    return lambda: timed(n, body)


def mm_loop(n: int, w: torch.Tensor) -> Callable[[], Cost]:
    """`torch.mm(w, w)`: one op with two tensor inputs per iteration."""

    def body() -> None:
        for _ in range(n):
            torch.mm(w, w)

    return lambda: timed(n, body)


def mlp_loop(steps: int) -> Callable[[], Cost]:
    """Training steps of a small MLP (three linear layers; forward, cross-entropy, backward,
    SGD step: 161 ops a step), which time per step."""
    torch.manual_seed(0)
    layers = [torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(32, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))

    def body() -> None:
        for _ in range(steps):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()

    return lambda: timed(steps, body)


def python_loop(n: int) -> Callable[[], Cost]:
    """Python-heavy code: three nested Python functions around a tiny op, per iteration (three
    Python calls, one built-in method call, one op)."""
    x = torch.zeros(1)

    def leaf(t: torch.Tensor) -> torch.Tensor:
        return t.add_(1)

    def middle(t: torch.Tensor) -> torch.Tensor:
        return leaf(t)

    def outer(t: torch.Tensor) -> torch.Tensor:
        return middle(t)

    def body() -> None:
        for _ in range(n):
            outer(x)

    return lambda: timed(n, body)


def under(
    make_profiler: Callable[[], ContextManager], loop: Callable[[], Cost]
) -> Callable[[], Cost]:
    def run() -> Cost:
        with make_profiler():
            return loop()

    return run


def measure(configs: Dict[str, Callable[[], Cost]], runs: int) -> Dict[str, Cost]:
    """Medians of `runs` rounds, each running every configuration once, in a shuffled order
    (so that none always runs after the same other)."""
    samples: Dict[str, List[Cost]] = {name: [] for name in configs}
    for name, run in configs.items():  # warm-up: builds, first-use allocations
        run()
    order = list(configs)
    shuffle = random.Random(0).shuffle
    for _ in range(runs):
        shuffle(order)
        for name in order:
            samples[name].append(configs[name]())
    return {
        name: Cost(*(statistics.median(field) for field in zip(*s)))
        for name, s in samples.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=100_000, help="iterations per run (>= 100,000)")
    parser.add_argument("--runs", type=int, default=15, help="runs per configuration")
    parser.add_argument(
        "--only",
        choices=["stacks", "flags", "toggled"],
        help="run one section only (stacks: with_stack=True; flags: record_shapes and all flags;"
        " toggled: CPU collection switched off)",
    )
    args = parser.parse_args()
    if args.only == "stacks":
        stacks_section(args)
        return
    if args.only == "toggled":
        toggled_section(args)
        return
    if args.only == "flags":
        flags_section(args)
        return
    torch_cpu = lambda: torch_profile(activities=[ProfilerActivity.CPU])  # noqa: E731
    ours = lambda: omniprof.profile(activities=[omniprof.ProfilerActivity.CPU])  # noqa: E731
    do_nothing = lambda: FloorCallbacks(clock=False)  # noqa: E731
    read_clock = lambda: FloorCallbacks(clock=True)  # noqa: E731

    # One tensor for every configuration: with a tensor each, where each one landed in memory
    # moved the ratio by about 0.03 (runs of this script, 100,000 iterations).
    x = torch.zeros(1)
    ops = measure(
        {
            "no profiler": add_loop(args.ops, x),
            "do-nothing callbacks": under(do_nothing, add_loop(args.ops, x)),
            "clock-reading callbacks": under(read_clock, add_loop(args.ops, x)),
            "torch.profiler": under(torch_cpu, add_loop(args.ops, x)),
            "omniprof": under(ours, add_loop(args.ops, x)),
        },
        args.runs,
    )
    print(f"x.add_(1) on a 1-element tensor, {args.ops} per run, median of {args.runs} runs")
    for clock, title in (("wall", "wall time"), ("cpu", "loop thread's CPU time")):
        base = getattr(ops["no profiler"], clock)
        torch_added = getattr(ops["torch.profiler"], clock) - base
        print(f" {title:<25} ns/iter     added  / torch.profiler's  page faults")
        for name, cost in ops.items():
            added = getattr(cost, clock) - base
            share = f"{added / torch_added:.2f}" if name != "torch.profiler" and added else ""
            print(
                f"  {name:<23} {getattr(cost, clock):8.0f} {added:+9.0f}"
                f"  {share:>17}  {cost.faults:11.0f}"
            )
        floor = getattr(ops["clock-reading callbacks"], clock) - base
        ours_added = getattr(ops["omniprof"], clock) - base
        print(
            f"  omniprof's added cost / torch.profiler's: {ours_added / torch_added:.2f}"
            " (target <= 0.33);"
            f" above the clock-reading floor: {(ours_added - floor) / torch_added:.2f}"
        )

    ranges = measure(
        {
            "torch.profiler.record_function": under(
                torch_cpu, range_loop(args.ops, torch_record_function)
            ),
            "omniprof.record_function": under(ours, range_loop(args.ops, omniprof.record_function)),
        },
        args.runs,
    )
    print("one empty range per iteration, each under its own profiler")
    for name, cost in ranges.items():
        print(f"  {name:<32} {cost.wall:8.0f} ns/range (CPU {cost.cpu:.0f})")

    torch_memory = lambda: torch_profile(activities=[ProfilerActivity.CPU], profile_memory=True)  # noqa: E731
    ours_memory = lambda: omniprof.profile(  # noqa: E731
        activities=[omniprof.ProfilerActivity.CPU], profile_memory=True
    )
    allocs = measure(
        {
            "no profiler": alloc_loop(args.ops),
            "do-nothing callbacks and reporter": under(
                lambda: FloorCallbacks(clock=False, memory=True), alloc_loop(args.ops)
            ),
            "torch.profiler": under(torch_memory, alloc_loop(args.ops)),
            "omniprof": under(ours_memory, alloc_loop(args.ops)),
        },
        args.runs,
    )
    print(f"torch.empty(64) allocated and freed, {args.ops} per run, profile_memory=True (wall time)")
    print_shares(allocs, width=34, target="0.33")

    steps = max(args.ops // 500, 100)
    mlp = measure(
        {
            "no profiler": mlp_loop(steps),
            "do-nothing callbacks": under(do_nothing, mlp_loop(steps)),
            "torch.profiler": under(torch_cpu, mlp_loop(steps)),
            "omniprof": under(ours, mlp_loop(steps)),
        },
        args.runs,
    )
    print(f"a small MLP's training step, {steps} per run (wall time)")
    base = mlp["no profiler"].wall
    torch_added = mlp["torch.profiler"].wall - base
    for name, cost in mlp.items():
        added = cost.wall - base
        share = ""
        if added and name != "torch.profiler":
            share = f" ({added / torch_added:.2f} of torch.profiler's)"
        print(f"  {name:<20} {cost.wall / 1e3:8.1f} us/step added {added / 1e3:+7.1f}{share}")
    toggled_section(args)
    stacks_section(args)
    flags_section(args)


def toggled_off(module: Any, loop: Callable[[], Cost]) -> Callable[[], Cost]:
    """`loop` inside a profile of `module` (torch.profiler or omniprof) whose CPU collection
    is switched off around it."""

    def run() -> Cost:
        cpu = [module.ProfilerActivity.CPU]
        with module.profile(activities=cpu) as prof:
            prof.toggle_collection_dynamic(False, cpu)
            cost = loop()
            prof.toggle_collection_dynamic(True, cpu)
        return cost

    return run


def toggled_section(args: argparse.Namespace) -> None:
    """The tiny-op loop while each profiler's CPU collection is switched off: PyTorch removes
    its callbacks then, and omniprof its observer's, so both should cost next to nothing."""
    x = torch.zeros(1)
    costs = measure(
        {
            "no profiler": add_loop(args.ops, x),
            "torch.profiler": toggled_off(torch.profiler, add_loop(args.ops, x)),
            "omniprof": toggled_off(omniprof, add_loop(args.ops, x)),
        },
        args.runs,
    )
    print(f"x.add_(1), {args.ops} per run, CPU collection toggled off around the loop (wall time)")
    base = costs["no profiler"].wall
    for name, cost in costs.items():
        print(f"  {name:<20} {cost.wall:8.0f} ns/iter added {cost.wall - base:+7.0f}")


# All of torch.profiler's flags, as a user who wants everything turns them on.
ALL_FLAGS = dict(
    record_shapes=True, profile_memory=True, with_flops=True, with_stack=True, with_modules=True
)


def flags_section(args: argparse.Namespace) -> None:
    """Three tiny-op loops (an op with a scalar input, an allocation, a matmul) under each
    profiler with ``record_shapes=True`` (target: omniprof adds at most 1/3 of what
    torch.profiler adds), then with every flag on (target 1/2); beside them, each set's
    floor: do-nothing callbacks that ask PyTorch for the inputs and, for all flags, an
    allocator reporter and a Python profile hook that keep nothing. The all-flags runs are 1/20
    as long: torch.profiler with every flag keeps about 33 KB per `x.add_(1)` iteration
    after its session ends (PyTorch 2.15), and 100,000 iterations a run exhausted the
    machine's 24 GB within a few rounds."""
    x, w = torch.zeros(1), torch.randn(8, 8)
    loops: Dict[str, Callable[[int], Callable[[], Cost]]] = {
        "x.add_(1)": lambda n: add_loop(n, x),
        "torch.empty(64)": alloc_loop,
        "torch.mm(w, w), 8x8": lambda n: mm_loop(n, w),
    }
    flag_sets = (
        ("record_shapes=True", {"record_shapes": True}, "0.33", args.ops),
        ("all flags", ALL_FLAGS, "0.5", max(args.ops // 20, 1000)),
    )
    for title, flags, target, ops in flag_sets:
        # The set's floor: callbacks that keep nothing, asking for what the flags ask.
        floor = partial(FloorCallbacks, clock=False, state=True, **floor_asks(flags))
        for name, loop in loops.items():
            with warnings.catch_warnings():
                # torch.profiler's with_modules warns that it is deprecated, once per session.
                warnings.simplefilter("ignore", FutureWarning)
                costs = measure(
                    {
                        "no profiler": loop(ops),
                        "do-nothing floor": under(floor, loop(ops)),
                        "torch.profiler": under(
                            lambda: torch_profile(activities=[ProfilerActivity.CPU], **flags),
                            loop(ops),
                        ),
                        "omniprof": under(
                            lambda: omniprof.profile(
                                activities=[omniprof.ProfilerActivity.CPU], **flags
                            ),
                            loop(ops),
                        ),
                    },
                    args.runs,
                )
            print(f"{name}, {title}, {ops} per run (wall time)")
            print_shares(costs, width=20, target=target)


def stacks_section(args: argparse.Namespace) -> None:
    """Python-heavy code under each profiler with ``with_stack=True``."""
    torch_stack = lambda: torch_profile(activities=[ProfilerActivity.CPU], with_stack=True)  # noqa: E731
    ours_stack = lambda: omniprof.profile(  # noqa: E731
        activities=[omniprof.ProfilerActivity.CPU], with_stack=True
    )
    n = args.ops // 2
    stacks = measure(
        {
            "no profiler": python_loop(n),
            "torch.profiler": under(torch_stack, python_loop(n)),
            "omniprof": under(ours_stack, python_loop(n)),
        },
        args.runs,
    )
    print(f"three Python calls around x.add_(1), {n} per run, with_stack=True (wall time)")
    print_shares(stacks, width=20, target="0.5")


def print_shares(costs: Dict[str, Cost], width: int, target: str) -> None:
    """Each configuration's wall time per iteration, what it adds over "no profiler" and
    that as a share of what torch.profiler adds; then omniprof's share against `target`."""
    base = costs["no profiler"].wall
    torch_added = costs["torch.profiler"].wall - base
    for name, cost in costs.items():
        added = cost.wall - base
        share = f" ({added / torch_added:.2f})" if added and name != "torch.profiler" else ""
        print(f"  {name:<{width}} {cost.wall:8.0f} ns/iter added {added:+7.0f}{share}")
    print(
        "  omniprof's added cost / torch.profiler's: "
        f"{(costs['omniprof'].wall - base) / torch_added:.2f} (target <= {target})"
    )


if __name__ == "__main__":
    main()
