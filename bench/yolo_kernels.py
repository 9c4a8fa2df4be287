#!/usr/bin/env python3
"""The YOLO family's kernels (pipeline/kernels/cv: warpAffine,
warpPerspective, RandomHSV, the load's resize) on a 640x640 image: stoker's
C (cgo), its Go (the go/... cases of BenchmarkKernels, the CGO_ENABLED=0
build's), and cv2 on one thread, on the same image and matrices.

Each round runs every BenchmarkKernels case in its own process for a fixed
number of calls and takes its CPU time (user+sys, which includes the test
binary's start, spread over the calls), then the same cv2 calls timed with
time.process_time for about a second each (cv2.setNumThreads(1)), so that
the machine's noise lands on all alike. Everything runs on one core
(taskset -c 0 where there is one). Prints each case's median ms of CPU a
call over the rounds and its range.

  .venv/bin/python bench/yolo_kernels.py [--rounds 3] [--calls 200]
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

CASES = ["resize/640x640-427x640", "warpaffine/640", "warpperspective/640", "hsv/640"]


def cv2_times() -> dict[str, float]:
    """ms of CPU a call of each case in cv2, one thread."""
    import cv2
    import numpy as np

    cv2.setNumThreads(1)
    w = h = 640
    i = np.arange(3 * w * h)
    # BenchmarkKernels' benchPlanes, CHW, as HWC.
    pix = ((i * 7 + i // w * 13) % 256).astype(np.uint8).reshape(3, h, w).transpose(1, 2, 0).copy()
    m = np.array([[0.9, 0.1, 20], [-0.1, 0.95, 10]], dtype=np.float64)
    p = np.array([[0.9, 0.1, 20], [-0.1, 0.95, 10], [0.0002, -0.0001, 1]], dtype=np.float64)

    def hsv(img):  # ultralytics' RandomHSV.apply_image with r drawn as below
        r = np.array([0.01, 0.3, -0.2])
        hue, sat, val = cv2.split(cv2.cvtColor(img, cv2.COLOR_BGR2HSV))
        x = np.arange(0, 256, dtype=r.dtype)
        lut_hue = ((x + r[0] * 180) % 180).astype(np.uint8)
        lut_sat = np.clip(x * (r[1] + 1), 0, 255).astype(np.uint8)
        lut_val = np.clip(x * (r[2] + 1), 0, 255).astype(np.uint8)
        im = cv2.merge((cv2.LUT(hue, lut_hue), cv2.LUT(sat, lut_sat), cv2.LUT(val, lut_val)))
        return cv2.cvtColor(im, cv2.COLOR_HSV2BGR)

    fns = {
        "resize/640x640-427x640": lambda: cv2.resize(pix, (427, 640), interpolation=cv2.INTER_LINEAR),
        "warpaffine/640": lambda: cv2.warpAffine(pix, m, (640, 640), borderValue=(114, 114, 114)),
        "warpperspective/640": lambda: cv2.warpPerspective(pix, p, (640, 640), borderValue=(114, 114, 114)),
        "hsv/640": lambda: hsv(pix),
    }
    out = {}
    for name, fn in fns.items():
        fn()
        n, t0 = 0, time.process_time()
        while time.process_time() - t0 < 1.0:
            fn()
            n += 1
        out[name] = (time.process_time() - t0) / n * 1e3
    return out


def go_time(binary: str, case: str, calls: int, pin: list[str]) -> float:
    """ms of CPU a call of BenchmarkKernels/case, run alone for calls calls."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(pin + ["nice", binary, "-test.run", "XXX", "-test.bench", "Kernels/" + case + "$",
                          "-test.benchtime", f"{calls}x"], check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu / calls * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=200, help="calls of each C case (a fifth for the Go ones)")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    with tempfile.TemporaryDirectory() as tmp:
        binary = os.path.join(tmp, "cv.test")
        subprocess.run(["go", "test", "-c", "-o", binary, "./pipeline/kernels/cv"], cwd=root, check=True)
        rows: dict[str, dict[str, list[float]]] = {c: {"go": [], "c": [], "cv2": []} for c in CASES}
        for r in range(args.rounds):
            for c in CASES:
                rows[c]["c"].append(go_time(binary, c, args.calls, pin))
                rows[c]["go"].append(go_time(binary, "go/" + c, max(args.calls // 5, 1), pin))
            cv = subprocess.run(pin + ["nice", sys.executable, __file__, "--cv2-only"], check=True,
                                capture_output=True, text=True).stdout
            for line in cv.splitlines():
                name, ms = line.split()
                rows[name]["cv2"].append(float(ms))
            print(f"round {r + 1} done; load average {os.getloadavg()[0]:.1f}", file=sys.stderr)
    print(f"{'ms of CPU a call':28} {'Go':>20} {'C':>20} {'cv2':>20}")
    for c in CASES:
        cells = [f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})" for v in
                 (rows[c]["go"], rows[c]["c"], rows[c]["cv2"])]
        print(f"{c:28} {cells[0]:>20} {cells[1]:>20} {cells[2]:>20}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--cv2-only"]:
        for k, v in cv2_times().items():
            print(k, f"{v:.4f}")
    else:
        main()
