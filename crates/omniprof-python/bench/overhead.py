"""What profiling a tiny-op PyTorch loop costs: no profiler, torch.profiler.profile and
omniprof.profile (each recording host ops only), alternated in one process on one tensor,
medians of several runs; then one user range per iteration under each profiler's own
record_function; then a small MLP's training steps under each.

    python crates/omniprof-python/bench/overhead.py [--ops 200000] [--runs 5]

Prints ns per iteration for each configuration, what each profiler adds over none, and the
ratio of omniprof's added cost to torch.profiler's (the target is at most 1/3): in wall time,
and in the loop thread's CPU time, which another process competing for the CPUs disturbs
less (it leaves out what runs on other threads: the recorder's chunk refill).

torch.profiler's cost per op grows with the length of the run (it keeps every event in
memory as it goes), so runs shorter than the issue's 100,000 ops flatter it.
"""

import argparse
import statistics
import time
from typing import Callable, ContextManager, Dict, List, Tuple

import torch
from torch.profiler import ProfilerActivity, profile as torch_profile
from torch.profiler import record_function as torch_record_function

import omniprof


# A run's cost per iteration: (wall ns, this thread's CPU ns).
Cost = Tuple[float, float]


def timed(n: int, body: Callable[[], None]) -> Cost:
    wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
    body()
    return (time.perf_counter_ns() - wall) / n, (time.thread_time_ns() - cpu) / n


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


def under(make_profiler: Callable[[], ContextManager], loop: Callable[[], Cost]) -> Callable[[], Cost]:
    def run() -> Cost:
        with make_profiler():
            return loop()

    return run


def measure(configs: Dict[str, Callable[[], Cost]], runs: int) -> Dict[str, Cost]:
    """Medians (wall, CPU) of `runs` rounds, each running every configuration once in turn."""
    samples: Dict[str, List[Cost]] = {name: [] for name in configs}
    for name, run in configs.items():  # warm-up: builds, first-use allocations
        run()
    for _ in range(runs):
        for name, run in configs.items():
            samples[name].append(run())
    return {
        name: (statistics.median(w for w, _ in s), statistics.median(c for _, c in s))
        for name, s in samples.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=200_000, help="iterations per run (>= 100,000)")
    parser.add_argument("--runs", type=int, default=5, help="runs per configuration")
    args = parser.parse_args()
    torch_cpu = lambda: torch_profile(activities=[ProfilerActivity.CPU])  # noqa: E731
    ours = lambda: omniprof.profile(activities=[omniprof.ProfilerActivity.CPU])  # noqa: E731

    # One tensor for every configuration: with a tensor each, where each one landed in memory
    # moved the ratio by about 0.03 (runs of this script, 100,000 iterations).
    x = torch.zeros(1)
    ops = measure(
        {
            "no profiler": add_loop(args.ops, x),
            "torch.profiler": under(torch_cpu, add_loop(args.ops, x)),
            "omniprof": under(ours, add_loop(args.ops, x)),
        },
        args.runs,
    )
    print(f"x.add_(1) on a 1-element tensor, {args.ops} per run, median of {args.runs} runs")
    for clock, i in (("wall time", 0), ("loop thread's CPU time", 1)):
        base = ops["no profiler"][i]
        print(f" {clock}")
        for name, cost in ops.items():
            print(f"  {name:<16} {cost[i]:8.0f} ns/op   added {cost[i] - base:+8.0f}")
        ratio = (ops["omniprof"][i] - base) / (ops["torch.profiler"][i] - base)
        print(f"  omniprof's added cost / torch.profiler's: {ratio:.2f} (target <= 0.33)")

    ranges = measure(
        {
            "torch.profiler.record_function": under(torch_cpu, range_loop(args.ops, torch_record_function)),
            "omniprof.record_function": under(ours, range_loop(args.ops, omniprof.record_function)),
        },
        args.runs,
    )
    print(f"one empty range per iteration, each under its own profiler")
    for name, (wall, cpu) in ranges.items():
        print(f"  {name:<32} {wall:8.0f} ns/range (CPU {cpu:.0f})")

    steps = max(args.ops // 500, 100)
    mlp = measure(
        {
            "no profiler": mlp_loop(steps),
            "torch.profiler": under(torch_cpu, mlp_loop(steps)),
            "omniprof": under(ours, mlp_loop(steps)),
        },
        args.runs,
    )
    print(f"a small MLP's training step, {steps} per run (wall time)")
    base = mlp["no profiler"][0]
    for name, (wall, _) in mlp.items():
        print(f"  {name:<16} {wall / 1e3:8.1f} us/step added {(wall - base) / 1e3:+7.1f}")
    ratio = (mlp["omniprof"][0] - base) / (mlp["torch.profiler"][0] - base)
    print(f"  omniprof's added cost / torch.profiler's: {ratio:.2f}")


if __name__ == "__main__":
    main()
