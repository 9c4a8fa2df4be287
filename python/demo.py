#!/usr/bin/env python3
"""The main job on one machine: `stoker serve` feeds a PyTorch training loop.

Makes a demo dataset unless --data names an ImageFolder, starts `stoker
serve` on loopback, trains a small CNN on the batches stoker streams (ResNet-18
when a GPU is there) for --seconds, and prints images/s and how much of the
time the trainer waited for data. Stops the server on the way out.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def small_cnn(classes: int):
    import torch.nn as nn

    return nn.Sequential(
        nn.Conv2d(3, 16, 5, stride=4, padding=2), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--stoker", default=os.path.join(HERE, "..", "bin", "stoker"))
    ap.add_argument("--data", help="an ImageFolder directory; default: a synthetic one made here")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    a = ap.parse_args()

    # What a new user waits for before training starts, step by step
    # (BENCHMARKS.md, "The demo on a fresh machine" times make demo by these).
    start = time.perf_counter()

    def step(what: str) -> None:
        print(f"demo: {what} at {time.perf_counter() - start:.1f}s", flush=True)

    import torch
    import stoker
    from stoker._local import LocalServer

    step("imported torch and the client")
    data = a.data
    if not data:
        data = os.path.join(HERE, "..", "out", "demo-data")
        if not os.path.isdir(data):
            subprocess.run([a.stoker, "mkdata", "--out", data, "--n", "2000", "--classes", "10"], check=True)
            step("made the demo dataset (stoker mkdata)")
    # --log-level warn: the demo's own lines stay readable; problems still show.
    try:
        srv = LocalServer(a.stoker, {"demo": data}, workers=a.workers, args=["--log-level", "warn"])
    except RuntimeError as e:
        sys.exit(f"demo: {e}")
    addr = srv.addr
    step("stoker serve listening")
    loader = None
    try:
        cuda = torch.cuda.is_available()
        dev = torch.device("cuda" if cuda else "cpu")
        loader = stoker.Loader(addr, "demo", transform="imagenet-train", batch_size=a.batch_size, shuffle=True, seed=0)
        classes = 1000
        if cuda:
            import torchvision

            model = torchvision.models.resnet18(num_classes=classes)
        else:
            model = small_cnn(classes)
        model = model.to(dev).to(memory_format=torch.channels_last)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
        print(f"demo: training {'ResNet-18 on ' + torch.cuda.get_device_name() if cuda else 'a small CNN on the CPU'}"
              f" for {a.seconds:g}s from stoker serve at {addr} ({len(loader)} batches/epoch of {a.batch_size})")
        images = 0
        waited = 0.0
        t0 = time.perf_counter()
        epoch = 0
        last = t0
        while time.perf_counter() - t0 < a.seconds:
            loader.set_epoch(epoch)
            it = iter(loader)
            while True:
                w0 = time.perf_counter()
                try:
                    x, y = next(it)
                except StopIteration:
                    break
                waited += time.perf_counter() - w0
                x = stoker.normalize(x.to(dev, non_blocking=True), mean, std)
                loss = torch.nn.functional.cross_entropy(model(x), y.to(dev, non_blocking=True))
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                if not images:
                    step("first trained batch")
                images += x.shape[0]
                now = time.perf_counter()
                if now - last >= 5:
                    el = now - t0
                    print(f"  epoch {epoch}  {images} images  {images / el:7.1f} images/s  waited {100 * waited / el:4.1f}% of the time  loss {loss.item():.3f}")
                    last = now
                if now - t0 >= a.seconds:
                    break
            epoch += 1
        if cuda:
            torch.cuda.synchronize()
        el = time.perf_counter() - t0
        print(f"demo: {images} images in {el:.1f}s = {images / el:.1f} images/s; "
              f"the trainer waited for data {100 * waited / el:.1f}% of the time")
        if loader.sample_errors:
            print(f"demo: {len(loader.sample_errors)} samples could not be decoded (first: {loader.sample_errors[0]})")
    finally:
        if loader is not None:
            loader.close()  # its stream is open: the server would wait for it to stop
        srv.stop()


if __name__ == "__main__":
    main()
