"""The SQL of docs/parquet.md, run by DuckDB and by Apache Spark (PySpark, local mode) over the
Parquet tables of a three-rank job, gives `omniprof summary`'s rows: the same (name, device)
rows with the same calls and nanosecond sums, over all ranks and per rank, and through
`ops.host_op_id` each host op name's self device time; and DuckDB over a job whose rank 0
has two traces (a scheduled profiler's cycles) gets the same, its ids unique within a rank.

Run with a Python that has duckdb and pyspark (and a Java runtime for Spark), as .ci/run does:

    target/sql-venv/bin/python -m pytest -q -p no:cacheprovider tests/sql

Without them the tests fail; OMNIPROF_PY_ALLOW_MISSING_TOOLS=1 makes them skip instead.
"""

import json
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import REPO, cli, missing

TABLES = ["slices", "instants", "counters", "flows", "ops", "metadata", "device_properties"]
RANKS = 3
# A guard against a hang, not a speed check: a JVM start and a few small queries took 41 s on
# the project's shared 2-core machine, and several times that when it is loaded.
SPARK_SECONDS = 600


def documented_sql(name: str) -> str:
    """The SQL block that follows `<!-- sql: NAME -->` in docs/parquet.md."""
    text = (REPO / "docs" / "parquet.md").read_text()
    m = re.search(rf"<!-- sql: {name} -->\s*```sql\n(.*?)```", text, re.S)
    assert m, f"docs/parquet.md has no `<!-- sql: {name} -->` block"
    return m.group(1)


def gen_trace(path, ops, seed, rank):
    """A generated trace of `ops` host ops on three threads, claiming `rank`."""
    subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_trace.py"), str(path), "--ops", str(ops),
         "--threads", "3", "--seed", str(seed), "--rank", str(rank)],
        check=True,
    )
    return path


