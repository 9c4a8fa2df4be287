#!/usr/bin/env python3
"""`make bench-detection`: stoker's detection presets against
torchvision.transforms.v2 running the same pipeline, interleaved, per core.

--data is a detection set as `stoker mkdata --coco` writes it (DIR/images/
train/*.jpg, DIR/annotations/instances.json; `make bench-detection` makes
one at COCO's sizes and density: --max-side 640 --instances 7). Each round
runs `stoker bench pipeline --annotations` (one thread; every batch asks for
its targets, boxes and labels moved with the pixels, as a job with targets
does), then this script's own torchvision baseline in a fresh process (one
thread: torch.set_num_threads(1)), on the same photos and annotations, so
that the machine's noise lands on both alike. The baseline is what a
torchvision user writes: the COCO file read once (as CocoDetection does),
then per sample read_file + decode_jpeg, the sample's boxes as a
tv_tensors.BoundingBoxes (XYWH converted to XYXY, as
wrap_dataset_for_transforms_v2 gives them) and its labels as an int64
tensor, and the recipe's v2 Compose on (image, {"boxes", "labels"}):

  detr: RandomPhotometricDistort(p=0.5), RandomZoomOut(fill=0),
        RandomApply([RandomIoUCrop()], p=0.8) (their RandomIoUCrop(p=0.8)),
        SanitizeBoundingBoxes(min_size=1),
        RandomHorizontalFlip(), Resize((640, 640)), SanitizeBoundingBoxes()
  ssdlite: RandomIoUCrop(), RandomHorizontalFlip(), SanitizeBoundingBoxes(),
        Resize((320, 320), antialias=False) (the detection references'
        ssdlite recipe, then its model's own resize, of a tensor)
  lsj:  ScaleJitter((1024, 1024), antialias=True), FixedSizeCrop(1024,
        fill=(123, 117, 104)) (the detection references', below: v2 has
        none), RandomHorizontalFlip(), SanitizeBoundingBoxes()
  segref: RandomResize(260, 1040), RandomHorizontalFlip(), PadIfSmaller(480,
        fill={Mask: 255, "others": 0}) (the segmentation references', below:
        v2 has none), RandomCrop(480) (their SegmentationPresetTrain at
        base_size 520, crop_size 480, use_v2=True; its ToDtype and Normalize
        left out, as stoker's preset leaves them to the GPU; the same boxes
        and labels as the others, no masks on either side)

  ssd:  RandomPhotometricDistort(), RandomZoomOut(fill=defaultdict(lambda:
        mean, {Mask: 0})), RandomIoUCrop(), RandomHorizontalFlip(),
        ConvertBoundingBoxFormat(XYXY), SanitizeBoundingBoxes() (the
        detection references' DetectionPresetTrain("ssd") as it stands, no
        resize: each sample its own size; its ToDtype left out, as stoker
        leaves it to the GPU)

which is what stoker's presets of the same names run (python/tests/
test_detection_ops.py and test_lsj.py check them sample for sample), and
for ssd the same recipe as an op list (`stoker bench pipeline --spec`, its
sizes bounded by the annotations' largest image times 4;
test_ssdref.py checks it sample for sample).
`--transform yolo` runs bench/yolocompare.py instead (the baseline is
ultralytics' own training dataloader, not torchvision; --data must then be
made with mkdata --coco --yolo).
stoker's first epoch (decoder index cold) and its later ones are reported
apart; the baseline keeps nothing between epochs, so one run of --seconds
serves both. Figures are medians over the rounds; the ratio that counts is
per CPU-second (the machine may be shared). The targets' share of a
batch's bytes (stoker's batches: targets over targets and pixels) is
reported too. With --json the last line is one JSON object of the results.

`--baseline` runs the baseline alone (what each round runs).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

#: Per core, epochs >= 2, stoker's images per CPU-second over torchvision
#: v2's running the same pipeline: the detection targets (BENCHMARKS.md,
#: "Per core: detection"); lsj has none of its own.
TARGET = {"detr": 3.0, "ssdlite": 3.0}
#: The targets' share of a batch's bytes at COCO's density, at most.
TARGET_BYTES_SHARE = 0.02
TRANSFORMS = ("detr", "ssdlite", "lsj", "segref", "ssd", "yolo")

#: The recipes stoker runs from an op list (`stoker bench pipeline --spec`),
#: not a preset: the detection references' ssd recipe as it stands (no
#: resize: each sample its own size, bounded by the annotations' largest
#: image times RandomZoomOut's 4), from_torchvision's conversion of their
#: v2 DetectionPresetTrain("ssd") without its ToDtype (left to the GPU, as
#: the other presets leave it): its RandomZoomOut's defaultdict fill pads
#: with 0 in torchvision v2 (test_ssdref.py).
SPECS = {
    "ssd": json.dumps({"ops": [
        {"randomPhotometricDistort": {"brightness": {"min": 0.875, "max": 1.125}, "contrast": {"min": 0.5, "max": 1.5},
                                      "saturation": {"min": 0.5, "max": 1.5}, "hue": {"min": -0.05, "max": 0.05},
                                      "p": 0.5}},
        {"randomZoomOut": {"sideRange": {"min": 1.0, "max": 4.0}, "p": 0.5, "maskFill": 0.0}},
        {"randomIouCrop": {"minScale": 0.3, "maxScale": 1.0, "minAspectRatio": 0.5, "maxAspectRatio": 2.0,
                           "samplerOptions": [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0], "trials": 40}},
        {"randomHorizontalFlip": {"p": 0.5}},
        {"convertBoundingBoxFormat": {"format": "XYXY"}},
        {"sanitizeBoundingBoxes": {"minSize": 1.0, "minArea": 1.0}}]}),
}


def fixed_size_crop_class():
    """torchvision's detection references' FixedSizeCrop as a v2 transform:
    one r = torch.rand(1), top int((H - h) * r), left int((W - w) * r) with
    (h, w) = min(canvas, size); a crop where the image is larger, the boxes
    it leaves without width or height dropped with their labels, clamped;
    then a pad on the right and bottom with the fill to size."""
    import torch
    from torchvision import tv_tensors
    from torchvision.transforms.v2 import functional as F

    class FixedSizeCrop(torch.nn.Module):
        def __init__(self, size: int, fill=0) -> None:
            super().__init__()
            self.size, self.fill = (size, size), fill

        def forward(self, image, target):
            H, W = F.get_size(image)
            h, w = min(H, self.size[0]), min(W, self.size[1])
            r = torch.rand(1)
            top, left = int((H - h) * r), int((W - w) * r)
            boxes, labels = target["boxes"], target["labels"]
            if (h, w) != (H, W):
                image = F.crop(image, top, left, h, w)
                boxes = F.crop(boxes, top, left, h, w)
                wh = boxes[:, 2:] - boxes[:, :2]
                keep = (wh > 0).all(dim=-1)
                boxes = F.clamp_bounding_boxes(tv_tensors.wrap(boxes.as_subclass(torch.Tensor)[keep], like=boxes))
                labels = labels[keep]
            pad = [0, 0, self.size[1] - w, self.size[0] - h]
            if pad != [0, 0, 0, 0]:
                image = F.pad(image, pad, fill=list(self.fill))
                boxes = F.pad(boxes, pad)
            return image, {**target, "boxes": boxes, "labels": labels}

    return FixedSizeCrop


def pad_if_smaller_class():
    """torchvision's segmentation references' PadIfSmaller
    (references/segmentation/v2_extras.py) as a v2 transform: padding [0,
    0, max(size - w, 0), max(size - h, 0)] with the fill of each input's
    type."""
    from torchvision.transforms import v2
    from torchvision.transforms.v2 import functional as F

    class PadIfSmaller(v2.Transform):
        def __init__(self, size: int, fill=0) -> None:
            super().__init__()
            self.size, self.fill = size, v2._utils._setup_fill_arg(fill)

        def make_params(self, flat_inputs):
            h, w = v2._utils.query_size(flat_inputs)
            padding = [0, 0, max(self.size - w, 0), max(self.size - h, 0)]
            return dict(padding=padding, needs_padding=any(padding))

        def transform(self, inpt, params):
            if not params["needs_padding"]:
                return inpt
            fill = v2._utils._get_fill(self.fill, type(inpt))
            return F.pad(inpt, padding=params["padding"], fill=v2._utils._convert_fill_arg(fill))

    return PadIfSmaller


def recipe(name: str):
    import torchvision.transforms.v2 as T

    if name == "detr":
        return T.Compose([T.RandomPhotometricDistort(p=0.5), T.RandomZoomOut(fill=0),
                          T.RandomApply([T.RandomIoUCrop()], p=0.8),
                          T.SanitizeBoundingBoxes(min_size=1), T.RandomHorizontalFlip(), T.Resize((640, 640)),
                          T.SanitizeBoundingBoxes()])
    if name == "ssdlite":
        return T.Compose([T.RandomIoUCrop(), T.RandomHorizontalFlip(), T.SanitizeBoundingBoxes(),
                          T.Resize((320, 320), antialias=False)])
    if name == "lsj":
        return T.Compose([T.ScaleJitter((1024, 1024), antialias=True),
                          fixed_size_crop_class()(1024, fill=(123, 117, 104)), T.RandomHorizontalFlip(),
                          T.SanitizeBoundingBoxes()])
    if name == "ssd":
        from collections import defaultdict

        from torchvision import tv_tensors

        mean = (123.0, 117.0, 104.0)
        return T.Compose([T.RandomPhotometricDistort(), T.RandomZoomOut(fill=defaultdict(lambda: mean, {tv_tensors.Mask: 0})),
                          T.RandomIoUCrop(), T.RandomHorizontalFlip(p=0.5),
                          T.ConvertBoundingBoxFormat(tv_tensors.BoundingBoxFormat.XYXY), T.SanitizeBoundingBoxes()])
    if name == "segref":
        from torchvision import tv_tensors

        return T.Compose([T.RandomResize(260, 1040), T.RandomHorizontalFlip(0.5),
                          pad_if_smaller_class()(480, fill={tv_tensors.Mask: 255, "others": 0}), T.RandomCrop(480)])
    sys.exit(f"detcompare: no torchvision recipe for {name!r} (want one of {', '.join(TRANSFORMS)})")


def baseline(data: str, transform: str, seconds: float) -> dict:
    """torchvision v2 on one thread: images per second and per CPU-second."""
    import torch
    from torchvision import tv_tensors
    from torchvision.io import ImageReadMode, decode_jpeg, read_file

    torch.set_num_threads(1)
    with open(os.path.join(data, "annotations", "instances.json")) as f:
        coco = json.load(f)
    rank = {c["id"]: i for i, c in enumerate(sorted(coco["categories"], key=lambda c: c["id"]))}
    anns: dict = {}
    for a in coco["annotations"]:
        anns.setdefault(a["image_id"], []).append(a)
    images = sorted(coco["images"], key=lambda im: im["id"])
    root = os.path.join(data, "images", "train")
    samples = [(os.path.join(root, im["file_name"]), im["height"], im["width"], anns.get(im["id"], [])) for im in images]
    tf = recipe(transform)

    def one(s):
        path, h, w, a = s
        img = decode_jpeg(read_file(path), mode=ImageReadMode.RGB)
        boxes = torch.tensor([x["bbox"] for x in a], dtype=torch.float32).reshape(-1, 4)
        boxes[:, 2:] += boxes[:, :2]  # XYWH to XYXY, as the v2 wrapper's convert_bounding_box_format
        target = {"boxes": tv_tensors.BoundingBoxes(boxes, format="XYXY", canvas_size=(h, w)),
                  "labels": torch.tensor([rank[x["category_id"]] for x in a], dtype=torch.int64)}
        return tf(img, target)

    for s in samples[:8]:  # warm up: imports, caches
        one(s)
    n, i = 0, 0
    t0, c0 = time.perf_counter(), time.process_time()
    deadline = t0 + seconds
    while True:
        for _ in range(8):
            one(samples[i % len(samples)])
            i += 1
            n += 1
        if time.perf_counter() >= deadline:
            break
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"impl": "tv2", "transform": transform, "images": n, "seconds": wall, "cpu_seconds": cpu,
            "images_per_sec": n / wall, "images_per_cpu_sec": n / cpu, "torch": torch.__version__}


def last_json(cmd: list[str]) -> dict:
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stoker", default=os.path.join(HERE, "..", "bin", "stoker"))
    ap.add_argument("--data", required=True, help="a detection set as stoker mkdata --coco writes it")
    ap.add_argument("--transform", default="detr", choices=TRANSFORMS)
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", action="store_true", help="run the torchvision baseline alone (one JSON line)")
    ap.add_argument("--before", help="another stoker binary run in each round too (the build before a change), "
                    "reported beside stoker and as stoker / before per CPU-second")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.before and a.transform == "yolo":
        sys.exit("detcompare: --before is for the torchvision recipes, not yolo")
    if a.transform == "yolo":  # its own baseline: ultralytics' dataloader (bench/yolocompare.py)
        if a.baseline:
            sys.exit("detcompare: yolo's baseline is bench/yolocompare.py --baseline polygons|boxes")
        cmd = [sys.executable, os.path.join(HERE, "yolocompare.py"), "--stoker", a.stoker, "--data", a.data,
               "--seconds", str(a.seconds), "--rounds", str(a.rounds)] + (["--json"] if a.json else [])
        sys.exit(subprocess.run(cmd).returncode)
    if a.baseline:
        print(json.dumps(baseline(a.data, a.transform, a.seconds)))
        return
    images = os.path.join(a.data, "images", "train")
    ann = os.path.join(a.data, "annotations", "instances.json")
    parts = ("epoch1", "later")
    ips = {"stoker epoch1": [], "stoker later": [], "tv2": []}
    runs = [("stoker", a.stoker)]
    if a.before:
        ips.update({"before epoch1": [], "before later": []})
        runs.append(("before", a.before))
    cpu = {k: [] for k in ips}
    share, inst, tbytes = [], [], []
    for r in range(a.rounds):
        which = ["--spec", SPECS[a.transform]] if a.transform in SPECS else ["--transform", a.transform]
        for name, binary in runs:
            s = last_json([binary, "bench", "pipeline", "--data", images, "--annotations", ann, "--threads", "1",
                           *which, "--seconds", str(a.seconds), "--json"])
            for p in parts:
                ips[f"{name} {p}"].append(s[p]["images_per_sec"])
                cpu[f"{name} {p}"].append(s[p]["images_per_cpu_sec"])
            errors = s["epoch1"]["errors"] + s["later"]["errors"]
            if errors:
                sys.exit(f"detcompare: {name} had {errors} sample errors")
            if name == "stoker":
                tg = s["targets"]
                share.append(tg["share_of_batch_bytes"])
                inst.append(tg["instances_per_sample"])
                tbytes.append(tg["bytes_per_sample"])
        b = last_json([sys.executable, os.path.abspath(__file__), "--baseline", "--data", a.data,
                       "--transform", a.transform, "--seconds", str(a.seconds)])
        ips["tv2"].append(b["images_per_sec"])
        cpu["tv2"].append(b["images_per_cpu_sec"])
        print(f"round {r + 1}/{a.rounds}: per CPU-second stoker epoch 1 {cpu['stoker epoch1'][-1]:.1f}, "
              f"epochs >= 2 {cpu['stoker later'][-1]:.1f}, tv2 {cpu['tv2'][-1]:.1f}", file=sys.stderr)
    med = {k: statistics.median(v) for k, v in ips.items()}
    mcpu = {k: statistics.median(v) for k, v in cpu.items()}
    res = {"transform": a.transform, "data": a.data, "rounds": a.rounds, "seconds_per_run": a.seconds, "threads": 1,
           "images_per_sec": med, "images_per_cpu_sec": mcpu, "runs_per_cpu_sec": cpu, "runs_per_sec": ips,
           "targets": {"instances_per_sample": statistics.median(inst), "bytes_per_sample": statistics.median(tbytes),
                       "share_of_batch_bytes": statistics.median(share), "target_share": TARGET_BYTES_SHARE}}
    print(f"\n{a.transform}, one thread each, median of {a.rounds} interleaved rounds on {a.data}")
    print(f"stoker: epoch 1 (cold decoder index), then epochs >= 2 for {a.seconds:g}s; torchvision v2: {a.seconds:g}s")
    print(f"{'impl':20} {'images/s':>10} {'per CPU-s':>10}   runs (per CPU-s)")
    for k in ips:
        print(f"{k:20} {med[k]:10.1f} {mcpu[k]:10.1f}   " + " ".join(f"{x:.1f}" for x in cpu[k]))
    for label, p in (("epoch 1", "epoch1"), ("epochs >= 2", "later")):
        q = {"ratio": med[f"stoker {p}"] / med["tv2"], "ratio_per_cpu_sec": mcpu[f"stoker {p}"] / mcpu["tv2"]}
        res[p] = q
        print(f"{label:12} stoker / tv2 = {q['ratio']:.2f}x images/s, {q['ratio_per_cpu_sec']:.2f}x per CPU-second")
        if a.before:
            q["vs_before_per_cpu_sec"] = mcpu[f"stoker {p}"] / mcpu[f"before {p}"]
            print(f"{label:12} stoker / before = {q['vs_before_per_cpu_sec']:.3f}x per CPU-second")
    t = res["targets"]
    word = "PASS" if t["share_of_batch_bytes"] <= TARGET_BYTES_SHARE else "FAIL"
    print(f"targets: {t['instances_per_sample']:.1f} instances and {t['bytes_per_sample']:.0f} bytes a sample after the "
          f"recipe; {100 * t['share_of_batch_bytes']:.4f}% of a batch's bytes: {word} (target <= {100 * TARGET_BYTES_SHARE:g}%)")
    target = TARGET.get(a.transform)
    ratio = res["later"]["ratio_per_cpu_sec"]
    if target is None:
        print(f"verdict: none: {a.transform} has no target of its own; stoker / tv2 per CPU-second, epochs >= 2 = {ratio:.2f}x")
    else:
        word = "PASS" if ratio >= target else "FAIL"
        res["target"], res["verdict"] = target, word
        print(f"verdict: {word}: stoker / tv2 per CPU-second, epochs >= 2 = {ratio:.2f}x; target >= {target:.1f}x")
    if a.json:
        print(json.dumps(res))


if __name__ == "__main__":
    main()
