#!/usr/bin/env python3
"""Benchmarks `omniprof convert --format parquet` (docs/benchmarks.md, "Parquet tables").

Generates the benchmark trace (scripts/gen_trace.py), writes it as .json.gz (gzip's default
level) and .pftrace, converts it to Parquet tables, and prints each size and the Parquet
conversion's time: wall, CPU (user + system, all threads) and events per CPU second (the
reader parses on every core, so events per second per core is events over CPU time).
Standard library only.

    cargo build --release -p omniprof-cli
    python3 scripts/bench_parquet.py --ops 1000000 --runs 3
"""

import argparse
import gzip
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def tree_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def timed(cmd):
    """Runs `cmd`; returns (stdout, wall seconds, CPU seconds of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out.stdout, wall, cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cli", default=str(REPO / "target" / "release" / "omniprof"))
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        trace = d / "trace.json"
        subprocess.run(
            [sys.executable, str(REPO / "scripts" / "gen_trace.py"), str(trace), "--ops", str(args.ops), "--rank", "0"],
            check=True,
        )
        with open(trace, "rb") as src, gzip.open(d / "trace.json.gz", "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        subprocess.run([args.cli, "convert", str(trace), "-o", str(d / "trace.pftrace")], check=True, capture_output=True)
        sizes = {
            ".json": trace.stat().st_size,
            ".json.gz": (d / "trace.json.gz").stat().st_size,
            ".pftrace": (d / "trace.pftrace").stat().st_size,
        }
        runs = []
        for i in range(args.runs):
            out_dir = d / f"tables{i}"
            stdout, wall, cpu = timed([args.cli, "convert", str(trace), "-o", str(out_dir), "--format", "parquet"])
            events = int(re.search(r"\((\d+) events\)", stdout).group(1))
            sizes["parquet"] = tree_size(out_dir)
            runs.append((wall, cpu, events))
            if i + 1 < args.runs:
                shutil.rmtree(out_dir)
    for name, size in sizes.items():
        ratio = size / sizes[".json.gz"]
        print(f"{name:10} {size:>12,} bytes  {ratio:5.2f}x .json.gz")
    for wall, cpu, events in runs:
        print(
            f"parquet convert: {events:,} events, wall {wall:.2f} s ({events / wall / 1e6:.2f} M events/s), "
            f"CPU {cpu:.2f} s ({events / cpu / 1e6:.2f} M events per CPU second)"
        )
    print(f"cores: {os.cpu_count()}")


if __name__ == "__main__":
    main()
