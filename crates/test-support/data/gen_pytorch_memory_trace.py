"""Writes pytorch-2.15-cpu-memory-trace.json and the tables PyTorch prints for it.

Run with PyTorch 2.15 (CPU): `python gen_pytorch_memory_trace.py DIR`. PyTorch's Chrome
trace does not carry the ops' FLOPs, so each op's `flops` (PyTorch's FunctionEvent.flops) is
added to its args by `External id`. `events().table()` fails in PyTorch when `[memory]`
events (whose flops are None) are listed with_flops; they are given 0 first.
"""
import json
import os
import sys

import torch
from torch.profiler import profile, ProfilerActivity, record_function

out = sys.argv[1]
torch.manual_seed(0)


def work():
    a = torch.randn(64, 64)
    b = torch.randn(64, 64)
    with record_function("block"):
        c = torch.mm(a, b)
        d = c + a
        e = torch.nn.functional.relu(d)
        f = torch.matmul(e, b)
    del c
    g = torch.zeros(1000)
    del g
    return f.sum()


work()
with profile(
    activities=[ProfilerActivity.CPU],
    profile_memory=True,
    with_flops=True,
    record_shapes=True,
) as prof:
    for _ in range(2):
        work()
path = os.path.join(out, "pytorch-2.15-cpu-memory-trace.json")
prof.export_chrome_trace(path)
flops = {e.id: e.flops for e in prof.events() if e.flops}
with open(path) as f:
    trace = json.load(f)
for ev in trace["traceEvents"]:
    eid = ev.get("args", {}).get("External id")
    if ev.get("cat") == "cpu_op" and eid in flops:
        ev["args"]["flops"] = flops[eid]
with open(path, "w") as f:
    json.dump(trace, f, indent=1)


def write(name, text):
    with open(os.path.join(out, name), "w") as f:
        f.write(text)


ka = prof.key_averages()
write("pytorch-2.15-cpu-memory-table.txt", ka.table())
write(
    "pytorch-2.15-cpu-memory-table-top.txt",
    ka.table(
        sort_by="self_cpu_memory_usage",
        row_limit=8,
        header="HEAD",
        top_level_events_only=True,
    ),
)
write("pytorch-2.15-cpu-memory-table-flops.txt", ka.table(sort_by="flops"))
events = prof.events()
for e in events:
    if e.flops is None:
        e.flops = 0
write("pytorch-2.15-cpu-memory-events.txt", events.table())
t = ka.total_average()
print(t.key, t.count, t.is_async, t.flops, t.cpu_memory_usage, t.self_cpu_memory_usage)
