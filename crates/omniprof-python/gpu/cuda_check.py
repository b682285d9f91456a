"""The CUDA end-to-end check of omniprof's CUPTI backend (docs/cuda.md), on a machine with an
NVIDIA GPU: one CUDA workload profiled by torch.profiler and by omniprof in the same process,
compared.

The workload has a convolution, matrix products, copies both ways, a memset, a
synchronization and a ``torch.profiler.record_function`` range. It runs under
``omniprof.profile(activities=[CPU, CUDA])``, then ``torch.profiler.profile`` with the same
activities, then omniprof again (so each profiler runs after the other once). Checked:

- each kind of event the docs list in both traces: kernels, copies (``gpu_memcpy``), sets
  (``gpu_memset``) and runtime calls (``cuda_runtime``), and, with
  ``enable_cuda_sync_events=True``, synchronizations (``cuda_sync``, ``Context Sync`` from
  ``torch.cuda.synchronize()`` among them, each with its ``cuda_sync_kind``; every
  ``Stream Sync`` on its stream's sync row; a side stream's wait on an event and the host's
  each naming the event's ``cudaEventRecord`` call);
- the same kernel names with the same counts, and total kernel time per name within 5 %;
- every omniprof kernel linked to a host op (``External id`` of a ``cpu_op``), and to the
  same ops whether linked by its launch's thread and time (the default) or through CUPTI's
  external correlation (``OMNIPROF_CUPTI_EXTERNAL_CORRELATION=1``);
- ``key_averages()`` device columns within 5 % of PyTorch's, row by row;
- a CUDA session is refused while torch.profiler records;
- the per-op overhead of both with the CUDA activity on (``x.add_(1)`` on the GPU), and of
  omniprof on the external correlation.

It writes ``report.json`` and both traces into ``--out`` and exits non-zero when a check
fails. Run: ``python crates/omniprof-python/gpu/cuda_check.py --out DIR``.
"""

import argparse
import collections
import json
import os
import sys
import time
import traceback
from typing import Any, Callable, Dict, List, Tuple

import torch
import torch.nn as nn

import omniprof

TOLERANCE = 0.05


def build() -> Tuple[nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 32, 3, padding=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(32 * 32 * 32, 256),
    ).cuda()
    batch = torch.randn(16, 3, 32, 32).pin_memory()
    weight = torch.randn(2048, 2048, device="cuda")
    return model, batch, weight


def workload(model: nn.Module, batch: torch.Tensor, weight: torch.Tensor, steps: int) -> None:
    for _ in range(steps):
        with torch.profiler.record_function("e2e_step"):
            x = batch.to("cuda", non_blocking=True)
            out = model(x)
            loss = out.float().pow(2).mean()
            loss.backward()
            product = torch.mm(weight, weight)
            scratch = torch.zeros(1 << 20, device="cuda")
            scratch.add_(product[0, 0])
            host = out.detach().to("cpu")
            torch.cuda.synchronize()
            del host


def kernels(trace: Dict[str, Any], cats: Tuple[str, ...] = ("kernel",)) -> Dict[str, List[float]]:
    by_name: Dict[str, List[float]] = collections.defaultdict(list)
    for e in trace["traceEvents"]:
        if e.get("cat") in cats and e.get("ph") == "X":
            by_name[e["name"]].append(float(e["dur"]))
    return by_name


# The event categories every trace of the workload must hold (docs/cuda.md, "What is
# recorded"): a check comparing two traces passes on two empty ones, so each is required.
REQUIRED_KINDS = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime")


def kinds_missing(trace: Dict[str, Any], kinds: Tuple[str, ...] = REQUIRED_KINDS) -> List[str]:
    """The categories of ``kinds`` with no complete (``X``) event in ``trace``."""
    present = {e.get("cat") for e in trace["traceEvents"] if e.get("ph") == "X"}
    return [kind for kind in kinds if kind not in present]


def unlinked_kernels(trace: Dict[str, Any]) -> List[str]:
    ops = {
        e["args"]["External id"]
        for e in trace["traceEvents"]
        if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})
    }
    return [
        e["name"]
        for e in trace["traceEvents"]
        if e.get("cat") == "kernel" and e.get("args", {}).get("External id") not in ops
    ]


