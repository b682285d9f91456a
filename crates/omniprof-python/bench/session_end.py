"""What a profiling session costs after its loop: its stop (omniprof builds its trace,
torch.profiler post-processes Kineto's events into its event list) and the release of that
trace when the profiler object goes, per iteration of the loop, beside what the loop itself
adds. overhead.py and train_step.py time the loop only; a user pays all three, once per
session (and once per recording cycle under a schedule).

Loops: ``x.add_(1)`` on a one-element tensor (5 ops an iteration) and ``torch.mm(w, w)`` on
8x8 (4 ops), each with default flags and with ``record_shapes=True`` (``--flags``: also
each other flag alone, and all five), under
``omniprof.profile`` and ``torch.profiler.profile(activities=[CPU])``, alternated, each
session against runs without a profiler just before and after it.

    python crates/omniprof-python/bench/session_end.py [--ops 20000] [--runs 5]
        [--flags default record_shapes ... all]

Prints, per loop and flags, the medians of the rounds in ns per iteration: the loop's added
cost, the stop, the release and their sum, under each profiler, and omniprof's sum over
torch.profiler's (the ratio).
"""

import argparse
import gc
import statistics
import sys
import time
from typing import Any, Callable, Dict, List

import torch
from torch.profiler import ProfilerActivity, profile as torch_profile

import omniprof

PROFILERS: Dict[str, Callable[..., Any]] = {
    "omniprof": lambda **flags: omniprof.profile(
        activities=[omniprof.ProfilerActivity.CPU], **flags
    ),
    "torch": lambda **flags: torch_profile(activities=[ProfilerActivity.CPU], **flags),
}
FLAGS = ["record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules"]
# Flag sets by name: default flags, each flag alone, all five.
FLAG_SETS: Dict[str, Dict[str, Any]] = {
    "default": {},
    **{flag: {flag: True} for flag in FLAGS},
    "all": {flag: True for flag in FLAGS},
}
PARTS = ("loop", "stop", "release")


def loops() -> Dict[str, Callable[[], None]]:
    x = torch.ones(1)
    w = torch.ones(8, 8)
    return {"add_": lambda: x.add_(1), "mm": lambda: torch.mm(w, w)}


def timed_loop(body: Callable[[], None], ops: int) -> int:
    start = time.perf_counter_ns()
    for _ in range(ops):
        body()
    return time.perf_counter_ns() - start


def session(make: Callable[[], Any], body: Callable[[], None], ops: int) -> Dict[str, float]:
    """One session's costs in ns per iteration: the loop's above runs without a profiler
    just before and after it, then its stop and the release of its trace."""
    before = timed_loop(body, ops)
    profiler = make()
    profiler.__enter__()
    inside = timed_loop(body, ops)
    start = time.perf_counter_ns()
    profiler.__exit__(None, None, None)
    stopped = time.perf_counter_ns()
    del profiler
    # What the release leaves to Python's collector (torch.profiler's events hold cycles)
    # is collected here, inside the timing, not in a later session's loop.
    gc.collect()
    released = time.perf_counter_ns()
    # What survived (torch keeps some of a session's objects) out of later collections'
    # sight too, so that no session pays for scanning an earlier one's.
    gc.freeze()
    after = timed_loop(body, ops)
    return {
        "loop": (inside - (before + after) / 2) / ops,
        "stop": (stopped - start) / ops,
        "release": (released - stopped) / ops,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=20000, help="iterations per session")
    parser.add_argument("--runs", type=int, default=5, help="rounds (sessions per profiler)")
    parser.add_argument(
        "--flags", nargs="+", choices=list(FLAG_SETS), default=["default", "record_shapes"],
        help="flag sets to run",
    )
    args = parser.parse_args()
    bodies = loops()
    for body in bodies.values():
        timed_loop(body, args.ops)  # PyTorch's own first calls
    # The objects of the process so far (torch's own, hundreds of thousands) out of the
    # collector's sight, so that a collection scans only what the sessions made; what an
    # empty one still costs is taken off each release.
    gc.collect()
    gc.freeze()
    start = time.perf_counter_ns()
    gc.collect()
    collect_ns = time.perf_counter_ns() - start
    print(f"gc.collect() with nothing to free: {collect_ns / 1e3:.0f} us (taken off each release)")
    print(f"{'loop':6} {'flags':14} {'profiler':9} " + " ".join(f"{p:>8}" for p in PARTS)
          + f" {'sum':>8}  ns per iteration, medians of {args.runs}")
    for loop_name, body in bodies.items():
        for flags_name in args.flags:
            flags = FLAG_SETS[flags_name]
            rounds: Dict[str, List[Dict[str, float]]] = {name: [] for name in PROFILERS}
            # A first round left out: each profiler's first session in a process does
            # one-time work (first_session.py measures that).
            for round in range(args.runs + 1):
                for name, make in PROFILERS.items():
                    costs = session(lambda: make(**flags), body, args.ops)
                    costs["release"] -= collect_ns / args.ops
                    if round > 0:
                        rounds[name].append(costs)
            sums: Dict[str, float] = {}
            for name, costs in rounds.items():
                medians = {p: statistics.median(c[p] for c in costs) for p in PARTS}
                sums[name] = statistics.median(sum(c.values()) for c in costs)
                print(f"{loop_name:6} {flags_name:14} {name:9} "
                      + " ".join(f"{medians[p]:8.0f}" for p in PARTS) + f" {sums[name]:8.0f}")
            print(f"{loop_name:6} {flags_name:14} omniprof's sum over torch.profiler's: "
                  f"{sums['omniprof'] / sums['torch']:.2f}")
    # Collectable again, so that the interpreter's exit frees what the sessions left.
    gc.unfreeze()
    return 0


if __name__ == "__main__":
    sys.exit(main())
