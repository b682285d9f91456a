"""Writes pytorch-2.15-cpu-stack-trace.json and what PyTorch reports of its stacks.

Run with PyTorch 2.15 (CPU): `python gen_pytorch_stack_trace.py DIR`. The trace is recorded
with `with_stack=True` and a verbose experimental config, so that its ops carry `Call stack`
args beside the `python_function` events. As in gen_pytorch_memory_trace.py, each op's
`flops` (PyTorch's FunctionEvent.flops, which the Chrome trace does not carry) is added to
its args by `External id`. Files written (`pytorch-2.15-cpu-stack-` and):

- `trace.json`: the trace;
- `table.txt`: key_averages(group_by_stack_n=5).table(sort_by="self_cpu_time_total",
  row_limit=6, max_src_column_width=40);
- `table-wide.txt`: the same with the default `max_src_column_width` (75), as
  `omniprof summary --group-by-stack 5 --sort-by self_cpu_time_total --row-limit 6`
  prints it;
- `folded.txt`: export_stacks(path, "self_cpu_time_total").
"""
import json
import os
import sys

import torch
from torch._C._profiler import _ExperimentalConfig
from torch.profiler import ProfilerActivity, profile

out = sys.argv[1]
torch.manual_seed(0)
model = torch.nn.Linear(4, 4)


def forward(x):
    return model(x).sum()


def step(x):
    forward(x).backward()


x = torch.randn(2, 4)
step(x)
with profile(
    activities=[ProfilerActivity.CPU],
    with_stack=True,
    with_flops=True,
    experimental_config=_ExperimentalConfig(verbose=True),
) as prof:
    step(x)


def name(suffix):
    return os.path.join(out, f"pytorch-2.15-cpu-stack-{suffix}")


prof.export_chrome_trace(name("trace.json"))
flops = {e.id: e.flops for e in prof.events() if e.flops}
with open(name("trace.json")) as f:
    trace = json.load(f)
for ev in trace["traceEvents"]:
    eid = ev.get("args", {}).get("External id")
    if ev.get("cat") == "cpu_op" and eid in flops:
        ev["args"]["flops"] = flops[eid]
with open(name("trace.json"), "w") as f:
    json.dump(trace, f, indent=0)
averages = prof.key_averages(group_by_stack_n=5)
with open(name("table.txt"), "w") as f:
    f.write(averages.table(sort_by="self_cpu_time_total", row_limit=6, max_src_column_width=40))
with open(name("table-wide.txt"), "w") as f:
    f.write(averages.table(sort_by="self_cpu_time_total", row_limit=6))
prof.export_stacks(name("folded.txt"), "self_cpu_time_total")
