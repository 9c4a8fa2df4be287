#!/usr/bin/env python3
"""torchrun: DistributedDataParallel, each rank fed its share by stoker.

    bin/stoker mkdata --out /tmp/demo --n 2000 --classes 10
    bin/stoker serve --listen 127.0.0.1:7070 --dataset demo=/tmp/demo &
    python -m torch.distributed.run --standalone --nproc-per-node 2 \\
        examples/torchrun_ddp.py --target 127.0.0.1:7070 --dataset demo

The Loader takes rank and world size from the process group (torchrun's
RANK and WORLD_SIZE before it is initialized): the ranks get disjoint
shares of each epoch and the same number of batches, so DDP's collectives
never wait on a rank that ran out. gloo on the CPU here; on GPUs use nccl
and move the batches to the rank's device.
"""
from __future__ import annotations

import argparse
import json
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import stoker
from stoker import transforms as T


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="127.0.0.1:7070")
    ap.add_argument("--dataset", default="demo")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--out", help="write each rank's batch indices per epoch here (DIR/rank<R>.json)")
    a = ap.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    loader = stoker.Loader(a.target, a.dataset, transform=T.Compose([T.RandomResizedCrop(32), T.RandomHorizontalFlip()]),
                           batch_size=a.batch_size, return_indices=True)  # rank, world_size: the group's
    classes = max(len(next(d for d in stoker.list_datasets(a.target) if d.name == a.dataset).classes), 2)
    model = DDP(nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                              nn.Linear(8, classes)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    seen = []
    for epoch in range(a.epochs):
        loader.set_epoch(epoch)  # optional: without it each iteration runs the next epoch
        seen.append([])
        for images, labels, indices in loader:
            loss = nn.functional.cross_entropy(model(stoker.normalize(images)), labels)
            opt.zero_grad()
            loss.backward()  # all-reduces the gradients across the ranks
            opt.step()
            seen[-1].append(indices.tolist())
        print(f"rank {rank}/{loader.world_size} epoch {epoch}: {len(seen[-1])} batches, first {seen[-1][0][:6]}")
    loader.close()
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, f"rank{rank}.json"), "w") as f:
            json.dump({"rank": loader.rank, "world_size": loader.world_size, "epochs": seen}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