def convert(traces, tables):
    """The traces' Parquet tables under `tables`; the CLI's standard error."""
    out = subprocess.run(
        [str(cli()), "convert", *map(str, traces), "-o", str(tables), "--format", "parquet"],
        capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stderr
    return out.stderr


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """Three ranks' traces, their Parquet tables, and each trace's summary rows."""
    d = tmp_path_factory.mktemp("job")
    traces = [gen_trace(d / f"rank{rank}.pt.trace.json", 3000, 11 + rank, rank)
              for rank in range(RANKS)]
    tables = d / "tables"
    convert(traces, tables)
    return tables, summary_rows(traces)


def summary_rows(traces):
    """`omniprof summary`'s rows of the job over all ranks, and per rank with `--by-rank`,
    each as {(name, on_device): (calls, host total ns, self host ns, device total ns, self
    device ns)}."""

    def rows_of(summary):
        rows = {}
        for r in summary["rows"]:
            ns = lambda key: round(r[key] * 1000)  # noqa: E731 (the summary prints exact µs)
            key = (r["name"], r["on_device"])
            assert key not in rows, f"two summary rows for {key}"
            rows[key] = (r["count"], ns("cpu_time_total_us"), ns("self_cpu_time_total_us"),
                         ns("device_time_total_us"), ns("self_device_time_total_us"))
        return rows

    def summary(*flags):
        out = subprocess.run(
            [str(cli()), "summary", *map(str, traces), "--format", "json", "--row-limit", "-1", *flags],
            capture_output=True, text=True,
        )
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    per_rank = {r["rank"]: rows_of(r["summary"]) for r in summary("--by-rank")["ranks"]}
    return rows_of(summary()), per_rank


def check(key_averages, per_rank_rows, summaries):
    """The two documented queries' rows against `omniprof summary`'s over all ranks and
    `--by-rank`'s."""
    expected, summary = summaries
    got = {(name, bool(dev)): (calls, host, self_host, dev_total, self_dev)
           for name, dev, calls, host, self_host, dev_total, self_dev in key_averages}
    assert set(got) == set(expected)
    assert got == expected
    assert len(got) == 22
    got = {(name, bool(dev), rank): (calls, host, self_host, self_dev)
           for name, dev, rank, calls, host, self_host, self_dev in per_rank_rows}
    expected = {(name, dev, rank): (v[0], v[1], v[2], v[4])
                for rank, rows in summary.items() for (name, dev), v in rows.items()}
    assert got == expected
    assert Counter(rank for _, _, rank in got) == {r: 22 for r in range(RANKS)}


def check_device(device_by_host_op, summaries):
    """The device-time-by-host-op query's rows against the summary's self device time of
    each host op name."""
    expected, _ = summaries
    want = {name: v[4] for (name, on_device), v in expected.items() if not on_device and v[4]}
    got = {name: ns for name, _calls, ns in device_by_host_op}
    assert got == want
    assert set(got) == {"aten::addmm", "aten::clamp_min", "aten::sum"}


def duckdb_views(tables):
    """A DuckDB connection with each table as a view, as docs/parquet.md sets them up."""
    try:
        import duckdb
    except ImportError:
        missing("duckdb is not installed (pip install duckdb; .ci/run puts it in target/sql-venv)")
    con = duckdb.connect()
    for t in TABLES:
        con.execute(
            f"CREATE VIEW {t} AS SELECT * FROM "
            f"read_parquet('{tables}/{t}/*/*.parquet', hive_partitioning = true)"
        )
    return con


def test_duckdb_runs_the_documented_sql_and_gets_the_summarys_rows(job):
    tables, summary = job
    con = duckdb_views(tables)
    check(con.execute(documented_sql("key_averages")).fetchall(),
          con.execute(documented_sql("per_rank")).fetchall(), summary)
    check_device(con.execute(documented_sql("device_by_host_op")).fetchall(), summary)
    # Every slice the summary counts has its row in `ops`, unless absorbed by its parent.
    (orphans,) = con.execute(
        "SELECT COUNT(*) FROM slices s LEFT JOIN ops o ON o.rank = s.rank AND o.op_id = s.op_id "
        "WHERE s.op_id IS NOT NULL AND o.op_id IS NULL"
    ).fetchone()
    assert orphans == 300 * RANKS  # the inner `aten::sum` of each block
    # Every parent is a row of `ops`: the launch under each absorbed inner `aten::sum` names
    # the outer one, two levels up.
    (orphans,) = con.execute(
        "SELECT COUNT(*) FROM ops c LEFT JOIN ops p ON p.rank = c.rank AND p.op_id = c.parent_op_id "
        "WHERE c.parent_op_id IS NOT NULL AND p.op_id IS NULL"
    ).fetchone()
    assert orphans == 0
    skips = con.execute(
        "SELECT c.name, p.name, c.depth - p.depth, COUNT(*) FROM ops c "
        "JOIN ops p ON p.rank = c.rank AND p.op_id = c.parent_op_id "
        "GROUP BY ALL HAVING c.depth - p.depth <> 1"
    ).fetchall()
    assert skips == [("cudaLaunchKernel", "aten::sum", 2, 300 * RANKS)]


def test_duckdb_reads_a_ranks_two_traces_as_its_parts_and_gets_the_summarys_rows(tmp_path):
    # Two cycles of rank 0 (as `tensorboard_trace_handler` writes them) and one of rank 1.
    traces = [gen_trace(tmp_path / f"{name}.pt.trace.json", 300, seed, rank)
              for name, seed, rank in [("a", 21, 0), ("b", 22, 0), ("c", 23, 1)]]
    tables = tmp_path / "tables"
    assert convert(traces, tables) == (
        f"note: rank 0 has 2 traces ({traces[0]}, {traces[1]}): read as that rank's steps\n"
    )
    parts = sorted(p.relative_to(tables / "ops").as_posix() for p in (tables / "ops").rglob("*.parquet"))
    assert parts == ["rank=0/part-0.parquet", "rank=0/part-1.parquet", "rank=1/part-0.parquet"]
    expected, per_rank = summary_rows(traces)
    con = duckdb_views(tables)
    got = {(name, bool(dev)): rest
           for name, dev, *rest in con.execute(documented_sql("key_averages")).fetchall()}
    assert got == {k: list(v) for k, v in expected.items()}
    got = {(name, bool(dev), rank): (calls, host, self_host, self_dev)
           for name, dev, rank, calls, host, self_host, self_dev
           in con.execute(documented_sql("per_rank")).fetchall()}
    assert got == {(name, dev, rank): (v[0], v[1], v[2], v[4])
                   for rank, rows in per_rank.items() for (name, dev), v in rows.items()}
    check_device(con.execute(documented_sql("device_by_host_op")).fetchall(), (expected, None))
    # Ids name one row within a rank, across its parts.
    for table, column in [("slices", "slice_id"), ("ops", "op_id")]:
        (repeated,) = con.execute(
            f"SELECT COUNT(*) FROM (SELECT rank, {column} FROM {table} GROUP BY ALL HAVING COUNT(*) > 1)"
        ).fetchone()
        assert repeated == 0, table
    (orphans,) = con.execute(
        "SELECT COUNT(*) FROM ops c LEFT JOIN ops p ON p.rank = c.rank AND p.op_id = c.parent_op_id "
        "WHERE c.parent_op_id IS NOT NULL AND p.op_id IS NULL"
    ).fetchone()
    assert orphans == 0


def test_spark_runs_the_documented_sql_and_gets_the_summarys_rows(job):
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        missing("pyspark is not installed (pip install pyspark; .ci/run puts it in target/sql-venv)")
    if shutil.which("java") is None:
        missing("no Java runtime for Spark (Debian: apt-get install default-jre-headless)")
    tables, summary = job
    started = time.monotonic()
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("omniprof-parquet-check")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    try:
        for t in TABLES:
            spark.read.parquet(str(tables / t)).createOrReplaceTempView(t)
        rows = lambda sql: [tuple(r) for r in spark.sql(sql).collect()]  # noqa: E731
        check(rows(documented_sql("key_averages")), rows(documented_sql("per_rank")), summary)
        check_device(rows(documented_sql("device_by_host_op")), summary)
    finally:
        spark.stop()
    elapsed = time.monotonic() - started
    assert elapsed < SPARK_SECONDS, f"the Spark check took {elapsed:.0f} s"
