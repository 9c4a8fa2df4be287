#!/usr/bin/env python3
"""PyTorch Lightning: a LightningDataModule whose train_dataloader is a stoker.Loader.

    bin/stoker mkdata --out /tmp/demo --n 2000 --classes 10
    bin/stoker serve --listen 127.0.0.1:7070 --dataset demo=/tmp/demo &
    python examples/lightning_train.py --target 127.0.0.1:7070 --dataset demo

Lightning needs nothing special: it stops each epoch after len(loader)
batches, calls ``loader.sampler.set_epoch(epoch)`` before each one, and saves
``loader.state_dict()`` in its checkpoints, so ``--resume CKPT`` continues a
mid-epoch checkpoint at the batch it was taken after. Checkpoints go to
``--ckpt-dir``, by default a new temporary directory (printed at the end).
The model (a tiny CNN on 32 px crops) is only there to have something to
train.
"""
from __future__ import annotations

import argparse
import json
import tempfile
from typing import Optional

import lightning as L
import torch
import torch.nn as nn

import stoker
from stoker import transforms as T


class StokerData(L.LightningDataModule):
    def __init__(self, target: str, dataset: str, batch_size: int, seed: int) -> None:
        super().__init__()
        self.target, self.dataset, self.batch_size, self.seed = target, dataset, batch_size, seed
        self.loader: Optional[stoker.Loader] = None

    def train_dataloader(self) -> stoker.Loader:
        # A new Loader replaces the last one (reload_dataloaders_every_n_epochs,
        # or a second fit): close that one's stream and channel now.
        self.teardown("fit")
        # rank and world_size come from the trainer's torch.distributed group.
        self.loader = stoker.Loader(self.target, self.dataset, transform=T.Compose([T.RandomResizedCrop(32),
                                                                                 T.RandomHorizontalFlip()]),
                                    batch_size=self.batch_size, seed=self.seed, return_indices=True)
        return self.loader

    def teardown(self, stage: str) -> None:
        # The end of fit: the Loader's stream and channel close here, while
        # gRPC's threads run, not in a finalizer at interpreter exit.
        if self.loader is not None:
            self.loader.close()
            self.loader = None


class TinyNet(L.LightningModule):
    def __init__(self, classes: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                 nn.Linear(8, classes))
        #: (epoch, batch_idx, the batch's dataset indices) of every step.
        self.seen: list = []

    def training_step(self, batch, batch_idx):
        images, labels, indices = batch
        self.seen.append((self.current_epoch, batch_idx, indices.tolist()))
        x = stoker.normalize(images)  # uint8 -> float, ImageNet mean/std
        return nn.functional.cross_entropy(self.net(x), labels)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="127.0.0.1:7070")
    ap.add_argument("--dataset", default="demo")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ckpt-dir", help="a checkpoint every --ckpt-every steps goes here (default: a new temporary "
                    "directory, printed at the end: never into the directory the example runs in)")
    ap.add_argument("--ckpt-every", type=int, default=2)
    ap.add_argument("--limit-batches", type=int, help="Lightning's limit_train_batches: stop each epoch early")
    ap.add_argument("--reload", action="store_true",
                    help="a new Loader each epoch (reload_dataloaders_every_n_epochs=1): Lightning sets its epoch")
    ap.add_argument("--resume", help="a checkpoint to continue from")
    ap.add_argument("--report", help="write the steps' batch indices here (JSON)")
    a = ap.parse_args()

    ckpt_dir = a.ckpt_dir or tempfile.mkdtemp(prefix="stoker-lightning-")
    info = {d.name: d for d in stoker.list_datasets(a.target)}[a.dataset]
    data = StokerData(a.target, a.dataset, a.batch_size, a.seed)
    model = TinyNet(max(len(info.classes), 2))
    ckpt = L.pytorch.callbacks.ModelCheckpoint(dirpath=ckpt_dir, filename="{epoch}-{step}", save_top_k=-1,
                                               every_n_train_steps=a.ckpt_every)
    # default_root_dir: whatever else Lightning writes goes there too, not
    # into the working directory.
    trainer = L.Trainer(accelerator="cpu", devices=1, max_epochs=a.epochs, callbacks=[ckpt], logger=False,
                        default_root_dir=ckpt_dir,
                        enable_progress_bar=False, enable_model_summary=False,
                        limit_train_batches=a.limit_batches, reload_dataloaders_every_n_epochs=int(a.reload))
    trainer.fit(model, datamodule=data, ckpt_path=a.resume)
    for epoch in sorted({e for e, _, _ in model.seen}):
        first = next(ix for e, _, ix in model.seen if e == epoch)
        print(f"epoch {epoch}: first batch indices {first}")
    print(f"checkpoints in {ckpt_dir} (--resume one of them to continue)")
    if a.report:
        with open(a.report, "w") as f:
            json.dump(model.seen, f)


if __name__ == "__main__":
    main()
