#!/usr/bin/env python3
"""The kernels after the geometry on a 224x224 crop: stoker's against
torchvision's (photometric and geometric; rotate and affine with fill 0, as
RandomRotation's default; the -go rows are stoker's Go resampling).

Each round runs pipeline/kernels' BenchmarkKernels (Go, one goroutine) and then the
same ops in torchvision.transforms.v2.functional on a uint8 [3, 224, 224]
tensor of the same crop with torch.set_num_threads(1), so that the machine's
noise lands on both alike. Prints each op's median time per call over the
rounds, both sides, and torchvision's over stoker's.

  .venv/bin/python bench/kernels.py [--rounds 5] [--benchtime 0.5s] [--cgo 0|1] [--json]

Times are the process's CPU time per call (getrusage in Go,
time.process_time in Python: the steadier figure on a shared machine;
--wall for wall time), the fastest of three runs in each round. stoker's
include copying the crop in (BenchmarkKernels/copy/224, printed too);
torchvision's ops return a new tensor.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import timeit

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PHOTO = os.path.join(REPO, "testdata", "photos", "autumn", "000000.jpg")

# BenchmarkKernels' ops (pipeline/kernels/bench_test.go) with the same
# arguments, as torchvision calls.
OPS = {
    "adjust_brightness": lambda F, x: F.adjust_brightness(x, 1.3),
    "adjust_contrast": lambda F, x: F.adjust_contrast(x, 1.3),
    "adjust_saturation": lambda F, x: F.adjust_saturation(x, 1.3),
    "adjust_hue": lambda F, x: F.adjust_hue(x, 0.1),
    "adjust_sharpness": lambda F, x: F.adjust_sharpness(x, 1.7),
    "rgb_to_grayscale": lambda F, x: F.rgb_to_grayscale(x, 3),
    "solarize": lambda F, x: F.solarize(x, 128.0),
    "solarize_add": None,  # timm's, on PIL: no torchvision functional
    "posterize": lambda F, x: F.posterize(x, 4),
    "invert": lambda F, x: F.invert(x),
    "equalize": lambda F, x: F.equalize(x),
    "autocontrast": lambda F, x: F.autocontrast(x),
    "gaussian_blur_k9": lambda F, x: F.gaussian_blur(x, [9, 9], [1.0, 1.0]),
    "gaussian_blur_k23": lambda F, x: F.gaussian_blur(x, [23, 23], [1.5, 1.5]),
    "horizontal_flip": lambda F, x: F.horizontal_flip(x),
    "vertical_flip": lambda F, x: F.vertical_flip(x),
    "rotate/bilinear": lambda F, x: F.rotate(x, 30.5, interpolation=F.InterpolationMode.BILINEAR, fill=[0.0] * 3),
    "rotate/bicubic": lambda F, x: bicubic_rotate(x, 30.5),
    "rotate/nearest": lambda F, x: F.rotate(x, 30.5, interpolation=F.InterpolationMode.NEAREST, fill=[0.0] * 3),
    "affine/bilinear": lambda F, x: F.affine(x, 10.0, [5.0, 3.0], 1.1, [8.0, 2.0],
                                             interpolation=F.InterpolationMode.BILINEAR, fill=[0.0] * 3),
    "affine/nearest": lambda F, x: F.affine(x, 10.0, [5.0, 3.0], 1.1, [8.0, 2.0],
                                            interpolation=F.InterpolationMode.NEAREST, fill=[0.0] * 3),
    "erase": lambda F, x: F.erase(x, 20, 30, 100, 120, erase_value()),
    # torchvision's value="random" is normal noise, drawn per erase
    "erase/random": lambda F, x: F.erase(x, 20, 30, 100, 120, __import__("torch").empty([3, 100, 120]).normal_()),
}
# The geometric kernels' Go resampling (CPUs without AVX2 and FMA, and
# CGO_ENABLED=0), beside the same torchvision op.
for _k in ("rotate/bilinear", "rotate/bicubic", "rotate/nearest", "affine/bilinear", "affine/nearest"):
    OPS[_k + "-go"] = OPS[_k]


@functools.lru_cache(maxsize=None)
def erase_value():
    import torch

    return torch.tensor([124.0, 116.0, 104.0])[:, None, None]


def bicubic_rotate(img, angle: float):
    """torchvision refuses bicubic rotate for tensors: its tensor path with
    the check lifted, clamped, as stoker's bicubic is defined (and timm's
    RandAugment draws bicubic, on PIL)."""
    import torch
    from torchvision.transforms.v2.functional._geometry import (_affine_grid, _apply_grid_transform,
                                                                _get_inverse_affine_matrix)

    _, h, w = img.shape
    matrix = _get_inverse_affine_matrix([0.0, 0.0], -angle, [0.0, 0.0], 1.0, [0.0, 0.0])
    grid = _affine_grid(torch.tensor(matrix).reshape(1, 2, 3), w=w, h=h, ow=w, oh=h)
    out = _apply_grid_transform(img.float(), grid, "bicubic", fill=[0.0, 0.0, 0.0])
    return out.clamp_(0, 255).round_().to(torch.uint8)


def build_go(cgo: str, out: str) -> None:
    env = dict(os.environ, CGO_ENABLED=cgo)
    subprocess.run(["go", "test", "-c", "-o", out, "./pipeline/kernels"], cwd=REPO, env=env, check=True)


def run_go(binary: str, benchtime: str, cpu: bool) -> dict:
    """BenchmarkKernels, three times: each op's fastest, in us (as
    run_torchvision takes the fastest of three repeats); CPU time if cpu,
    else wall time."""
    r = subprocess.run([binary, "-test.run", "XXX", "-test.bench", "BenchmarkKernels/", "-test.benchtime",
                        benchtime, "-test.count", "3"], cwd=os.path.join(REPO, "pipeline", "kernels"), capture_output=True,
                       text=True, check=True)
    out: dict = {}
    for line in r.stdout.splitlines():
        m = re.match(r"BenchmarkKernels/(\S+)/224(?:-\d+)?\s+\d+\s+([\d.]+) ns/op.*?([\d.]+) cpu-ns/op", line)
        if m:
            out[m.group(1)] = min(out.get(m.group(1), float("inf")), float(m.group(3 if cpu else 2)) / 1e3)
    return out


def crop():
    import torch
    from torchvision.io import decode_jpeg, read_file

    img = decode_jpeg(read_file(PHOTO))
    _, h, w = img.shape
    y, x = (h - 224) // 2, (w - 224) // 2
    return img[:, y:y + 224, x:x + 224].contiguous()


def run_torchvision(img, seconds: float, cpu: bool) -> dict:
    import torchvision.transforms.v2.functional as F

    out = {}
    for name, op in OPS.items():
        if op is None:
            continue
        t = timeit.Timer(lambda: op(F, img), timer=time.process_time if cpu else time.perf_counter)
        n = max(1, int(seconds / max(t.timeit(1), 1e-6)))
        out[name] = min(t.repeat(3, n)) / n * 1e6
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--benchtime", default="0.5s", help="Go's -test.benchtime per op")
    ap.add_argument("--seconds", type=float, default=0.3, help="torchvision's time per op and repeat")
    ap.add_argument("--cgo", default="1", help="CGO_ENABLED for the Go build (0: the pure-Go twins)")
    ap.add_argument("--wall", action="store_true", help="wall time, not the process's CPU time")
    ap.add_argument("--json", action="store_true", help="end with one JSON line of the medians")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    img = crop()
    go_runs, tv_runs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        binary = os.path.join(tmp, "pipeline.test")
        build_go(args.cgo, binary)
        for r in range(args.rounds):
            go_runs.append(run_go(binary, args.benchtime, not args.wall))
            tv_runs.append(run_torchvision(img, args.seconds, not args.wall))
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    med = {}
    print(f"{'op (224x224, 1 thread)':24s} {'stoker us':>10s} {'torchvision us':>15s} {'ratio':>7s}")
    for name in ["copy"] + list(OPS):
        s = statistics.median(run[name] for run in go_runs) if name in go_runs[0] else None
        t = statistics.median(run[name] for run in tv_runs) if name in tv_runs[0] else None
        ratio = t / s if s and t else None
        med[name] = {"stoker_us": s, "torchvision_us": t, "ratio": ratio}
        fmt = lambda v, d: f"{v:{d}.1f}" if v is not None else f"{'-':>{d}s}"
        print(f"{name:24s} {fmt(s, 10)} {fmt(t, 15)} {(f'{ratio:7.1f}x' if ratio else '      -')}")
    print(f"{'wall' if args.wall else 'CPU'} time, cgo={args.cgo}, rounds={args.rounds}, "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus")
    if args.json:
        print(json.dumps(med))


if __name__ == "__main__":
    main()
