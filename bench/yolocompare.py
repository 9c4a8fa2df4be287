#!/usr/bin/env python3
"""`make bench-detection`'s yolo row: stoker's `yolo` preset against
ultralytics' own training dataloader, interleaved, per core.

--data is a YOLO-layout detection set as `stoker mkdata --coco --yolo`
writes it: DIR/images/train/*.jpg, DIR/labels/train/*.txt (a polygon a
line: class x1 y1 x2 y2 ..., normalized) and DIR/data.yaml (`make
bench-detection` makes one at COCO's sizes and density: --max-side 640
--instances 7).

The baseline is ultralytics 8.4.190's own: its YOLODataset as its trainer
builds it (ultralytics.data.build_yolo_dataset, mode "train": augment=True,
rect=False, cache=False, imgsz 640, the hyperparameters of its
cfg/default.yaml: Mosaic p=1 of 4 images on a 1280x1280 canvas filled with
114, RandomPerspective to 640x640 (translate 0.1, scale 0.5, no rotation,
shear or perspective), RandomHSV (0.015, 0.7, 0.4), the horizontal flip
p=0.5, its Format to a CHW RGB tensor with normalized xywh boxes; mixup,
cutmix and copy-paste off, Albumentations skipped where the package is not
installed, as in a plain `pip install ultralytics`). One process, one core,
what its DataLoader does with workers=0: for each batch of --batch indices
of a shuffled epoch, dataset[i] for each, then YOLODataset.collate_fn.
torch.set_num_threads(1); OpenCV as ultralytics leaves it:
ultralytics.utils calls cv2.setNumThreads(0) on import (OpenCV then runs
its functions on the calling thread), checked below. Its Mosaic takes the
other three images from its dataset's buffer of recently loaded images (up
to 8 batches of them, decoded and kept in memory), so it decodes about one
photo a sample, as it does in training.

Two baselines on the same photos: "polygons", the label files as written
(what ultralytics' own coco.yaml downloads, coco2017labels-segments: for
detection it resamples each polygon to 1000 points and warps them, the
boxes taken from the warped polygons), and "boxes", the same labels as
their boxes (class cx cy w h, as coco2017labels.zip), made once under
DIR/ultralytics-boxes (images linked, not copied), which spares it the
polygons' work. stoker runs on both label sets too (since it carries
a segment dataset's polygons as ultralytics does, the polygons cost it
work the boxes do not), and each stoker row is compared with ultralytics
on the same labels. The verdict is the smaller of the two ratios.

stoker's side, each round first: `stoker bench pipeline --data
DIR/images/train --annotations DIR/data.yaml --transform yolo --threads 1`
(epoch 1, then epochs >= 2 for --seconds), then the same on
DIR/ultralytics-boxes. Until the preset exists (stoker
refuses an unknown preset) it says "preset not available" and the rounds
measure the baselines alone.

Figures are medians over the rounds; the ratio that counts is per
CPU-second (time.process_time: every thread of the process), the machine
being shared. With --json the last line is one JSON object of the results.
`--baseline polygons|boxes` runs that baseline alone (what each round runs)
and prints one JSON line.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

#: Per core, epochs >= 2, stoker's `yolo` in images per CPU-second over
#: ultralytics' own training dataloader (BENCHMARKS.md, "Per core:
#: detection").
TARGET = 2.0
ULTRALYTICS = "8.4.190"
LABELS = ("polygons", "boxes")


def boxes_set(data: str) -> str:
    """DIR/ultralytics-boxes: DIR's images (a link) and its labels as boxes
    (each polygon's extent: class cx cy w h), made once."""
    out = os.path.join(data, "ultralytics-boxes")
    done = os.path.join(out, ".done")
    if os.path.exists(done):
        return out
    os.makedirs(os.path.join(out, "images"), exist_ok=True)
    link = os.path.join(out, "images", "train")
    if not os.path.islink(link):
        os.symlink(os.path.abspath(os.path.join(data, "images", "train")), link)
    src, dst = os.path.join(data, "labels", "train"), os.path.join(out, "labels", "train")
    os.makedirs(dst, exist_ok=True)
    for name in sorted(os.listdir(src)):
        if not name.endswith(".txt"):
            continue
        lines = []
        with open(os.path.join(src, name)) as f:
            for line in f:
                v = line.split()
                if not v:
                    continue
                if len(v) == 5:  # already a box
                    lines.append(" ".join(v))
                    continue
                xs, ys = [float(x) for x in v[1::2]], [float(y) for y in v[2::2]]
                x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
                lines.append(f"{v[0]} {(x0 + x1) / 2:.6f} {(y0 + y1) / 2:.6f} {x1 - x0:.6f} {y1 - y0:.6f}")
        with open(os.path.join(dst, name), "w") as f:
            f.write("".join(x + "\n" for x in lines))
    with open(os.path.join(data, "data.yaml")) as f, open(os.path.join(out, "data.yaml"), "w") as g:
        g.write(f.read())
    open(done, "w").close()
    return out


def dataset(data: str, labels: str = "polygons", batch: int = 16):
    """ultralytics' training YOLODataset of data's images/train, as its
    trainer builds it (build_yolo_dataset, mode "train"), with its default
    hyperparameters."""
    import yaml
    from ultralytics.cfg import get_cfg
    from ultralytics.data import build_yolo_dataset
    from ultralytics.utils import DEFAULT_CFG, LOGGER

    LOGGER.setLevel("WARNING")  # the label scan's progress lines
    root = boxes_set(data) if labels == "boxes" else data
    with open(os.path.join(root, "data.yaml")) as f:
        names = yaml.safe_load(f)["names"]
    cfg = get_cfg(DEFAULT_CFG, {"imgsz": 640, "cache": False, "rect": False, "batch": batch, "task": "detect"})
    spec = {"names": names, "nc": len(names), "channels": 3}
    return build_yolo_dataset(cfg, os.path.join(root, "images", "train"), batch, spec, mode="train", rect=False)


def batches(ds, batch: int, seed: int = 0):
    """workers=0 as ultralytics' DataLoader runs it: shuffled epochs of
    batches, each dataset[i] for its indices, then collate_fn."""
    rng = random.Random(seed)
    while True:
        order = list(range(len(ds)))
        rng.shuffle(order)
        for k in range(0, len(order) - batch + 1, batch):  # drop_last: each batch full
            yield ds.collate_fn([ds[i] for i in order[k:k + batch]])


def baseline(data: str, labels: str, seconds: float, batch: int = 16) -> dict:
    """ultralytics' training dataloader on one core: images (mosaics) per
    second and per CPU-second."""
    try:
        import cv2
        import ultralytics
    except ImportError as e:
        sys.exit(f"yolocompare: the baseline needs ultralytics {ULTRALYTICS} and OpenCV ({e}): `make venv` installs "
                 "them (python/requirements-dev.txt)")
    import torch

    torch.set_num_threads(1)
    if ultralytics.__version__ != ULTRALYTICS:
        sys.exit(f"yolocompare: ultralytics {ultralytics.__version__}, want {ULTRALYTICS} (python/requirements-dev.txt)")
    # ultralytics.utils (imported with ultralytics) has called cv2.setNumThreads(0).
    cv_threads = cv2.getNumThreads()
    if cv_threads > 1:
        sys.exit(f"yolocompare: OpenCV has {cv_threads} threads after ultralytics' cv2.setNumThreads(0)")
    ds = dataset(data, labels, batch)
    it = batches(ds, batch)
    instances = 0
    for _ in range(2):  # warm up: imports, the buffer's first images
        next(it)
    n = 0
    t0, c0 = time.perf_counter(), time.process_time()
    deadline = t0 + seconds
    while time.perf_counter() < deadline or n == 0:
        b = next(it)
        n += b["img"].shape[0]
        instances += b["cls"].shape[0]
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    img = b["img"]
    return {"impl": f"ultralytics-{labels}", "labels": labels, "images": n, "seconds": wall, "cpu_seconds": cpu,
            "images_per_sec": n / wall, "images_per_cpu_sec": n / cpu, "instances_per_sample": instances / n,
            "batch": batch, "image_shape": list(img.shape[1:]), "image_dtype": str(img.dtype),
            "ultralytics": ultralytics.__version__, "opencv": cv2.__version__, "cv2_threads": cv_threads,
            "torch": torch.__version__}


def stoker_run(stoker: str, data: str, seconds: float, extra: list[str] | None = None) -> dict | None:
    """One `stoker bench pipeline --transform yolo` run (extra: more of its
    flags); None where stoker has no yolo preset."""
    cmd = [stoker, "bench", "pipeline", "--data", os.path.join(data, "images", "train"), "--annotations",
           os.path.join(data, "data.yaml"), "--threads", "1", "--transform", "yolo", "--seconds", str(seconds), "--json",
           *(extra or [])]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        if 'unknown transform preset "yolo"' in r.stderr:
            return None
        sys.exit(f"yolocompare: {' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def last_json(cmd: list[str]) -> dict:
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stoker", default=os.path.join(HERE, "..", "bin", "stoker"))
    ap.add_argument("--data", required=True, help="a YOLO-layout set as stoker mkdata --coco --yolo writes it")
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=16, help="the baseline's batch (ultralytics' default 16)")
    ap.add_argument("--baseline", choices=LABELS, help="run that ultralytics baseline alone (one JSON line)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--arm", action="append", default=[], metavar="LABEL=BINARY [FLAGS...]",
                    help="another stoker measured in the same rounds, right after --stoker's (a baseline binary, or "
                         "bench pipeline flags such as --partner-budget): its rows are LABEL's; repeatable")
    a = ap.parse_args()
    arms = []
    for spec in a.arm:
        label, _, rest = spec.partition("=")
        words = rest.split()
        if not label or not words:
            sys.exit(f"yolocompare: --arm {spec!r}: want LABEL=BINARY [FLAGS...]")
        arms.append((label, words[0], words[1:]))
    if not os.path.exists(os.path.join(a.data, "data.yaml")):
        sys.exit(f"yolocompare: {a.data}/data.yaml missing: make the set with stoker mkdata --coco --yolo")
    if a.baseline:
        print(json.dumps(baseline(a.data, a.baseline, a.seconds, a.batch)))
        return
    sets = {"polygons": a.data, "boxes": boxes_set(a.data)}
    ips: dict = {**{f"stoker {x} {p}": [] for x in LABELS for p in ("epoch1", "later")},
                 **{f"{lb} {x} {p}": [] for lb, _, _ in arms for x in LABELS for p in ("epoch1", "later")},
                 **{f"ultralytics {x}": [] for x in LABELS}}
    cpu: dict = {k: [] for k in ips}
    inst: dict = {x: [] for x in LABELS}
    available = True
    info: dict = {}
    for r in range(a.rounds):
        for x in LABELS if available else ():
            s = stoker_run(a.stoker, sets[x], a.seconds)
            if s is None:
                available = False
                print("stoker: preset not available (stoker has no yolo preset yet): the baselines alone", file=sys.stderr)
                break
            for p in ("epoch1", "later"):
                ips[f"stoker {x} {p}"].append(s[p]["images_per_sec"])
                cpu[f"stoker {x} {p}"].append(s[p]["images_per_cpu_sec"])
            errors = s["epoch1"]["errors"] + s["later"]["errors"]
            if errors:
                sys.exit(f"yolocompare: stoker had {errors} sample errors on the {x} labels")
            for lb, binary, flags in arms:
                s = stoker_run(binary, sets[x], a.seconds, flags)
                if s is None or s["epoch1"]["errors"] + s["later"]["errors"]:
                    sys.exit(f"yolocompare: arm {lb}: no yolo preset, or sample errors on the {x} labels")
                for p in ("epoch1", "later"):
                    ips[f"{lb} {x} {p}"].append(s[p]["images_per_sec"])
                    cpu[f"{lb} {x} {p}"].append(s[p]["images_per_cpu_sec"])
        for x in LABELS:
            b = last_json([sys.executable, os.path.abspath(__file__), "--baseline", x, "--data", a.data,
                           "--seconds", str(a.seconds), "--batch", str(a.batch)])
            ips[f"ultralytics {x}"].append(b["images_per_sec"])
            cpu[f"ultralytics {x}"].append(b["images_per_cpu_sec"])
            inst[x].append(b["instances_per_sample"])
            info = {k: b[k] for k in ("ultralytics", "opencv", "cv2_threads", "torch", "image_shape", "image_dtype", "batch")}
        line = ", ".join(f"{k} {v[-1]:.1f}" for k, v in cpu.items() if v)
        print(f"round {r + 1}/{a.rounds}: per CPU-second {line}", file=sys.stderr)
    med = {k: statistics.median(v) for k, v in ips.items() if v}
    mcpu = {k: statistics.median(v) for k, v in cpu.items() if v}
    res = {"transform": "yolo", "data": a.data, "rounds": a.rounds, "seconds_per_run": a.seconds, "threads": 1,
           "stoker_preset": available, "baseline": info, "images_per_sec": med, "images_per_cpu_sec": mcpu,
           "runs_per_cpu_sec": cpu, "runs_per_sec": ips,
           "instances_per_sample": {x: statistics.median(v) for x, v in inst.items()}}
    print(f"\nyolo (mosaic 640), one core each, median of {a.rounds} interleaved rounds on {a.data}")
    print(f"ultralytics {info['ultralytics']} (OpenCV {info['opencv']}, cv2 threads {info['cv2_threads']}, torch "
          f"{info['torch']}): YOLODataset training transforms, workers=0, batch {info['batch']}, {a.seconds:g}s each")
    print(f"{'impl':28} {'images/s':>10} {'per CPU-s':>10}   runs (per CPU-s)")
    for k in mcpu:
        print(f"{k:28} {med[k]:10.1f} {mcpu[k]:10.1f}   " + " ".join(f"{x:.1f}" for x in cpu[k]))
    for x in LABELS:
        print(f"ultralytics {x}: {res['instances_per_sample'][x]:.1f} instances a sample after its transforms")
    if not available:
        res["verdict"] = "preset not available"
        print("verdict: preset not available: stoker has no yolo preset yet; the baselines above alone")
    else:
        for label, p in (("epoch 1", "epoch1"), ("epochs >= 2", "later")):
            q = {x: {"ratio": med[f"stoker {x} {p}"] / med[f"ultralytics {x}"],
                     "ratio_per_cpu_sec": mcpu[f"stoker {x} {p}"] / mcpu[f"ultralytics {x}"]} for x in LABELS}
            res[p] = q
            print(f"{label:12} stoker / ultralytics per CPU-second, the same labels: " +
                  ", ".join(f"{q[x]['ratio_per_cpu_sec']:.2f}x ({x})" for x in LABELS))
        for lb, _, _ in arms:
            q = {x: mcpu[f"{lb} {x} later"] / mcpu[f"ultralytics {x}"] for x in LABELS}
            res[f"{lb} later"] = q
            print(f"{lb + ', epochs >= 2':12} / ultralytics per CPU-second, the same labels: " +
                  ", ".join(f"{q[x]:.2f}x ({x})" for x in LABELS))
        base = min(LABELS, key=lambda x: res["later"][x]["ratio_per_cpu_sec"])  # the smaller ratio
        res["verdict_baseline"] = base
        ratio = res["later"][base]["ratio_per_cpu_sec"]
        word = "PASS" if ratio >= TARGET else "FAIL"
        res["target"], res["verdict"] = TARGET, word
        print(f"verdict: {word}: stoker / ultralytics on the same labels ({base}, the smaller ratio) per CPU-second, "
              f"epochs >= 2 = {ratio:.2f}x; target >= {TARGET:.1f}x")
    if a.json:
        print(json.dumps(res))


if __name__ == "__main__":
    main()
