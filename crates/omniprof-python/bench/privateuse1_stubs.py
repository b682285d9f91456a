"""What profiling a PrivateUse1 backend's device costs per op, on toydev, the tests'
PrivateUse1 device (``tests/toydev/device.cpp``, built here with torch.utils.cpp_extension),
with kernels that do no work: through its profiler stubs, the legacy profiler
(``torch.autograd.profiler.profile(use_device="toydev")``) against omniprof's bridge
(``omniprof.profile(use_device="toydev")``), each op its launch, two stub events and the
profiler's bookkeeping; and through its Kineto profiler (``REGISTER_PRIVATEUSE1_PROFILER``),
torch.profiler against omniprof, both with ``activities=[CPU, PrivateUse1]``, each op its
launch and kernel records.

Configurations, alternated in a shuffled order each round, medians of the rounds:

- none: no profiler;
- omniprof CPU: omniprof.profile(activities=["CPU"]) recording host ops only;
- legacy: the legacy profiler with use_device (its post-processing, where it calls
  ``elapsed``, runs in key_averages(), which is timed as part of the run);
- omniprof: omniprof.profile(use_device=...) (its elapsed calls run at stop), with
  key_averages() too;
- torch.profiler PrivateUse1 and omniprof PrivateUse1: the Kineto profiler's way, stop and
  key_averages() timed as post-processing.

    python crates/omniprof-python/bench/privateuse1_stubs.py [--ops 20000] [--runs 7]

Prints, per configuration, ns per op of the loop (the hot path: what an op costs while
recording), of stop plus key_averages (the post-processing: both profilers call elapsed
there), and of the two together; and what each adds over none.
"""

import argparse
import os
import random
import statistics
import sys
import time
import warnings
from typing import Callable, Dict, List, Tuple

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

import omniprof  # noqa: E402
import toydev_device  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ops", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    warnings.simplefilter("ignore")

    ext = toydev_device.load()
    ext.set_kernel_us(0)
    a = torch.ones(16).to("toydev")
    b = torch.ones(16).to("toydev")

    def loop() -> None:
        for _ in range(args.ops // 2):
            c = a + b
            c = c * b
        torch.toydev.synchronize()

    def none() -> Tuple[float, float]:
        t0 = time.perf_counter_ns()
        loop()
        return time.perf_counter_ns() - t0, 0.0

    def legacy() -> Tuple[float, float]:
        prof = torch.autograd.profiler.profile(use_device="toydev")
        prof.__enter__()
        t0 = time.perf_counter_ns()
        loop()
        t1 = time.perf_counter_ns()
        prof.__exit__(None, None, None)
        prof.key_averages()
        return t1 - t0, time.perf_counter_ns() - t1

    def kineto() -> Tuple[float, float]:
        prof = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.PrivateUse1]
        )
        prof.start()
        t0 = time.perf_counter_ns()
        loop()
        t1 = time.perf_counter_ns()
        prof.stop()
        prof.key_averages()
        return t1 - t0, time.perf_counter_ns() - t1

    def ours(**kwargs: object) -> Callable[[], Tuple[float, float]]:
        def run() -> Tuple[float, float]:
            prof = omniprof.profile(**kwargs)  # type: ignore[arg-type]
            prof.start()
            t0 = time.perf_counter_ns()
            loop()
            t1 = time.perf_counter_ns()
            prof.stop()
            prof.key_averages()
            return t1 - t0, time.perf_counter_ns() - t1

        return run

    configs: Dict[str, Callable[[], Tuple[float, float]]] = {
        "none": none,
        "omniprof CPU": ours(activities=["CPU"]),
        "legacy use_device": legacy,
        "omniprof use_device": ours(use_device="toydev"),
        "torch.profiler PU1": kineto,
        "omniprof PU1": ours(activities=["CPU", "PrivateUse1"]),
    }
    for run in configs.values():  # warm-up: builds, first-use costs
        run()
    samples: Dict[str, List[Tuple[float, float]]] = {name: [] for name in configs}
    for _ in range(args.runs):
        order = list(configs)
        random.shuffle(order)
        for name in order:
            samples[name].append(configs[name]())

    print(f"{args.ops} ops per run, medians of {args.runs} runs, ns per op")
    print(f"{'':22}{'loop':>10}{'post':>10}{'total':>10}{'loop +':>10}{'total +':>10}")
    base_loop = statistics.median(s[0] for s in samples["none"]) / args.ops
    for name, s in samples.items():
        loop_ns = statistics.median(x[0] for x in s) / args.ops
        post_ns = statistics.median(x[1] for x in s) / args.ops
        total = statistics.median(x[0] + x[1] for x in s) / args.ops
        print(
            f"{name:22}{loop_ns:10.0f}{post_ns:10.0f}{total:10.0f}"
            f"{loop_ns - base_loop:10.0f}{total - base_loop:10.0f}"
        )


if __name__ == "__main__":
    main()