def op_links(trace: Dict[str, Any]) -> collections.Counter:
    """(kernel, copy or set name, the name of the op its ``External id`` names) counted."""
    ops = {
        e["args"]["External id"]: e["name"]
        for e in trace["traceEvents"]
        if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})
    }
    return collections.Counter(
        (e["name"], ops.get(e.get("args", {}).get("External id")))
        for e in trace["traceEvents"]
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e.get("ph") == "X"
    )


def compare_links(ours: Dict[str, Any], external: Dict[str, Any]) -> Dict[str, Any]:
    a, b = op_links(ours), op_links(external)
    differ = {f"{k[0]} <- {k[1]}": (a.get(k, 0), b.get(k, 0)) for k in set(a) | set(b)
              if a.get(k, 0) != b.get(k, 0)}
    return {"links": sum(a.values()), "differ": differ}


def launch_to_kernel_us(trace: Dict[str, Any]) -> Dict[str, float]:
    """From each kernel's launch (its runtime call, by correlation) to its start: never
    negative when the device clock is mapped right."""
    launches = {
        e["args"]["correlation"]: e["ts"]
        for e in trace["traceEvents"]
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    gaps = sorted(
        e["ts"] - launches[e["args"]["correlation"]]
        for e in trace["traceEvents"]
        if e.get("cat") == "kernel" and e.get("args", {}).get("correlation") in launches
    )
    return {"kernels": len(gaps), "min": gaps[0], "median": gaps[len(gaps) // 2], "max": gaps[-1]}


def runtime_off_host_rows(trace: Dict[str, Any]) -> List[str]:
    """Runtime calls whose thread row has no host op or range: each should sit on the row
    of the thread that made it."""
    host = {
        (e["pid"], e["tid"])
        for e in trace["traceEvents"]
        if e.get("cat") in ("cpu_op", "user_annotation")
    }
    return [
        f'{e["name"]} on {e["tid"]}'
        for e in trace["traceEvents"]
        if e.get("cat") == "cuda_runtime" and (e["pid"], e["tid"]) not in host
    ]


def device_rows(prof: Any) -> Dict[Tuple[str, str], Tuple[int, float, float]]:
    """Rows by (key, device type): a user range has a host row and a row of its projection
    onto the GPU (``gpu_user_annotation``), under one key."""
    rows = {}
    for row in prof.key_averages():
        where = str(getattr(row, "device_type", "")).rsplit(".", 1)[-1]
        rows[(row.key, where)] = (row.count, row.self_device_time_total, row.device_time_total)
    return rows


EXTERNAL = "OMNIPROF_CUPTI_EXTERNAL_CORRELATION=1"


def run_omniprof(model, batch, weight, steps, path, config=None) -> Tuple[Dict[str, Any], Any]:
    acts = [omniprof.ProfilerActivity.CPU, omniprof.ProfilerActivity.CUDA]
    with omniprof.profile(activities=acts, config=config) as prof:
        workload(model, batch, weight, steps)
    prof.export_chrome_trace(path)
    with open(path) as f:
        return json.load(f), prof


def run_torch(model, batch, weight, steps, path) -> Tuple[Dict[str, Any], Any]:
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        workload(model, batch, weight, steps)
    prof.export_chrome_trace(path)
    with open(path) as f:
        return json.load(f), prof


def compare_kernels(ours: Dict[str, Any], theirs: Dict[str, Any],
                    cats: Tuple[str, ...] = ("kernel",)) -> Dict[str, Any]:
    a, b = kernels(ours, cats), kernels(theirs, cats)
    counts_differ = {
        n: (len(a.get(n, [])), len(b.get(n, []))) for n in set(a) | set(b)
        if len(a.get(n, [])) != len(b.get(n, []))
    }
    times = {}
    for name in set(a) & set(b):
        ta, tb = sum(a[name]), sum(b[name])
        times[name] = {"omniprof_us": ta, "torch_us": tb, "ratio": ta / tb if tb else None}
    over = {n: t for n, t in times.items() if t["ratio"] is None or abs(t["ratio"] - 1) > TOLERANCE}
    return {
        "names": len(set(a) | set(b)),
        "kernels_omniprof": sum(len(v) for v in a.values()),
        "kernels_torch": sum(len(v) for v in b.values()),
        "counts_differ": counts_differ,
        "time_per_name": times,
        "time_over_tolerance": over,
        "total_ratio": sum(sum(v) for v in a.values()) / max(sum(sum(v) for v in b.values()), 1e-9),
    }


def compare_rows(ours: Any, theirs: Any) -> Dict[str, Any]:
    """Device columns row by row. A user range's projection onto the GPU spans from its
    first device work to its last, idle gaps included, so it measures how fast the host
    launched; those rows are reported apart (``projection``), beside the host step times."""
    a, b = device_rows(ours), device_rows(theirs)
    ranges = {r.key for r in theirs.key_averages() if r.is_user_annotation}
    total = sum(v[1] for v in b.values()) or 1.0
    compared, over, missing, projection = {}, {}, [], {}
    for key, (count, self_dev, dev) in b.items():
        if self_dev < 0.005 * total and dev < 0.005 * total:
            continue
        if key not in a:
            missing.append(" @ ".join(key))
            continue
        mine = a[key]
        entry = {
            "count": [mine[0], count],
            "self_device_us": [mine[1], self_dev],
            "device_total_us": [mine[2], dev],
        }
        if key[0] in ranges and key[1] != "CPU":
            projection[" @ ".join(key)] = entry
            continue
        compared[" @ ".join(key)] = entry
        for got, want in ((mine[1], self_dev), (mine[2], dev)):
            if want > 0 and abs(got / want - 1) > TOLERANCE:
                over[" @ ".join(key)] = entry
    return {"rows_compared": len(compared), "rows": compared, "over_tolerance": over,
            "missing": missing, "projection": projection}


def overhead(ops: int, runs: int, device: str = "cuda") -> Dict[str, Any]:
    """ns per ``x.add_(1)`` (on ``device``) with no profiler and with each profiler recording
    CPU and CUDA."""
    x = torch.zeros(16, device=device)

    def loop() -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(ops):
            x.add_(1)
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / ops * 1e9

    cpu_cuda_torch = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    cpu_cuda_omni = [omniprof.ProfilerActivity.CPU, omniprof.ProfilerActivity.CUDA]
    samples: Dict[str, List[float]] = {
        "none": [], "torch": [], "omniprof": [], "omniprof_external": []}
    loop()
    for _ in range(runs):
        samples["none"].append(loop())
        with torch.profiler.profile(activities=cpu_cuda_torch):
            samples["torch"].append(loop())
        with omniprof.profile(activities=cpu_cuda_omni):
            samples["omniprof"].append(loop())
        with omniprof.profile(activities=cpu_cuda_omni, config=EXTERNAL):
            samples["omniprof_external"].append(loop())
    med = {k: sorted(v)[len(v) // 2] for k, v in samples.items()}
    added_torch = med["torch"] - med["none"]
    added_omni = med["omniprof"] - med["none"]
    added_external = med["omniprof_external"] - med["none"]
    return {"ns_per_op": samples, "median_ns_per_op": med, "added_ns_torch": added_torch,
            "added_ns_omniprof": added_omni, "added_ns_omniprof_external": added_external,
            "omniprof_share_of_torch": added_omni / added_torch if added_torch > 0 else None,
            "omniprof_external_share_of_torch":
                added_external / added_torch if added_torch > 0 else None}


def step_cost(model, batch, weight, steps: int, rounds: int) -> Dict[str, Any]:
    """Milliseconds per workload step: no profiler, each profiler with CPU only and with
    CPU and CUDA, alternating, the median of ``rounds``."""
    tp, op = torch.profiler.ProfilerActivity, omniprof.ProfilerActivity
    configs: Dict[str, Callable[[], Any]] = {
        "none": lambda: None,
        "torch_cpu": lambda: torch.profiler.profile(activities=[tp.CPU]),
        "torch_cpu_cuda": lambda: torch.profiler.profile(activities=[tp.CPU, tp.CUDA]),
        "omniprof_cpu": lambda: omniprof.profile(activities=[op.CPU]),
        "omniprof_cpu_cuda": lambda: omniprof.profile(activities=[op.CPU, op.CUDA]),
    }
    samples: Dict[str, List[float]] = {k: [] for k in configs}
    for _ in range(rounds):
        for name, make in configs.items():
            prof = make()
            if prof is not None:
                prof.__enter__()
            workload(model, batch, weight, 2)
            t0 = time.perf_counter()
            workload(model, batch, weight, steps)
            samples[name].append((time.perf_counter() - t0) / steps * 1e3)
            if prof is not None:
                prof.__exit__(None, None, None)
    med = {k: sorted(v)[len(v) // 2] for k, v in samples.items()}
    return {"ms_per_step": samples, "median_ms_per_step": med}


def sync_events(model, batch, weight, path: str) -> Dict[str, Any]:
    """With ``enable_cuda_sync_events=True``: the synchronizations in the written trace, by
    name, how many lack their ``cuda_sync_kind``, how many ``Stream Sync`` events are off
    their stream's sync row (``tid`` = stream + 1,000,000, as Kineto writes them), and how
    many waits on an event name a ``cudaEventRecord`` call of the trace as the record they
    waited for (``wait_on_cuda_event_record_corr_id``, which HTA's critical path joins on)."""
    from torch._C._profiler import _ExperimentalConfig

    acts = [omniprof.ProfilerActivity.CPU, omniprof.ProfilerActivity.CUDA]
    config = _ExperimentalConfig(enable_cuda_sync_events=True)
    with omniprof.profile(activities=acts, experimental_config=config) as prof:
        workload(model, batch, weight, 3)
        # A side stream waits for an event the current stream records, and the host for it.
        x = torch.ones(1 << 20, device="cuda")
        x.add_(1)
        done = torch.cuda.Event()
        done.record()
        side = torch.cuda.Stream()
        side.wait_event(done)
        with torch.cuda.stream(side):
            x.mul_(2)
        done.synchronize()
        torch.cuda.current_stream().synchronize()
        side.synchronize()
    prof.export_chrome_trace(path)
    with open(path) as f:
        trace = json.load(f)
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    waits = [e for e in events if e.get("cat") == "cuda_sync"]
    records = {e["args"]["correlation"] for e in events
               if e.get("cat") == "cuda_runtime" and e["name"].startswith("cudaEventRecord")}
    on_events = [e for e in waits if e["name"] in ("Event Sync", "Stream Wait Event")]
    return {
        "sync_events": len(waits),
        "names": dict(collections.Counter(e["name"] for e in waits)),
        "without_kind": sum(1 for e in waits if "cuda_sync_kind" not in e.get("args", {})),
        "stream_syncs_off_their_row": sum(
            1 for e in waits
            if e["name"] == "Stream Sync" and e["tid"] != e["args"]["stream"] + 1_000_000),
        "event_waits": len(on_events),
        "event_waits_naming_a_record": sum(
            1 for e in on_events if e["args"].get("wait_on_cuda_event_record_corr_id") in records),
    }


def refused_beside_torch() -> str:
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts):
        try:
            with omniprof.profile(activities=[omniprof.ProfilerActivity.CUDA]):
                pass
        except omniprof.ProfilerError as e:
            return str(e)
    return ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--overhead-ops", type=int, default=20000)
    parser.add_argument("--overhead-runs", type=int, default=5)
    parser.add_argument("--step-rounds", type=int, default=9)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    report: Dict[str, Any] = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0),
        "cuda_unavailable_reason": omniprof._native.cuda_unavailable_reason(),
        "supported_activities": sorted(a.name for a in omniprof.supported_activities()),
    }
    failures: List[str] = []

    def stage(name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.time()
        try:
            value = fn()
            report[name] = value
            return value
        except Exception:
            report[name] = {"error": traceback.format_exc()}
            failures.append(f"{name} raised")
            print(traceback.format_exc(), file=sys.stderr)
            return None
        finally:
            print(f"[{name}] {time.time() - t0:.1f} s", flush=True)

    model, batch, weight = build()
    workload(model, batch, weight, 5)
    out = lambda name: os.path.join(args.out, name)  # noqa: E731
    first = stage("omniprof_first", lambda: run_omniprof(model, batch, weight, args.steps,
                                                         out("omniprof_first.json")))
    theirs = stage("torch", lambda: run_torch(model, batch, weight, args.steps, out("torch.json")))
    ours = stage("omniprof", lambda: run_omniprof(model, batch, weight, args.steps,
                                                  out("omniprof.json")))
    for key in ("omniprof_first", "torch", "omniprof"):
        if isinstance(report.get(key), tuple):
            report[key] = "ok"
    for key, run in (("omniprof_first", first), ("torch", theirs), ("omniprof", ours)):
        if run:
            missing = stage(f"kinds_missing_{key}", lambda: kinds_missing(run[0]))
            if missing:
                failures.append(f"{key}: no {', '.join(missing)} events in the trace")
    if ours and theirs:
        k = stage("kernels", lambda: compare_kernels(ours[0], theirs[0]))
        if k and (k["counts_differ"] or k["time_over_tolerance"] or k["names"] == 0):
            failures.append("kernels differ")
        if first:
            k1 = stage("kernels_first", lambda: compare_kernels(first[0], theirs[0]))
            if k1 and (k1["counts_differ"] or k1["names"] == 0):
                failures.append("kernels of the first omniprof run differ")
        t = stage("transfers", lambda: compare_kernels(ours[0], theirs[0],
                                                       ("gpu_memcpy", "gpu_memset")))
        if t and (t["counts_differ"] or t["names"] == 0):
            failures.append("copies and sets differ")
        unlinked = stage("unlinked_kernels", lambda: unlinked_kernels(ours[0]))
        if unlinked:
            failures.append(f"{len(unlinked)} kernels not linked to an op")
        external = stage("omniprof_external", lambda: run_omniprof(
            model, batch, weight, args.steps, out("omniprof_external.json"), EXTERNAL))
        if external:
            report["omniprof_external"] = "ok"
            links = stage("links_by_path", lambda: compare_links(ours[0], external[0]))
            if links and (links["differ"] or links["links"] == 0):
                failures.append("links by thread and time differ from the external correlation's")
        stray = stage("runtime_off_host_rows", lambda: runtime_off_host_rows(ours[0]))
        if stray:
            failures.append(f"{len(stray)} runtime calls off their thread's row")
        for key, run in (("launch_to_kernel_first", first), ("launch_to_kernel", ours),
                         ("launch_to_kernel_torch", theirs)):
            if run:
                gaps = stage(key, lambda: launch_to_kernel_us(run[0]))
                if gaps and gaps["min"] < 0:
                    failures.append(f"{key}: a kernel starts before its launch")
        stage("unlinked_kernels_torch", lambda: len(unlinked_kernels(theirs[0])))
        rows = stage("key_averages", lambda: compare_rows(ours[1], theirs[1]))
        if rows and (rows["over_tolerance"] or rows["missing"] or rows["rows_compared"] == 0):
            failures.append("key_averages device columns differ")
        stage("table_omniprof", lambda: ours[1].key_averages().table(
            sort_by="device_time_total", row_limit=15))
        stage("table_torch", lambda: theirs[1].key_averages().table(
            sort_by="device_time_total", row_limit=15))
        stage("metadata", lambda: {k: v for k, v in ours[0].items() if k != "traceEvents"})
    refusal = stage("refusal", refused_beside_torch)
    if not refusal:
        failures.append("a CUDA session beside torch.profiler was not refused")
    stage("overhead", lambda: overhead(args.overhead_ops, args.overhead_runs))
    stage("overhead_cpu_op", lambda: overhead(args.overhead_ops, args.overhead_runs, "cpu"))
    stage("step_cost", lambda: step_cost(model, batch, weight, 40, args.step_rounds))
    waits = stage("sync_events", lambda: sync_events(model, batch, weight,
                                                      out("omniprof_sync.json")))
    if waits is not None and (not waits["sync_events"] or "Context Sync" not in waits["names"]
                              or waits["without_kind"]):
        failures.append("sync events: none, no Context Sync, or some without cuda_sync_kind")
    if waits is not None and ("Stream Sync" not in waits["names"]
                              or waits["stream_syncs_off_their_row"]):
        failures.append("sync events: no Stream Sync, or one off its stream's sync row")
    if waits is not None and waits["event_waits_naming_a_record"] < 2:
        failures.append("sync events: fewer than 2 waits on an event name its cudaEventRecord")
    report["failures"] = failures
    with open(out("report.json"), "w") as f:
        json.dump(report, f, indent=1, default=str)
    print(json.dumps({k: report.get(k) for k in ("device", "torch", "failures")}, indent=1))
    for key in ("table_omniprof", "table_torch"):
        print(report.get(key))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
