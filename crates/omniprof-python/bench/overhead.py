"""What profiling a tiny-op PyTorch loop costs: no profiler, torch.profiler.profile and
omniprof.profile (each recording host ops only), alternated in one process, medians of
several runs; then one user range per iteration under each profiler's own record_function.

    python crates/omniprof-python/bench/overhead.py [--ops 200000] [--runs 5]

Prints ns per iteration for each configuration, what each profiler adds over none, and the
ratio of omniprof's added cost to torch.profiler's (the target is at most 1/3).
"""

import argparse
import statistics
import time
from typing import Callable, ContextManager, Dict, List

import torch
from torch.profiler import ProfilerActivity, profile as torch_profile
from torch.profiler import record_function as torch_record_function

import omniprof


def add_loop(n: int) -> Callable[[], float]:
    x = torch.zeros(1)

    def run() -> float:
        start = time.perf_counter_ns()
        for _ in range(n):
            x.add_(1)
        return (time.perf_counter_ns() - start) / n

    return run


def range_loop(n: int, record_function: Callable[[str], ContextManager]) -> Callable[[], float]:
    def run() -> float:
        start = time.perf_counter_ns()
        for _ in range(n):
            with record_function("range"):
                pass
        return (time.perf_counter_ns() - start) / n

    return run


def under(make_profiler: Callable[[], ContextManager], loop: Callable[[], float]) -> Callable[[], float]:
    def run() -> float:
        with make_profiler():
            return loop()

    return run


def measure(configs: Dict[str, Callable[[], float]], runs: int) -> Dict[str, float]:
    """Medians of `runs` rounds, each running every configuration once in turn."""
    samples: Dict[str, List[float]] = {name: [] for name in configs}
    for name, run in configs.items():  # warm-up: builds, first-use allocations
        run()
    for _ in range(runs):
        for name, run in configs.items():
            samples[name].append(run())
    return {name: statistics.median(s) for name, s in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=200_000, help="iterations per run")
    parser.add_argument("--runs", type=int, default=5, help="runs per configuration")
    args = parser.parse_args()
    torch_cpu = lambda: torch_profile(activities=[ProfilerActivity.CPU])  # noqa: E731
    ours = lambda: omniprof.profile(activities=[omniprof.ProfilerActivity.CPU])  # noqa: E731

    ops = measure(
        {
            "no profiler": add_loop(args.ops),
            "torch.profiler": under(torch_cpu, add_loop(args.ops)),
            "omniprof": under(ours, add_loop(args.ops)),
        },
        args.runs,
    )
    base = ops["no profiler"]
    print(f"x.add_(1) on a 1-element tensor, {args.ops} per run, median of {args.runs} runs")
    for name, ns in ops.items():
        print(f"  {name:<16} {ns:8.0f} ns/op   added {ns - base:+8.0f}")
    ratio = (ops["omniprof"] - base) / (ops["torch.profiler"] - base)
    print(f"  omniprof's added cost / torch.profiler's: {ratio:.2f} (target <= 0.33)")

    ranges = measure(
        {
            "torch.profiler.record_function": under(torch_cpu, range_loop(args.ops, torch_record_function)),
            "omniprof.record_function": under(ours, range_loop(args.ops, omniprof.record_function)),
        },
        args.runs,
    )
    print(f"one empty range per iteration, each under its own profiler")
    for name, ns in ranges.items():
        print(f"  {name:<32} {ns:8.0f} ns/range")


if __name__ == "__main__":
    main()
