#!/usr/bin/env python3
"""Writes a large synthetic Kineto trace for benchmarking `omniprof summary`.

The trace looks like a PyTorch CUDA run: several host threads, each running blocks of nested
ops (a `block_<n>` user range holding `aten::linear` -> `aten::t` -> `aten::transpose` ->
`aten::as_strided`, `aten::addmm`, `aten::relu` -> `aten::clamp_min`, and the same-named
`aten::sum` -> `aten::sum` pair), with PyTorch's `args`. The three compute ops launch a kernel
through `cudaLaunchKernel`; the kernels run on one device stream and are linked to their op by
`External id`. Standard library only; the output is deterministic for given arguments.

With `--rank R` the trace is one rank of a distributed job: its header says so
(`distributedInfo`), its jitter is seeded by the rank, its device work lies on whole
microseconds (so that HTA's figures, which it computes in microseconds, compare exactly),
and it has `--steps` `ProfilerStep#N` ranges (on a thread of their own, one after the other,
each over an equal share of the blocks, written before the events they hold), each ending
with an NCCL all-reduce kernel on a second stream that overlaps the step's last compute
kernels; `--slow-steps 1,3 --slow-ms 4` makes the rank stall 4 ms before the all-reduce of
steps 1 and 3.

    python3 scripts/gen_trace.py big.json --ops 1000000 --threads 4
    for r in 0 1 2 3; do python3 scripts/gen_trace.py job/rank$r.json --rank $r --world-size 4; done
"""

import argparse
import io
import random

BASE_NS = 1_790_857_026_000_000_000
PID = 4242
DEVICE = 0
STREAM = 7
COMM_STREAM = 13
ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"


def us(ns):
    """Nanoseconds as Kineto writes microseconds: exactly three decimals."""
    return f"{ns // 1000}.{ns % 1000:03d}"


class Writer:
    def __init__(self, out):
        self.out = out
        self.first = True
        self.correlation = 0
        self.launch = 0

    def event(self, text):
        self.out.write("\n  " if self.first else ",\n  ")
        self.first = False
        self.out.write(text)

    def next_id(self):
        self.correlation += 1
        return self.correlation

    def op(self, cat, name, tid, start, dur, dims):
        ext = self.next_id()
        args = f'"External id": {ext}, "Record function id": 0'
        if dims is not None:
            types = ", ".join('"float"' if d else '""' for d in dims)
            strides = ", ".join(strides_json(d) for d in dims)
            args += (
                f', "Concrete Inputs": [{", ".join(chr(34) * 2 for _ in dims)}]'
                f', "Input type": [{types}], "Input Strides": [{strides}]'
                f', "Input Dims": {dims_json(dims)}'
            )
        args += f', "Ev Idx": {ext - 1}'
        self.event(
            f'{{"ph": "X", "cat": "{cat}", "name": "{name}", "pid": {PID}, "tid": {tid}, '
            f'"ts": {us(start)}, "dur": {us(dur)}, "args": {{{args}}}}}'
        )
        return ext

    def kernel(self, tid, ext, launch_at, kernel_at, kernel_ns, name):
        self.launch += 1
        corr = self.launch
        self.event(
            f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": {PID}, '
            f'"tid": {tid}, "ts": {us(launch_at)}, "dur": {us(2_500)}, '
            f'"args": {{"External id": {ext}, "cbid": 211, "correlation": {corr}}}}}'
        )
        self.event(
            f'{{"ph": "s", "id": {corr}, "pid": {PID}, "tid": {tid}, "ts": {us(launch_at)}, '
            f'"cat": "ac2g", "name": "ac2g"}}'
        )
        self.event(
            f'{{"ph": "X", "cat": "kernel", "name": "{name}", "pid": {DEVICE}, '
            f'"tid": {STREAM}, "ts": {us(kernel_at)}, "dur": {us(kernel_ns)}, '
            f'"args": {{"External id": {ext}, "device": {DEVICE}, "stream": {STREAM}, '
            f'"correlation": {corr}, "grid": [128, 1, 1], "block": [256, 1, 1]}}}}'
        )
        self.event(
            f'{{"ph": "f", "id": {corr}, "pid": {DEVICE}, "tid": {STREAM}, '
            f'"ts": {us(kernel_at)}, "cat": "ac2g", "name": "ac2g", "bp": "e"}}'
        )


