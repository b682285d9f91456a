"""Instructions per training step under each profiler and flag set, counted by callgrind:
the instruction count is the same on a loaded machine, where train_step.py's times are not.

    valgrind --tool=callgrind --collect-atstart=no --compress-strings=no --callgrind-out-file=OUT.%p \\
        python crates/omniprof-python/bench/train_step_callgrind.py [--steps 20] [--model mlp]
        [--profilers none floor omniprof torch] [--flags default record_shapes ... all]
    python crates/omniprof-python/bench/train_step_callgrind.py [--steps 20] --report OUT.PID.*

With `--loop add|empty|mm` a step is instead 1,000 iterations of one of overhead.py's
flags loops (`x.add_(1)`, `torch.empty(64)`, `torch.mm(w, w)` of 8×8), so that a step's
count over 1,000 is the count per iteration.

Every configuration runs in one process, each once uncounted and then counted in the same
order: its profiler is entered, 3 warm-up steps run, then callgrind counts `--steps` steps
(collection switched on and off around them by a client request, from a small C library
this script builds with `cc`) and dumps them as one part named after the configuration.
`--report` reads the parts and prints, per configuration, instructions per step, what it adds
over no profiler and omniprof's added count over torch.profiler's. Open a part with
callgrind_annotate to see where the count goes (each part names its functions itself only with
`--compress-strings=no`).

Run under `--cache-sim=yes`, the report adds the simulated caches' misses per step (first
level, instructions and data; last level) and callgrind's cycle estimate (instructions + 10 per
first-level miss + 100 per last-level miss), with the estimate's ratio, and per omniprof
configuration what it adds above the floor with a state. In a model's step most of what a
profiler adds per op is refetching its code and data after the model's own work evicted
them, which the instruction count does not see; with `--LL=2097152,16,64` (a 2 MiB, 16-way
level, as the Intel guest's L2 of docs/benchmarks.md) the last level's misses are those that
reach the shared cache. Unlike wall time on a shared machine, these counts hardly move from
one run to the next.
"""

import argparse
import contextlib
import ctypes
import gc
import os
import subprocess
import sys
import tempfile
import warnings
from typing import Any, Callable, ContextManager, Dict, List, NamedTuple

# The client requests (valgrind/callgrind.h): outside valgrind they do nothing.
CLIENT = """
#include <valgrind/callgrind.h>
void counted_begin(void) { CALLGRIND_ZERO_STATS; CALLGRIND_TOGGLE_COLLECT; }
void counted_end(const char* name) { CALLGRIND_TOGGLE_COLLECT; CALLGRIND_DUMP_STATS_AT(name); }
"""


def client() -> ctypes.CDLL:
    """Builds and loads the client-request library (needs cc and valgrind's headers)."""
    directory = tempfile.mkdtemp(prefix="omniprof-callgrind-")
    source, library = os.path.join(directory, "client.c"), os.path.join(directory, "client.so")
    with open(source, "w") as f:
        f.write(CLIENT)
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", library, source], check=True)
    return ctypes.CDLL(library)


# callgrind's events, as its cache simulation names them: misses of the first-level
# instruction and data caches (reads, writes) and of the last level.
FIRST_LEVEL = ("I1mr", "D1mr", "D1mw")
LAST_LEVEL = ("ILmr", "DLmr", "DLmw")
# The floor of default flags: do-nothing callbacks with a profiler state (see main).
FLOOR_STATE = "floor with state"


def part_counts(path: str) -> "tuple[str, Dict[str, int]]":
    """A dump's configuration name and its totals by event (`Ir`, and the cache simulation's
    where it ran)."""
    name, events, totals = "?", ["Ir"], {}
    with open(path) as f:
        for line in f:
            if line.startswith("desc: Trigger: Client Request:"):
                name = line.split(":", 3)[3].strip()
            elif line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith(("summary:", "totals:")):
                totals = dict(zip(events, map(int, line.split()[1:])))
                break
    return name, totals


class Counts(NamedTuple):
    """One configuration's counts per step: instructions, and with the cache simulation the
    first- and last-level misses and callgrind's cycle estimate (0 without it)."""

    instructions: float
    first: float
    last: float
    estimate: float

    @staticmethod
    def of(totals: Dict[str, int], steps: int) -> "Counts":
        per_step = {event: count / steps for event, count in totals.items()}
        instructions = per_step.get("Ir", 0.0)
        first = sum(per_step.get(event, 0.0) for event in FIRST_LEVEL)
        last = sum(per_step.get(event, 0.0) for event in LAST_LEVEL)
        return Counts(instructions, first, last, instructions + 10 * first + 100 * last)

    def __sub__(self, other: "Counts") -> "Counts":
        return Counts(*(mine - theirs for mine, theirs in zip(self, other)))


def cache_simulated(totals: Dict[str, int]) -> bool:
    return all(event in totals for event in FIRST_LEVEL + LAST_LEVEL)


