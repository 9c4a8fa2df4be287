#!/usr/bin/env python3
"""stoker.gpu's per-sample MixUp, CutMix, RandomChoice of them and
RandomErasing against torchvision.transforms.v2's per-batch ones, on the
same device and batch ([256, 3, 224, 224] float32 by default).

A round times ``--reps`` calls of an op back to back, on each side, and
takes their mean (torchvision's RandomErasing(p) does nothing on a share
1 - p of its calls: the mean is what it costs a training loop); the figure
is the median of ``--rounds`` rounds, the sides interleaved and their order
alternated round by round. Prints each op's milliseconds a batch, both
sides, and stoker's over torchvision's (the issue's target: within 1.5x),
with the machine's load average before and after. For RandomErasing, a
third side: torchvision's op run on each image in a Python loop (how one
gets per-sample erasing from torchvision today), and the ratio to it.

    nice .venv/bin/python bench/gpu_ops.py --device cpu --threads 1 --rounds 5
    nice .venv/bin/python bench/gpu_ops.py --only Erasing --strategy rows
    .venv/bin/python bench/gpu_ops.py --device cuda --rounds 11 --reps 20
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))


def ops(x, y):
    """name -> (stoker's call, torchvision's call[, torchvision's op run on
    each image in a Python loop: per-sample draws as users get them
    today]), each taking a call number (stoker's batch key)."""
    import torch
    import torchvision.transforms.v2 as T2

    from stoker import gpu

    c = 1000
    ours_choice = gpu.RandomChoice([gpu.MixUp(alpha=0.8, num_classes=c), gpu.CutMix(alpha=1.0, num_classes=c)])
    tv_choice = T2.RandomChoice([T2.MixUp(alpha=0.8, num_classes=c), T2.CutMix(alpha=1.0, num_classes=c)])
    xi = x.clone()  # the in-place ops write into their own batch

    def erase(p, value=0.0, inplace=False):
        ours = gpu.RandomErasing(p=p, value=value, inplace=inplace)
        tv = T2.RandomErasing(p=p, value=value, inplace=inplace)
        src = xi if inplace else x
        if inplace:
            def loop(k):
                for img in src:
                    tv(img)
        else:
            def loop(k):
                return torch.stack([tv(img) for img in src])
        return (lambda k: ours(src, key=(0, k))), (lambda k: tv(src)), loop

    return {
        "MixUp(alpha=0.8)": (lambda k: gpu.MixUp(alpha=0.8, num_classes=c)(x, y, key=(0, k)),
                             lambda k: T2.MixUp(alpha=0.8, num_classes=c)(x, y)),
        "CutMix(alpha=1)": (lambda k: gpu.CutMix(alpha=1.0, num_classes=c)(x, y, key=(0, k)),
                            lambda k: T2.CutMix(alpha=1.0, num_classes=c)(x, y)),
        "RandomChoice(MixUp, CutMix)": (lambda k: ours_choice(x, y, key=(0, k)), lambda k: tv_choice(x, y)),
        "RandomErasing(p=0.25)": erase(0.25),
        "RandomErasing(p=0.25, random)": erase(0.25, "random"),
        "RandomErasing(p=0.25, inplace)": erase(0.25, inplace=True),
        "RandomErasing(p=0.25, random, inplace)": erase(0.25, "random", inplace=True),
        "RandomErasing(p=1)": erase(1.0),
        "RandomErasing(p=1, random)": erase(1.0, "random"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1, help="torch's intra-op threads (CPU)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=8,
                    help="calls per op per side per round (the round's figure is their mean)")
    ap.add_argument("--only", default="", help="run the ops whose names contain this")
    ap.add_argument("--strategy", choices=["auto", "loop", "rows", "mask"], default="auto",
                    help="how stoker's RandomErasing writes its boxes (auto: a loop on CPU, vectorized elsewhere)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    import torch

    from stoker import _gpu_kernels

    _gpu_kernels.STRATEGY = None if a.strategy == "auto" else a.strategy
    torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    g = torch.Generator().manual_seed(0)
    x = torch.rand((a.batch, 3, a.size, a.size), generator=g).to(dev)
    y = torch.randint(0, 1000, (a.batch,), generator=g).to(dev)
    table = {n: f for n, f in ops(x, y).items() if a.only in n}
    torch.manual_seed(0)

    def timed(fn, k0: int) -> float:
        if dev.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for k in range(k0, k0 + a.reps):
            fn(k)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        return (time.perf_counter() - t0) / a.reps

    load0 = os.getloadavg()
    names = ("stoker", "torchvision", "loop")
    for fns in table.values():  # warm up
        for fn in fns:
            fn(0)
    runs = {name: {side: [] for side in names[:len(fns)]} for name, fns in table.items()}
    k = 1
    for r in range(a.rounds):
        for name, fns in table.items():
            sides = list(zip(names, fns))
            for side, fn in sides if r % 2 == 0 else sides[::-1]:
                runs[name][side].append(timed(fn, k))
                k += a.reps
    load1 = os.getloadavg()
    res = {"device": str(dev), "strategy": a.strategy, "threads": a.threads,
           "batch": [a.batch, 3, a.size, a.size], "rounds": a.rounds,
           "reps": a.reps, "loadavg_before": load0, "loadavg_after": load1, "ops": {}}
    print(f"{dev}, {a.threads} threads, [{a.batch}, 3, {a.size}, {a.size}] float32, medians of {a.rounds} rounds "
          f"of {a.reps} calls; ms a batch; erasing strategy {a.strategy}")
    print(f"{'op':40} {'stoker':>8} {'tv batch':>9} {'ratio':>7} {'tv loop':>9} {'ratio':>7}")
    for name, r in runs.items():
        s, t = statistics.median(r["stoker"]) * 1e3, statistics.median(r["torchvision"]) * 1e3
        res["ops"][name] = {"stoker_ms": s, "torchvision_ms": t, "ratio": s / t}
        line = f"{name:40} {s:8.2f} {t:9.2f} {s / t:6.2f}x"
        if "loop" in r:
            lp = statistics.median(r["loop"]) * 1e3
            res["ops"][name].update(torchvision_loop_ms=lp, ratio_loop=s / lp)
            line += f" {lp:9.2f} {s / lp:6.2f}x"
        print(line)
    print(f"load average before {load0[0]:.2f}, after {load1[0]:.2f}")
    if a.json:
        print(json.dumps(res))


if __name__ == "__main__":
    main()
