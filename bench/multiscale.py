#!/usr/bin/env python3
"""stoker.gpu.MultiScale against ultralytics' own preprocess_batch
(multi_scale, ultralytics 8.4.190) on the same uint8 batch ([16, 3, 640,
640] by default), in CPU-seconds a batch: the same sizes on both sides
(ultralytics' randrange made to return the side the op draws for that
call), so the difference is the op's draw and its targets' moves.

Sides: ``ultralytics`` (its preprocess_batch: float / 255, interpolate),
``stoker`` (the op on ``u8.float() / 255``, no targets), ``stoker+boxes``
(with each sample's targets: ``--boxes`` boxes and 17 keypoints an
instance), and ``stoker+masks`` (those and a [K, H, W] uint8 Mask a
sample). A round times ``--reps`` calls of each side back to back, the
sides interleaved and their order alternated round by round; each figure
is the median of ``--rounds`` rounds of CPU-seconds (time.process_time,
torch on ``--threads`` threads). Prints each side's milliseconds of CPU a
batch and its ratio to ultralytics'.

    nice .venv/bin/python bench/multiscale.py --rounds 7 --reps 3
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--imgsz", type=int, default=640)
    ap.add_argument("--boxes", type=int, default=8, help="instances a sample")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    import torch
    from torchvision import tv_tensors
    from ultralytics.models.yolo.detect import train as ul

    from stoker import gpu

    torch.set_num_threads(args.threads)
    b, s, k = args.batch, args.imgsz, args.boxes
    g = torch.Generator().manual_seed(0)
    u8 = torch.randint(0, 256, (b, 3, s, s), generator=g, dtype=torch.uint8)

    def targets(masks: bool) -> list:
        out = []
        for _ in range(b):
            xy = torch.rand((k, 2), generator=g) * s * 0.7
            t = {"boxes": tv_tensors.BoundingBoxes(torch.cat([xy, xy + 30], 1), format="XYXY", canvas_size=(s, s)),
                 "labels": torch.zeros(k, dtype=torch.int64),
                 "keypoints": tv_tensors.KeyPoints(torch.rand((k, 17, 2), generator=g) * s, canvas_size=(s, s))}
            if masks:
                t["masks"] = tv_tensors.Mask((torch.rand((k, s, s), generator=g) < 0.1).to(torch.uint8))
            out.append(t)
        return out

    boxes, masks = targets(False), targets(True)
    op = gpu.MultiScale.ultralytics(imgsz=s, multi_scale=0.5)
    trainer = SimpleNamespace(device=torch.device("cpu"), stride=32, args=SimpleNamespace(imgsz=s, multi_scale=0.5))
    calls = [0]

    def ultralytics() -> None:
        side = op.draw(key=(0, calls[0]))
        random.randrange = lambda lo, hi, side=side: side
        ul.DetectionTrainer.preprocess_batch(trainer, {"img": u8})

    def ours(tg) -> None:
        op(u8.float() / 255, tg, key=(0, calls[0]))

    sides = {"ultralytics": ultralytics, "stoker": lambda: ours(None), "stoker+boxes": lambda: ours(boxes),
             "stoker+masks": lambda: ours(masks)}
    times = {n: [] for n in sides}
    load0 = os.getloadavg()
    for r in range(args.rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        spent = dict.fromkeys(sides, 0.0)
        for rep in range(args.reps):
            calls[0] = r * args.reps + rep  # the same sizes on every side
            for n in order:
                t0 = time.process_time()
                sides[n]()
                spent[n] += time.process_time() - t0
        for n in sides:
            times[n].append(spent[n] / args.reps)
    base = statistics.median(times["ultralytics"])
    print(f"batch {b}x3x{s}x{s} uint8, {k} instances a sample, {args.threads} thread(s), "
          f"{args.rounds} rounds x {args.reps} calls; load {load0[0]:.2f} -> {os.getloadavg()[0]:.2f}")
    for n, ts in times.items():
        m = statistics.median(ts)
        print(f"{n:14s} {1e3 * m:8.1f} ms CPU a batch   x{m / base:.3f} of ultralytics'")


if __name__ == "__main__":
    main()