def strides_json(dims):
    """Contiguous strides of a shape."""
    strides, step = [], 1
    for d in reversed(dims):
        strides.insert(0, step)
        step *= d
    return "[" + ", ".join(map(str, strides)) + "]"


def dims_json(dims):
    return "[" + ", ".join("[" + ", ".join(map(str, d)) + "]" for d in dims) + "]"


OPS_PER_BLOCK = 10


def whole_us(ns, on):
    """`ns` rounded up to whole microseconds when `on`."""
    return -(-ns // 1000) * 1000 if on else ns


def block(w, rng, tid, index, t, device_clock, round_us=False):
    """One block starting at `t` ns on thread `tid`; returns (end, device clock)."""
    n = 64 * (1 + index % 4)
    mat = [n, n]

    def jitter(ns):
        return ns + rng.randrange(0, ns // 4 + 1)

    start = t
    t += jitter(3_000)
    lin_start = t
    t += jitter(1_000)
    t_start = t
    tr_start = t + jitter(500)
    as_start = tr_start + jitter(400)
    as_dur = jitter(800)
    tr_dur = as_start + as_dur + jitter(300) - tr_start
    t_dur = tr_start + tr_dur + jitter(300) - t_start
    t = t_start + t_dur + jitter(500)
    mm_start = t
    mm_dur = jitter(20_000)
    t = mm_start + mm_dur + jitter(500)
    lin_dur = t - lin_start
    t += jitter(1_000)
    relu_start = t
    cm_start = t + jitter(300)
    cm_dur = jitter(8_000)
    relu_dur = cm_start + cm_dur + jitter(300) - relu_start
    t = relu_start + relu_dur + jitter(1_000)
    sum_start = t
    inner_start = t + jitter(200)
    inner_dur = jitter(6_000)
    sum_dur = inner_start + inner_dur + jitter(200) - sum_start
    t = sum_start + sum_dur + jitter(2_000)
    # (cat, name, start, dur, input dims, kernel launched), parents before children.
    spans = [
        ("user_annotation", f"block_{index % 8}", start, t - start, None, None),
        ("cpu_op", "aten::linear", lin_start, lin_dur, [mat, mat, [n]], None),
        ("cpu_op", "aten::t", t_start, t_dur, [mat], None),
        ("cpu_op", "aten::transpose", tr_start, tr_dur, [mat, [], []], None),
        ("cpu_op", "aten::as_strided", as_start, as_dur, [mat, [], [], []], None),
        ("cpu_op", "aten::addmm", mm_start, mm_dur, [[n], mat, mat, [], []], "gemm_kernel"),
        ("cpu_op", "aten::relu", relu_start, relu_dur, [mat], None),
        ("cpu_op", "aten::clamp_min", cm_start, cm_dur, [mat, []], "elementwise_kernel"),
        ("cpu_op", "aten::sum", sum_start, sum_dur, [mat, []], None),
        ("cpu_op", "aten::sum", inner_start, inner_dur, [mat, [], [], []], "reduce_kernel"),
    ]
    assert len(spans) == OPS_PER_BLOCK
    for cat, name, s, d, dims, kernel in spans:
        ext = w.op(cat, name, tid, s, d, dims)
        if kernel:
            launch_at = s + d // 2
            device_clock = whole_us(max(device_clock, launch_at + 3_000), round_us)
            kernel_ns = whole_us(jitter(d // 2), round_us)
            w.kernel(tid, ext, launch_at, device_clock, kernel_ns, kernel)
            device_clock += whole_us(kernel_ns + 500, round_us)
    return t, device_clock


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output")
    parser.add_argument("--ops", type=int, default=1_000_000, help="host ops (default 1M)")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rank", type=int, help="write one rank of a job (see above)")
    parser.add_argument("--world-size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10, help="steps of a rank's trace")
    parser.add_argument(
        "--slow-steps", default="", help="steps (0, 1, ...; comma-separated) this rank is slow in"
    )
    parser.add_argument("--slow-ms", type=float, default=0, help="how much slower (ms)")
    args = parser.parse_args()
    ranked = args.rank is not None
    slow_steps = {int(n) for n in args.slow_steps.split(",") if n}
    slow_ns = int(args.slow_ms * 1_000_000)

    rng = random.Random(args.seed + (args.rank or 0) * 7919)
    threads = [PID + i for i in range(args.threads)]
    clocks = {tid: 1_000_000 for tid in threads}
    device_clock = 0
    blocks = max(1, args.ops // OPS_PER_BLOCK)
    with open(args.output, "w", buffering=1 << 20) as out:
        out.write(
            '{\n  "schemaVersion": 1,\n  "deviceProperties": [],\n'
            '  "trace_id": "0123456789ABCDEF",\n  "displayTimeUnit": "ms",\n'
        )
        if ranked:
            out.write(
                f'  "distributedInfo": {{"backend": "nccl", "rank": {args.rank}, '
                f'"world_size": {args.world_size}}},\n'
            )
        out.write(f'  "baseTimeNanoseconds": {BASE_NS},\n  "traceEvents": [')
        w = Writer(out)
        if ranked:
            # HTA keeps correlation ids in the smallest integer type that holds them, then
            # fails to store event indices beyond it there: ids as large as real ones.
            w.launch = 1_000_000
        for tid in threads:
            w.event(
                f'{{"ph": "M", "name": "thread_name", "ts": 1000.000, "pid": {PID}, '
                f'"tid": {tid}, "args": {{"name": "thread {tid} (python)"}}}}'
            )
        per_step = max(1, blocks // max(1, args.steps))
        steps = []  # (start, end) of each step
        step_start = min(clocks.values())
        step_tid = PID + len(threads)
        if ranked:
            # A step's events wait here until its end is known: its range comes first, as
            # PyTorch writes events, in order of start.
            w.out = io.StringIO()
        for i in range(blocks):
            tid = threads[i % len(threads)]
            clocks[tid], device_clock = block(w, rng, tid, i, clocks[tid], device_clock, ranked)
            if ranked and ((i + 1) % per_step == 0 or i + 1 == blocks) and len(steps) < args.steps:
                if len(steps) in slow_steps:
                    # The rank stalls (sleeps) before joining the all-reduce.
                    clocks = {t: c + slow_ns for t, c in clocks.items()}
                    device_clock += slow_ns
                # The step's all-reduce starts before its last kernel ends.
                comm_at = whole_us(device_clock - 20_000, True)
                comm_ns = whole_us(40_000 + rng.randrange(0, 20_000), True)
                w.event(
                    f'{{"ph": "X", "cat": "kernel", "name": "{ALL_REDUCE}", "pid": {DEVICE}, '
                    f'"tid": {COMM_STREAM}, "ts": {us(comm_at)}, "dur": {us(comm_ns)}, '
                    f'"args": {{"device": {DEVICE}, "stream": {COMM_STREAM}}}}}'
                )
                device_clock = max(device_clock, comm_at + comm_ns)
                step_end = max(max(clocks.values()), device_clock)
                held, w.out = w.out, out
                w.event(
                    f'{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{len(steps)}", '
                    f'"pid": {PID}, "tid": {step_tid}, "ts": {us(step_start)}, '
                    f'"dur": {us(step_end - step_start)}, "args": {{"External id": {w.next_id()}}}}}'
                )
                out.write(held.getvalue())
                w.out = io.StringIO() if len(steps) + 1 < args.steps else out
                steps.append((step_start, step_end))
                step_start = step_end
        if w.out is not out:
            out.write(w.out.getvalue())
            w.out = out
        end = max(max(clocks.values()), device_clock) + 1_000
        w.event(
            f'{{"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", '
            f'"ts": {us(end)}}}'
        )
        out.write('\n  ],\n  "traceName": "synthetic.pt.trace.json"\n}\n')


if __name__ == "__main__":
    main()
