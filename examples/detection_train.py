#!/usr/bin/env python3
"""Detection: torchvision's Faster R-CNN (MobileNetV3-Large FPN, no weights)
trained a few steps on a COCO dataset whose boxes stoker moves with the
pixels (Loader(targets=True)).

    bin/stoker mkdata --coco --out /tmp/det --n 200
    bin/stoker serve --listen 127.0.0.1:7070 --dataset det=/tmp/det/images/train \\
        --annotations det=/tmp/det/annotations/instances.json &
    python examples/detection_train.py --target 127.0.0.1:7070 --dataset det
    python examples/detection_train.py --transform detr   # the DETR recipes', 640x640
    python examples/detection_train.py --transform frcnn  # multi-scale: each image its own size

Each batch is (images, targets): uint8 images of one size, and per sample a
dict of "boxes" (tv_tensors.BoundingBoxes, XYXY, in the output's pixels),
"labels", "iscrowd" and "image_id". --transform rrc (the default) is a
RandomResizedCrop of --size, a flip and a ColorJitter: boxes a crop left
empty come as zero-width or zero-height boxes on the edge, which the loop
drops, with the crowds, as torchvision's detection references do, before
the model sees them. --transform detr is the preset "detr"
(RandomPhotometricDistort, RandomZoomOut, RandomIoUCrop,
SanitizeBoundingBoxes, RandomHorizontalFlip, Resize((640, 640)),
SanitizeBoundingBoxes), which drops them itself. --transform frcnn is
the preset "frcnn" (the detection references' multi-scale recipe:
RandomShortestSize(480..800, max_size=1333), the flip,
SanitizeBoundingBoxes): each image its own size, which
Loader(image_list=True) gives as a list of each image's own [3, h, w]
(the batch sent ragged, nothing padded), as the model takes them.
"""
from __future__ import annotations

import argparse
import math

import torch
from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_fpn

import stoker
from stoker import transforms as T


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="127.0.0.1:7070")
    ap.add_argument("--dataset", default="det")
    ap.add_argument("--batch-size", type=int, default=2)
    ap.add_argument("--transform", choices=("rrc", "detr", "frcnn"), default="rrc")
    ap.add_argument("--size", type=int, default=256, help="the rrc transform's output side (detr: 640)")
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()

    classes = next(d for d in stoker.list_datasets(a.target) if d.name == a.dataset).classes
    if a.transform == "detr":
        tf, a.size = "detr", 640
    elif a.transform == "frcnn":
        tf, a.size = "frcnn", 800
    else:
        tf = T.Compose([T.RandomResizedCrop(a.size, scale=(0.3, 1.0)), T.RandomHorizontalFlip(),
                        T.ColorJitter(0.2, 0.2, 0.2)])
    # labels="contiguous": a COCO set's categories as 0..K-1 (by default its
    # labels are the file's category ids, as torchvision's wrapper gives
    # them). Label 0 is the background for torchvision's detectors: the
    # contiguous labels go up by one.
    loader = stoker.Loader(a.target, a.dataset, transform=tf, batch_size=a.batch_size, targets=True,
                           image_list=a.transform == "frcnn", labels="contiguous")
    model = fasterrcnn_mobilenet_v3_large_fpn(weights=None, weights_backbone=None, num_classes=len(classes) + 1,
                                              min_size=a.size, max_size=1333 if a.transform == "frcnn" else a.size)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.005, momentum=0.9)
    steps = 0
    with loader:
        while steps < a.steps:
            for images, targets in loader:
                ims, tgs = [], []
                for im, t in zip(images, targets):
                    b = t["boxes"]
                    keep = (b[:, 2] - b[:, 0] >= 1) & (b[:, 3] - b[:, 1] >= 1) & (t["iscrowd"] == 0)
                    ims.append(im.float() / 255)
                    tgs.append({"boxes": b[keep].as_subclass(torch.Tensor), "labels": t["labels"][keep] + 1})
                losses = model(ims, tgs)
                loss = sum(losses.values())
                if not math.isfinite(float(loss)):
                    raise SystemExit(f"step {steps}: loss {float(loss)}")
                opt.zero_grad()
                loss.backward()
                opt.step()
                boxes = sum(len(t["boxes"]) for t in tgs)
                print(f"step {steps}: loss {float(loss):.4f} ({boxes} boxes in {len(ims)} images)", flush=True)
                steps += 1
                if steps == a.steps:
                    break
    print(f"trained {steps} steps")


if __name__ == "__main__":
    main()
