#!/usr/bin/env python3
"""The geometric kernels on a 224x224 crop: stoker's against torchvision's.

Builds the pipeline package's test binary once, then in each round runs, op
by op, stoker's benchmark (`BenchmarkKernels/<op>/224`: its CPU time per op)
and the same op in torchvision.transforms.v2.functional on a uint8
[3, 224, 224] tensor with one thread (its CPU time per op), so that the
machine's noise lands on both alike. Prints the medians over the rounds and
torchvision's time over stoker's (the -go rows: stoker's Go resampling, which
runs where the CPU lacks AVX2 and FMA). The ops and their arguments are the
benchmark's (pipeline/kernels_bench_test.go): fill 0 (a fill, blended
through the mask, as RandomRotation's default), erase value="random" as
torchvision draws it (normal noise) beside stoker's uniform bytes.

    .venv/bin/python bench/kernels_geom.py --rounds 5
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def torch_ops():
    import torch
    import torchvision.transforms.v2.functional as F
    from torchvision.transforms import InterpolationMode as IM

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(1)
    img = torch.randint(0, 256, (3, 224, 224), dtype=torch.uint8, generator=g)
    rot = dict(angle=30.5, fill=[0.0, 0.0, 0.0])
    aff = dict(angle=10.0, translate=[5.0, 3.0], scale=1.1, shear=[8.0, 2.0], fill=[0.0, 0.0, 0.0])
    v = torch.tensor([124.0, 116.0, 104.0])[:, None, None]
    ops = {
        "horizontal_flip": lambda: F.horizontal_flip(img),
        "vertical_flip": lambda: F.vertical_flip(img),
        "rotate/bilinear": lambda: F.rotate(img, interpolation=IM.BILINEAR, **rot),
        "rotate/nearest": lambda: F.rotate(img, interpolation=IM.NEAREST, **rot),
        # torchvision refuses bicubic for tensors: its tensor path with the
        # check lifted, as the parity test defines stoker's bicubic
        "rotate/bicubic": lambda: bicubic_rotate(img, 30.5),
        "affine/bilinear": lambda: F.affine(img, interpolation=IM.BILINEAR, **aff),
        "affine/nearest": lambda: F.affine(img, interpolation=IM.NEAREST, **aff),
        "erase": lambda: F.erase(img, 20, 30, 100, 120, v),
        "erase/random": lambda: F.erase(img, 20, 30, 100, 120, torch.empty([3, 100, 120]).normal_()),
    }
    # stoker's Go resampling (CPUs without AVX2 and FMA, CGO_ENABLED=0)
    for k in ("rotate/bilinear", "rotate/bicubic", "rotate/nearest", "affine/bilinear", "affine/nearest"):
        ops[k + "-go"] = ops[k]
    return ops


def bicubic_rotate(img, angle: float):
    import torch
    from torchvision.transforms.v2.functional._geometry import _affine_grid, _apply_grid_transform, _get_inverse_affine_matrix

    _, h, w = img.shape
    matrix = _get_inverse_affine_matrix([0.0, 0.0], -angle, [0.0, 0.0], 1.0, [0.0, 0.0])
    grid = _affine_grid(torch.tensor(matrix).reshape(1, 2, 3), w=w, h=h, ow=w, oh=h)
    out = _apply_grid_transform(img.float(), grid, "bicubic", fill=[0.0, 0.0, 0.0])
    return out.clamp_(0, 255).round_().to(torch.uint8)


def time_torch(fn, seconds: float) -> float:
    """CPU ns per call, over at least `seconds`."""
    for _ in range(3):
        fn()
    n, t0 = 0, time.process_time()
    while True:
        for _ in range(10):
            fn()
        n += 10
        dt = time.process_time() - t0
        if dt >= seconds:
            return dt / n * 1e9


def time_stoker(binary: str, op: str, seconds: float) -> float:
    """cpu-ns/op of BenchmarkKernels/<op>/224."""
    pat = "^BenchmarkKernels$/^" + re.escape(op).replace("/", "$/^") + "$/^224$"
    out = subprocess.run([binary, "-test.run", "^$", "-test.bench", pat, "-test.benchtime", f"{seconds}s"],
                         check=True, capture_output=True, text=True, cwd=os.path.join(REPO, "pipeline")).stdout
    m = re.search(r"([\d.]+) cpu-ns/op", out)
    if not m:
        sys.exit(f"no cpu-ns/op for {op} in:\n{out}")
    return float(m.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=0.5, help="per op, per side, per round")
    ap.add_argument("--ops", default="", help="a regexp choosing the ops")
    args = ap.parse_args()
    ops = {k: f for k, f in torch_ops().items() if re.search(args.ops, k)}
    with tempfile.TemporaryDirectory() as tmp:
        binary = os.path.join(tmp, "pipeline.test")
        subprocess.run(["go", "test", "-c", "-o", binary, "./pipeline"], check=True, cwd=REPO)
        st: dict[str, list[float]] = {k: [] for k in ops}
        tv: dict[str, list[float]] = {k: [] for k in ops}
        for r in range(args.rounds):
            for k, fn in ops.items():
                st[k].append(time_stoker(binary, k, args.seconds))
                tv[k].append(time_torch(fn, args.seconds))
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    print(f"{'op (224x224, uint8)':24} {'stoker us':>10} {'torchvision us':>15} {'ratio':>7}")
    for k in ops:
        s, t = statistics.median(st[k]), statistics.median(tv[k])
        print(f"{k:24} {s / 1e3:10.1f} {t / 1e3:15.1f} {t / s:7.1f}")


if __name__ == "__main__":
    main()