def report(paths: List[str], steps: int) -> None:
    parts = {name: totals for name, totals in map(part_counts, paths) if name != "?"}
    counts = {name: Counts.of(totals, steps) for name, totals in parts.items()}
    cached = bool(parts) and all(map(cache_simulated, parts.values()))
    none = counts.get("none")
    columns = ["per step", "added", "omniprof/torch"]
    if cached:
        columns += ["L1 misses", "LL misses", "cycle est.", "added", "omniprof/torch"]
    print(f"{'configuration':<34}" + "".join(f"{c:>15}" for c in columns))

    def ratio(name: str, measure: str) -> str:
        """omniprof's added `measure` over torch.profiler's with the same flags."""
        torch_counts = counts.get("torch.profiler, " + name.split(", ", 1)[-1])
        if none is None or not name.startswith("omniprof, ") or torch_counts is None:
            return ""
        torch_added = getattr(torch_counts - none, measure)
        return f"{getattr(counts[name] - none, measure) / torch_added:.3f}" if torch_added > 0 else ""

    for name, c in counts.items():
        added = None if none is None else c - none
        row = [f"{c.instructions:,.0f}", "" if added is None else f"{added.instructions:+,.0f}"]
        row.append(ratio(name, "instructions"))
        if cached:
            row += [f"{c.first:,.0f}", f"{c.last:,.0f}", f"{c.estimate:,.0f}"]
            row += ["" if added is None else f"{added.estimate:+,.0f}", ratio(name, "estimate")]
        print(f"{name:<34}" + "".join(f"{cell:>15}" for cell in row))
    floor = counts.get(FLOOR_STATE)
    if cached and floor is not None:
        print(f"above the {FLOOR_STATE}, per step:")
        for name, c in counts.items():
            if name.startswith("omniprof, "):
                above = c - floor
                print(
                    f"  {name}: {above.instructions:+,.0f} instructions, {above.first:+,.0f} L1 "
                    f"misses, {above.last:+,.0f} LL misses, {above.estimate:+,.0f} estimated cycles"
                )


def add_loop(torch: Any) -> Callable[[], None]:
    x = torch.zeros(1)

    def body() -> None:
        for _ in range(LOOP_ITERATIONS):
            x.add_(1)

    return body


def empty_loop(torch: Any) -> Callable[[], None]:
    def body() -> None:
        for _ in range(LOOP_ITERATIONS):
            torch.empty(64)

    return body


def mm_loop(torch: Any) -> Callable[[], None]:
    w = torch.randn(8, 8)

    def body() -> None:
        for _ in range(LOOP_ITERATIONS):
            torch.mm(w, w)

    return body


# overhead.py's flags loops, each made from the torch module: iterations per step.
LOOP_ITERATIONS = 1000
LOOPS: Dict[str, Callable[[Any], Callable[[], None]]] = {"add": add_loop, "empty": empty_loop, "mm": mm_loop}


def main() -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch
    from torch.profiler import ProfilerActivity, profile as torch_profile

    import omniprof
    from overhead import FloorCallbacks
    from train_step import FLAG_SETS, MODELS, floor_asks, floor_of

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="counted steps per configuration")
    parser.add_argument("--model", choices=list(MODELS), default="mlp")
    parser.add_argument(
        "--loop", choices=list(LOOPS), help="count 1,000 iterations of this op loop per step instead"
    )
    parser.add_argument(
        "--profilers", nargs="+", default=["none", "floor", "omniprof", "torch"],
        choices=["none", "floor", "omniprof", "torch"],
    )
    parser.add_argument("--flags", nargs="+", choices=list(FLAG_SETS), default=list(FLAG_SETS))
    parser.add_argument("--report", nargs="+", metavar="PART", help="print the parts' counts (give the run's --steps)")
    args = parser.parse_args()
    if args.report:
        report(args.report, args.steps)
        return

    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = MODELS[args.model]()
    module, x, y, loss, optimizer = model.module, model.x, model.y, model.loss, model.optimizer

    def step() -> None:
        optimizer.zero_grad()
        loss(module(x), y).backward()
        optimizer.step()

    if args.loop:
        step = LOOPS[args.loop](torch)

    counted = client()

    def run(name: str, profiler: Callable[[], ContextManager], count: bool = True) -> None:
        # What earlier configurations left to the cycle collector is collected now, not in a
        # counted step: a full collection there once added half a step's count to a floor.
        gc.collect()
        with profiler():
            for _ in range(3):
                step()
            if not count:
                return
            counted.counted_begin()
            for _ in range(args.steps):
                step()
            counted.counted_end(name.encode())

    for _ in range(3):
        step()
    configs: Dict[str, Callable[[], ContextManager]] = {}
    if "none" in args.profilers:
        configs["none"] = contextlib.nullcontext
    if "floor" in args.profilers:
        configs["floor"] = lambda: FloorCallbacks(clock=False)
        # As torch.profiler keeps its state in the thread's debug info, and omniprof a
        # reporter there for _RecordFunctionFast: the floor of default flags.
        configs[FLOOR_STATE] = lambda: FloorCallbacks(clock=False, state=True)
        # Each flag set's own floor: asking PyTorch for what the flags ask of any profiler.
        for flag_set in args.flags:
            if any(floor_asks(flag_set).values()):
                configs.setdefault(
                    floor_of(flag_set),
                    lambda flag_set=flag_set: FloorCallbacks(clock=False, **floor_asks(flag_set)),
                )
    for flag_set in args.flags:
        flags = FLAG_SETS[flag_set]
        if "omniprof" in args.profilers:
            configs[f"omniprof, {flag_set}"] = lambda flags=flags: omniprof.profile(
                activities=[omniprof.ProfilerActivity.CPU], **flags
            )
        if "torch" in args.profilers:
            configs[f"torch.profiler, {flag_set}"] = lambda flags=flags: torch_profile(
                activities=[ProfilerActivity.CPU], **flags
            )
    # Each configuration once uncounted first, so that every counted one finds the process as
    # the others leave it: the profilers' threads started (from then on glibc's malloc takes
    # its arena's lock) and glibc's mmap threshold raised by the large blocks they freed. Counted
    # in a process still fresh, no profiler and the floors paid up to 36k instructions a CNN step
    # less in malloc and free than the profilers counted after them.
    for name, profiler in configs.items():
        run(name, profiler, count=False)
    for name, profiler in configs.items():
        run(name, profiler)


if __name__ == "__main__":
    main()
