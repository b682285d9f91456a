"""What the flight recorder costs: per op against omniprof's default profiling, and as a share
of a realistically sized training step, on the CPU, one thread, configurations alternated in
one process in a shuffled order each round, medians of the rounds (overhead.py's method,
which this script imports):

- ops: ``x.add_(1)`` on a one-element tensor, 20,000 times per run;
- step: forward, loss, backward and an SGD step of one ``torch.nn.TransformerEncoderLayer``
  of width 512 (8 heads, feed-forward 2048, no dropout) on a batch of 8 sequences of 128;

each under no profiler, ``omniprof.profile(activities=[CPU])`` (default flags) and
``omniprof.flight_recorder()`` (default: 30 s, 64 MiB, the op observer with default flags,
a ``ProfilerStep#N`` range per step from the optimizer hook).

    python crates/omniprof-python/bench/flight.py [--runs 9] [--ops 20000] [--steps 5]

Prints, per workload, nanoseconds per op (or milliseconds per step) under each, and what
each adds over no profiler, in wall time and in the loop thread's CPU time; then the flight
recorder's added cost per op over omniprof.profile's, and its share of the step.
"""

import argparse
from typing import Any, Callable, Dict

import torch

import omniprof
from overhead import Cost, add_loop, measure, timed, under  # beside this script

NONE = "no profiler"
PROFILE = "omniprof.profile"
FLIGHT = "flight recorder"


def profile() -> Any:
    return omniprof.profile(activities=[omniprof.ProfilerActivity.CPU])


def flight() -> Any:
    return omniprof.flight_recorder(serve_dump_requests=False)


def step_loop(steps: int) -> Callable[[], Cost]:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(
        d_model=512, nhead=8, dim_feedforward=2048, dropout=0.0, batch_first=True
    )
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.01)
    x = torch.randn(8, 128, 512)

    def body() -> None:
        for _ in range(steps):
            optimizer.zero_grad()
            layer(x).square().mean().backward()
            optimizer.step()

    return lambda: timed(steps, body)


def configs(loop: Callable[[], Cost]) -> Dict[str, Callable[[], Cost]]:
    return {NONE: loop, PROFILE: under(profile, loop), FLIGHT: under(flight, loop)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--ops", type=int, default=20_000)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    ops = measure(configs(add_loop(args.ops, torch.zeros(1))), args.runs)
    steps = measure(configs(step_loop(args.steps)), args.runs)
    for field in ("wall", "cpu"):
        op = {name: getattr(c, field) for name, c in ops.items()}
        st = {name: getattr(c, field) / 1e6 for name, c in steps.items()}
        print(f"[{field}] x.add_(1), ns per op: " + ", ".join(
            f"{name} {op[name]:.0f} (+{op[name] - op[NONE]:.0f})" for name in op))
        print(f"[{field}] transformer step, ms: " + ", ".join(
            f"{name} {st[name]:.2f} (+{st[name] - st[NONE]:.2f})" for name in st))
        added_profile = op[PROFILE] - op[NONE]
        added_flight = op[FLIGHT] - op[NONE]
        print(f"[{field}] flight recorder per op / omniprof.profile per op: "
              f"{added_flight / added_profile:.2f}; flight recorder's share of the step: "
              f"{100 * (st[FLIGHT] - st[NONE]) / st[NONE]:.1f} %")


if __name__ == "__main__":
    main()
