"""bench/train_step_callgrind.py's report: what it prints of callgrind's parts, with and
without the cache simulation's events (the counting itself needs valgrind and minutes, and
is not run here)."""

import sys
from pathlib import Path
from typing import Dict, List

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))
import train_step_callgrind  # noqa: E402  (beside the benchmarks, not a package)

CACHE_EVENTS = ["Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw"]


def write_part(directory: Path, name: str, events: List[str], totals: List[int]) -> str:
    """A callgrind dump's header as the script's client request names it."""
    path = directory / f"cg.out.{len(list(directory.iterdir())) + 1}"
    path.write_text(
        "version: 1\ncreator: callgrind-3.19.0\n"
        f"desc: Trigger: Client Request: {name}\n"
        f"events: {' '.join(events)}\n"
        f"summary: {' '.join(map(str, totals))}\n"
        "fn=main\n0 1\n"
    )
    return str(path)


def rows(printed: str) -> Dict[str, List[str]]:
    """The table's rows by configuration: the cells after its name."""
    table = {}
    for line in printed.splitlines():
        for name in ("none", "floor with state", "omniprof, default", "torch.profiler, default"):
            if line.startswith(name + " "):
                table[name] = line[len(name):].split()
    return table


def test_the_report_adds_misses_and_the_cycle_estimate_where_the_caches_were_simulated(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    # Two steps counted: every figure printed is half of these totals.
    parts = [
        write_part(tmp_path, "none", CACHE_EVENTS, [2000, 0, 0, 20, 10, 10, 2, 2, 0]),
        write_part(tmp_path, "floor with state", CACHE_EVENTS, [3000, 0, 0, 40, 20, 20, 4, 2, 2]),
        write_part(tmp_path, "omniprof, default", CACHE_EVENTS, [3400, 0, 0, 60, 30, 30, 6, 4, 2]),
        write_part(tmp_path, "torch.profiler, default", CACHE_EVENTS, [5000, 0, 0, 80, 40, 40, 8, 6, 6]),
    ]
    train_step_callgrind.report(parts, steps=2)
    printed = capsys.readouterr().out
    table = rows(printed)
    # Per step: instructions, added, ratio; L1 misses, LL misses, the estimate (instructions
    # + 10 per L1 miss + 100 per LL miss), what it adds, and its ratio.
    assert table["none"] == ["1,000", "+0", "20", "2", "1,400", "+0"]
    assert table["omniprof, default"] == [
        "1,700", "+700", "0.467", "60", "6", "2,900", "+1,500", "0.517",
    ]
    assert table["torch.profiler, default"] == ["2,500", "+1,500", "80", "10", "4,300", "+2,900"]
    assert (
        "  omniprof, default: +200 instructions, +20 L1 misses, +2 LL misses, "
        "+600 estimated cycles" in printed
    )


def test_without_the_cache_simulation_the_report_counts_instructions_only(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    parts = [
        write_part(tmp_path, "none", ["Ir"], [1000]),
        write_part(tmp_path, "omniprof, default", ["Ir"], [1300]),
        write_part(tmp_path, "torch.profiler, default", ["Ir"], [2000]),
    ]
    train_step_callgrind.report(parts, steps=1)
    printed = capsys.readouterr().out
    assert "L1 misses" not in printed and "above the floor" not in printed
    assert rows(printed)["omniprof, default"] == ["1,300", "+300", "0.300"]
