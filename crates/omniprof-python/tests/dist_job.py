"""A distributed training job on the CPU, profiled by omniprof on every rank, for the tests.

``WORLD`` processes (``torch.multiprocessing``, the gloo backend on localhost) train a small
model: forward, backward, one ``all_reduce`` of the flattened gradients, SGD step. Each rank
profiles one warm-up step and ``STEPS`` active steps (``omniprof.schedule``) and writes its
trace to ``OUT/rank<R>.pt.trace.json``; the trace carries its rank in ``distributedInfo``, as
torch.profiler writes it. Rank ``--slow-rank`` sleeps ``--sleep-ms`` before its all-reduce
in the steps ``--slow-steps`` (the ``ProfilerStep#N`` numbers), so that the others wait for it
there. With ``--cycles N`` each rank instead profiles N cycles of one warm-up and ``STEPS``
active steps (torch.profiler's default ``repeat=0``) through ``tensorboard_trace_handler(OUT)``,
one trace per cycle, as a training script does.

    python dist_job.py OUT --world 4 --steps 4 --slow-rank 2 --slow-steps 2,4 --sleep-ms 150
"""

import argparse
import os
import socket
import time
from typing import List

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import omniprof

WARMUP = 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def train(
    rank: int, world: int, port: int, out: str, steps: int, slow_rank: int, slow_steps: List[int], sleep_s: float, cycles: int
) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(rank)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 32), torch.randint(0, 8, (64,))

    def export(prof: omniprof.profile) -> None:
        prof.export_chrome_trace(os.path.join(out, f"rank{rank}.pt.trace.json"))

    schedule = omniprof.schedule(wait=0, warmup=WARMUP, active=steps, repeat=0 if cycles else 1)
    handler = omniprof.tensorboard_trace_handler(out, worker_name=f"rank{rank}") if cycles else export
    with omniprof.profile(schedule=schedule, on_trace_ready=handler) as prof:
        for step in range((WARMUP + steps) * max(cycles, 1)):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            # PyTorch numbers the steps from 0: this one records as ProfilerStep#<step>.
            if rank == slow_rank and step in slow_steps:
                time.sleep(sleep_s)
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            flat = torch.cat([g.reshape(-1) for g in grads])
            dist.all_reduce(flat)
            flat /= world
            offset = 0
            for g in grads:
                g.copy_(flat[offset : offset + g.numel()].view_as(g))
                offset += g.numel()
            optimizer.step()
            optimizer.zero_grad()
            prof.step()
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--world", type=int, default=4)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--slow-rank", type=int, default=-1)
    parser.add_argument("--slow-steps", default="")
    parser.add_argument("--sleep-ms", type=float, default=0.0)
    parser.add_argument("--cycles", type=int, default=0)
    args = parser.parse_args()
    slow_steps = [int(n) for n in args.slow_steps.split(",") if n]
    os.makedirs(args.out, exist_ok=True)
    mp.spawn(
        train,
        args=(args.world, free_port(), args.out, args.steps, args.slow_rank, slow_steps, args.sleep_ms / 1000, args.cycles),
        nprocs=args.world,
        join=True,
    )


if __name__ == "__main__":
    main()
