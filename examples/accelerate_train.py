#!/usr/bin/env python3
"""Hugging Face Accelerate with a stoker.Loader.

    bin/stoker mkdata --out /tmp/demo --n 2000 --classes 10
    bin/stoker serve --listen 127.0.0.1:7070 --dataset demo=/tmp/demo &
    accelerate launch examples/accelerate_train.py --target 127.0.0.1:7070 --dataset demo
    # or: python examples/accelerate_train.py ... (one process)

``accelerator.prepare()`` wraps DataLoaders only; anything else it hands
back as it was, so a Loader may go through it but needs no preparing: make
it after the Accelerator (rank and world size then come from the process
group Accelerate started), move its batches to ``accelerator.device``, and
register it for checkpointing, so that ``save_state``/``load_state``
carry its position. Do not wrap a ``stoker.Dataset`` in a DataLoader for
prepare(): Accelerate would shard batches the server already sharded.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile

import torch
import torch.nn as nn
from accelerate import Accelerator

import stoker
from stoker import transforms as T


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="127.0.0.1:7070")
    ap.add_argument("--dataset", default="demo")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--cpu", action="store_true", help="train on the CPU even with a GPU")
    ap.add_argument("--save-at", type=int, help="save_state to --state-dir after this many steps, and stop")
    ap.add_argument("--state-dir", default=os.path.join(tempfile.gettempdir(), "stoker-accelerate-state"),
                    help="where --save-at saves and --resume loads (default: under the system's temporary directory, "
                    "never the directory the example runs in)")
    ap.add_argument("--resume", action="store_true", help="load_state from --state-dir first")
    ap.add_argument("--report", help="write the steps' batch indices here (JSON)")
    a = ap.parse_args()

    accelerator = Accelerator(cpu=a.cpu)
    loader = stoker.Loader(a.target, a.dataset, transform=T.Compose([T.RandomResizedCrop(32), T.RandomHorizontalFlip()]),
                           batch_size=a.batch_size, return_indices=True)
    classes = max(len(next(d for d in stoker.list_datasets(a.target) if d.name == a.dataset).classes), 2)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(8, classes))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    model, opt, same = accelerator.prepare(model, opt, loader)
    assert same is loader  # handed back untouched
    accelerator.register_for_checkpointing(loader)
    if a.resume:
        accelerator.load_state(a.state_dir)  # the loader resumes its epoch where it was saved

    seen, steps = [], 0  # (epoch, the batch's indices) of every step
    while loader.epoch < a.epochs:  # the loader counts the epochs, also across a resume
        epoch = loader.epoch
        for images, labels, indices in loader:
            images, labels = images.to(accelerator.device), labels.to(accelerator.device)
            loss = nn.functional.cross_entropy(model(stoker.normalize(images)), labels)
            opt.zero_grad()
            accelerator.backward(loss)
            opt.step()
            seen.append((epoch, indices.tolist()))
            steps += 1
            if steps == a.save_at:
                accelerator.save_state(a.state_dir)
                break
        if steps == a.save_at:
            break
        accelerator.print(f"epoch {epoch}: first batch indices {next(ix for e, ix in seen if e == epoch)}")
    loader.close()
    if a.report and accelerator.is_main_process:
        with open(a.report, "w") as f:
            json.dump(seen, f)


if __name__ == "__main__":
    main()
