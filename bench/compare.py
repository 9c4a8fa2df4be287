#!/usr/bin/env python3
"""`make bench`: stoker's pipeline against the PyTorch baselines, interleaved.

Each round runs `stoker bench pipeline`, then `baselines.py --impl pil`, then
`--impl tv2`, on the same images with the same thread count, so that the
machine's noise lands on all three alike. Prints each impl's median images/s
over the rounds and stoker's ratio against each baseline and against the
faster one; with --json the last line is one JSON object of the same.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def last_json(cmd: list[str]) -> dict:
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stoker", default=os.path.join(HERE, "..", "bin", "stoker"))
    ap.add_argument("--data", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--transform", default="imagenet-train")
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    common = ["--data", a.data, "--threads", str(a.threads), "--transform", a.transform, "--seconds", str(a.seconds), "--json"]
    runs: dict[str, list[float]] = {"stoker": [], "pil": [], "tv2": []}
    cpu: dict[str, list[float]] = {"stoker": [], "pil": [], "tv2": []}
    for r in range(a.rounds):
        for impl in ("stoker", "pil", "tv2"):
            if impl == "stoker":
                res = last_json([a.stoker, "bench", "pipeline", *common])
            else:
                res = last_json([sys.executable, os.path.join(HERE, "baselines.py"), "--impl", impl, *common])
            runs[impl].append(res["images_per_sec"])
            cpu[impl].append(res["images_per_cpu_sec"])
        print(f"round {r + 1}/{a.rounds}: " + "  ".join(f"{k} {v[-1]:.0f}" for k, v in runs.items()), file=sys.stderr)
    med = {k: statistics.median(v) for k, v in runs.items()}
    med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
    faster = max(("pil", "tv2"), key=lambda k: med[k])
    res = {
        "threads": a.threads,
        "transform": a.transform,
        "rounds": a.rounds,
        "seconds_per_run": a.seconds,
        "images_per_sec": med,
        "runs": runs,
        "images_per_cpu_sec": med_cpu,
        "ratio_per_cpu_sec": med_cpu["stoker"] / max(med_cpu["pil"], med_cpu["tv2"]),
        "ratio_vs_pil": med["stoker"] / med["pil"],
        "ratio_vs_tv2": med["stoker"] / med["tv2"],
        "faster_baseline": faster,
        "ratio": med["stoker"] / med[faster],
    }
    print(f"\n{a.transform}, {a.threads} thread(s), median of {a.rounds} interleaved rounds of {a.seconds:g}s on {a.data}")
    print(f"{'impl':8} {'images/s':>10} {'per thread':>11} {'per CPU-s':>10}   runs (images/s)")
    for k in ("stoker", "pil", "tv2"):
        print(f"{k:8} {med[k]:10.1f} {med[k] / a.threads:11.1f} {med_cpu[k]:10.1f}   " + " ".join(f"{x:.0f}" for x in runs[k]))
    print(f"\nstoker / pil = {res['ratio_vs_pil']:.2f}x   stoker / tv2 = {res['ratio_vs_tv2']:.2f}x")
    print(f"stoker / faster baseline ({faster}) = {res['ratio']:.2f}x   (target >= 2.5x)")
    print(f"per CPU-second, stoker / faster baseline = {res['ratio_per_cpu_sec']:.2f}x")
    if a.json:
        print(json.dumps(res))


if __name__ == "__main__":
    main()
