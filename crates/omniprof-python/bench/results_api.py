"""What reading a profile's results costs, omniprof against torch.profiler in one process:
`events()`, a pass over every event's `cpu_time_total`, `key_averages()`, the events' table
and their `key_averages()`, after one session of `--iterations` iterations of `x.add_(1)`
(five ops each), medians of `--runs` alternated rounds.

    taskset -c 1 python crates/omniprof-python/bench/results_api.py [--iterations 50000] [--runs 3]

The loop is the same under both; only the calls after the session are timed. omniprof makes
its events from the trace when asked (the first `events()` call), torch.profiler when its
session stops and on the first `events()`.
"""

import argparse
import gc
import statistics
import time
import warnings
from typing import Any, Callable, Dict, List

import torch
from torch.profiler import ProfilerActivity, profile as torch_profile

import omniprof

STEPS = ("events()", "sum over events", "key_averages()", "events().table()", "events().key_averages()")


def timed_calls(prof: Any) -> List[float]:
    """Seconds each step of STEPS took on `prof`'s results."""
    marks = [time.perf_counter()]
    events = prof.events()
    marks.append(time.perf_counter())
    sum(e.cpu_time_total for e in events)
    marks.append(time.perf_counter())
    prof.key_averages()
    marks.append(time.perf_counter())
    events.table(row_limit=10)
    marks.append(time.perf_counter())
    events.key_averages()
    marks.append(time.perf_counter())
    return [b - a for a, b in zip(marks, marks[1:])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    x = torch.ones(4)

    def work() -> None:
        for _ in range(args.iterations):
            x.add_(1)

    profilers: Dict[str, Callable[[], Any]] = {
        "torch.profiler": lambda: torch_profile(activities=[ProfilerActivity.CPU]),
        "omniprof": lambda: omniprof.profile(activities=[omniprof.ProfilerActivity.CPU]),
    }
    times: Dict[str, List[List[float]]] = {name: [] for name in profilers}
    events = {}
    for _ in range(args.runs):
        for name, make in profilers.items():
            gc.collect()
            with make() as prof:
                work()
            times[name].append(timed_calls(prof))
            events[name] = len(prof.events())
            del prof
    print(f"{args.iterations} iterations of x.add_(1); medians of {args.runs} rounds, seconds")
    print(f"{'call':<26}" + "".join(f"{name:>16}" for name in profilers) + f"{'ratio':>8}")
    for i, step in enumerate(STEPS):
        medians = [statistics.median(r[i] for r in times[name]) for name in profilers]
        ratio = medians[1] / medians[0] if medians[0] > 0 else float("nan")
        print(f"{step:<26}" + "".join(f"{m:>16.3f}" for m in medians) + f"{ratio:>8.2f}")
    print("events: " + ", ".join(f"{name} {n}" for name, n in events.items()))


if __name__ == "__main__":
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch's NumPy notice
        main()
