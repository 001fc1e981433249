"""A custom loop for health tests: each rank steps `--pace` s and reports with `nbtoolkit.log` (every rank).

`--collective`: the ranks all_reduce a tensor every step over gloo (torchrun's rendezvous), as data
parallel training does. `--slow-rank R --slow-s S`: rank R sleeps S more per step (a straggler).
`--block-rank R --block-at N`: rank R blocks forever in `wait_for_data` before step N's collective,
so the other ranks wait in all_reduce: a hang.
"""

import argparse
import os
import time

import nbtoolkit

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--pace", type=float, default=0.05)
parser.add_argument("--collective", action="store_true")
parser.add_argument("--slow-rank", type=int)
parser.add_argument("--slow-s", type=float, default=0.0)
parser.add_argument("--block-rank", type=int)
parser.add_argument("--block-at", type=int, default=-1)
parser.add_argument("--local_rank", type=int, help="DeepSpeed's launcher adds it")
args = parser.parse_args()
rank = int(os.environ.get("RANK", "0"))


def wait_for_data() -> None:
    while True:
        time.sleep(1)


def all_reduce_step(tensor) -> None:
    import torch.distributed as dist

    dist.all_reduce(tensor)


if args.collective:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    tensor = torch.ones(4)
for step in range(1, args.steps + 1):
    time.sleep(args.pace + (args.slow_s if rank == args.slow_rank else 0.0))
    if rank == args.block_rank and step == args.block_at:
        wait_for_data()
    if args.collective:
        all_reduce_step(tensor)
    nbtoolkit.log(step=step, loss=1.0 / step)
