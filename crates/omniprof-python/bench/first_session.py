"""What a program's first profiling session costs beside its later ones, with
``record_shapes=True``: most programs are profiled once, so the first session is the one
users pay for.

Each process is a fresh interpreter (nothing faulted in or interned yet) that times
``x.add_(1)`` on a one-element tensor in three sessions of one profiler
(``omniprof.profile`` or ``torch.profiler.profile``, in processes of their own so that
neither inherits the other's memory), each between two runs without a profiler, and
reports per session the nanoseconds each iteration adds over those runs and the page faults
of the loop's thread.

    python crates/omniprof-python/bench/first_session.py [--processes 5] [--ops 20000]

Prints each process's figures, then the medians: the sessions' added cost, omniprof's first
session over its third, and omniprof's first session over torch.profiler's first.
"""

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List

SESSIONS = 3


def child(profiler: str, ops: int) -> Dict[str, Any]:
    import torch

    import omniprof

    make: Callable[[], Any] = {
        "omniprof": lambda: omniprof.profile(record_shapes=True),
        "torch": lambda: torch.profiler.profile(record_shapes=True),
    }[profiler]
    x = torch.ones(1)

    def loop() -> float:
        start = time.perf_counter()
        for _ in range(ops):
            x.add_(1)
        return (time.perf_counter() - start) / ops * 1e9

    loop()  # PyTorch's own first calls
    # Each session is measured against runs without a profiler just before and after it,
    # so that a slow spell of the machine moves both.
    bases = [loop()]
    sessions = []
    for _ in range(SESSIONS):
        with make():
            faults = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
            ns = loop()
            faults = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - faults
        bases.append(loop())
        base = (bases[-2] + bases[-1]) / 2
        sessions.append({"added_ns": ns - base, "faults": faults})
    return {"base_ns": statistics.median(bases), "sessions": sessions}


def run(profiler: str, ops: int) -> Dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", profiler, "--ops", str(ops)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=5, help="fresh processes per profiler")
    parser.add_argument("--ops", type=int, default=20000, help="iterations per session")
    parser.add_argument("--child", choices=["omniprof", "torch"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.ops)))
        return
    added: Dict[str, List[List[float]]] = {"omniprof": [], "torch": []}
    for i in range(args.processes):
        for profiler in ("omniprof", "torch"):
            result = run(profiler, args.ops)
            sessions = result["sessions"]
            added[profiler].append([s["added_ns"] for s in sessions])
            shown = ", ".join(f"{s['added_ns']:+.0f} ns ({s['faults']} faults)" for s in sessions)
            print(f"process {i + 1}, {profiler:<8} no profiler {result['base_ns']:.0f} ns; {shown}")
    median = {p: [statistics.median(a[s] for a in v) for s in range(SESSIONS)] for p, v in added.items()}
    for profiler, per_session in median.items():
        shown = ", ".join(f"{ns:+.0f}" for ns in per_session)
        print(f"{profiler:<8} added per iteration, sessions 1..{SESSIONS} (medians): {shown} ns")
    ours, theirs = median["omniprof"], median["torch"]
    print(f"omniprof's first session / its third: {ours[0] / ours[-1]:.2f}")
    print(f"omniprof's first session / torch.profiler's first: {ours[0] / theirs[0]:.2f}")


if __name__ == "__main__":
    main()
