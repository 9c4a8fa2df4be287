#!/usr/bin/env python3
"""Plain PyTorch loops: for-loops, zip(range(n), loader), and break.

    bin/stoker mkdata --out /tmp/demo --n 2000 --classes 10
    bin/stoker serve --listen 127.0.0.1:7070 --dataset demo=/tmp/demo &
    python examples/plain_loop.py --target 127.0.0.1:7070 --dataset demo

Each iteration of a Loader is one epoch, and each epoch has a new order and
new augmentations, however the loop ends: read to its end, stopped after
len(loader) batches (zip), or left early (break). set_epoch is optional;
load_state_dict resumes a left epoch where it stopped.
"""
from __future__ import annotations

import argparse
import json

import torch
import torch.nn as nn

import stoker
from stoker import transforms as T


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="127.0.0.1:7070")
    ap.add_argument("--dataset", default="demo")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--report", help="write each epoch's batch indices here (JSON)")
    a = ap.parse_args()

    loader = stoker.Loader(a.target, a.dataset, transform=T.Compose([T.RandomResizedCrop(32), T.RandomHorizontalFlip()]),
                           batch_size=a.batch_size, return_indices=True)
    classes = max(len(next(d for d in stoker.list_datasets(a.target) if d.name == a.dataset).classes), 2)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(8, classes))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(images: torch.Tensor, labels: torch.Tensor) -> None:
        loss = nn.functional.cross_entropy(model(stoker.normalize(images)), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()

    report = []  # (how the loop ran, the epoch it ran, its batches' indices)
    with loader:  # closes the stream at the end
        # 1. A for loop reading the epoch to its end: epoch 0.
        got = []
        for images, labels, indices in loader:
            step(images, labels)
            got.append(indices.tolist())
        report.append(("for", loader.job_info.epoch, got))

        # 2. zip(range(len(loader)), loader) takes len(loader) batches and
        #    never asks for more (as Lightning and Accelerate do): epoch 1.
        got = []
        for _, (images, labels, indices) in zip(range(len(loader)), loader):
            step(images, labels)
            got.append(indices.tolist())
        report.append(("zip", loader.job_info.epoch, got))

        # 3. Two steps, then break: epoch 2 is over for the loader...
        got = []
        for i, (images, labels, indices) in enumerate(loader):
            step(images, labels)
            got.append(indices.tolist())
            if i == 1:
                break
        report.append(("break", loader.job_info.epoch, got))
        # ...a state_dict now would resume it at batch 2 (load_state_dict),
        # and the next iteration runs epoch 3.
        state = loader.state_dict()
        print(f"after the break: epoch {state['epoch']}, {state['batches_consumed']} batches taken")

        got = []
        for images, labels, indices in loader:
            step(images, labels)
            got.append(indices.tolist())
        report.append(("after break", loader.job_info.epoch, got))

    for how, epoch, batches in report:
        print(f"{how:>12}: epoch {epoch}, {len(batches)} batches, first indices {batches[0][:6]}")
    if a.report:
        with open(a.report, "w") as f:
            json.dump(report, f)


if __name__ == "__main__":
    main()
