"""Loader(targets=(..., "masks")): each instance's mask moved through the
sample's geometry by the server, checked against torchvision itself. The
source masks are torchvision's CocoDetection wrapper's
(wrap_dataset_for_transforms_v2 with "masks": pycocotools' annToMask), and
each sample's trace is replayed on them, as a tv_tensors.Mask, through
torchvision.transforms.v2.functional (FixedSizeCrop, no v2 class: the
detection references' crop and zero pad of target["masks"]); the masks must
be the same bytes, the instances those SanitizeBoundingBoxes keeps. A YOLO
segment dataset's masks are its polygons in pixels rasterized by
pycocotools (frPyObjects), replayed the same way."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest
import torch
from torchvision import tv_tensors
from torchvision.datasets import CocoDetection, wrap_dataset_for_transforms_v2
from torchvision.transforms.v2 import functional as F

import stoker
from stoker import transforms as T
from stoker._errors import StokerError
from test_lsj import replay_boxes
from test_targets import GEOMETRY, N, PIXELS, coco_sources, det, replay, server, yolo_labels  # noqa: F401 (the fixtures)

# Every geometry masks follow: crops inside and past the image, pads (fill
# 0), both flips, nearest resizes down and up (2x and not), RandomResizedCrop,
# RandomZoomOut, RandomIoUCrop with SanitizeBoundingBoxes, ScaleJitter and
# FixedSizeCrop; ops on pixels alone between them. mkdata's images are 320
# to 480 pixels a side.
TRANSFORMS = {
    "rrc-flips-jitter": [T.RandomResizedCrop(64, scale=(0.2, 1.0)), T.RandomHorizontalFlip(),
                         T.ColorJitter(0.4, 0.4, 0.4, 0.1), T.RandomVerticalFlip()],
    "resize-center-vflip": [T.Resize(72), T.CenterCrop((56, 80)), T.RandomVerticalFlip(), T.RandomErasing(p=0.5)],
    "resize-up": [T.Resize((777, 901)), T.RandomHorizontalFlip()],
    "pad-randomcrop": [T.Pad((3, 5, 7, 2)), T.RandomCrop((300, 350), padding=(10, 20), pad_if_needed=True),
                       T.RandomHorizontalFlip()],
    "centercrop-past": [T.CenterCrop((431, 401)), T.Pad(4), T.RandomHorizontalFlip()],
    "rrc-sanitize": [T.RandomResizedCrop(48, scale=(0.02, 0.2)), T.SanitizeBoundingBoxes(min_size=2, min_area=6),
                     T.RandomHorizontalFlip(), T.SanitizeBoundingBoxes()],
    "detr": [T.RandomPhotometricDistort(), T.RandomZoomOut(p=0.6), T.RandomIoUCrop(), T.SanitizeBoundingBoxes(min_size=1),
             T.RandomHorizontalFlip(), T.Resize((80, 80)), T.SanitizeBoundingBoxes(), T.ConvertBoundingBoxFormat("CXCYWH")],
    "lsj": [T.ScaleJitter((200, 200)), T.FixedSizeCrop(160, fill=(123, 117, 104)), T.RandomHorizontalFlip(),
            T.SanitizeBoundingBoxes()],
}

# The ops each transform's traces show (each drawn on some sample).
OPS_OF = {
    "rrc-flips-jitter": {"resized_crop", "horizontal_flip", "vertical_flip"},
    "resize-center-vflip": {"resize", "center_crop", "vertical_flip", "erase"},
    "resize-up": {"resize", "horizontal_flip"},
    "pad-randomcrop": {"pad", "crop", "horizontal_flip"},
    "centercrop-past": {"center_crop", "pad", "horizontal_flip"},
    "rrc-sanitize": {"resized_crop", "sanitize_bounding_boxes", "horizontal_flip"},
    "detr": {"pad", "iou_crop", "sanitize_bounding_boxes", "horizontal_flip", "resize"},
    "lsj": {"resize", "fixed_size_crop", "horizontal_flip", "sanitize_bounding_boxes"},
}


def coco_masks(det: Path) -> Dict[int, torch.Tensor]:
    """Per sample index, torchvision's CocoDetection wrapper's masks
    (pycocotools'), uint8 [K, H, W]."""
    ds = wrap_dataset_for_transforms_v2(
        CocoDetection(str(det / "images" / "train"), str(det / "annotations" / "instances.json")),
        target_keys=("masks",))
    out = {}
    for i in range(len(ds)):
        img, t = ds[i]
        h, w = F.get_size(img)
        out[i] = t["masks"] if "masks" in t else torch.zeros(0, h, w, dtype=torch.uint8)
    return out


def replay_masks(masks: torch.Tensor, boxes: tv_tensors.BoundingBoxes, trace: List[Any]) -> torch.Tensor:
    """torchvision's functional ops of a sample's trace on its masks (a
    tv_tensors.Mask); the instances SanitizeBoundingBoxes (and
    FixedSizeCrop) drop, found on the boxes by test_targets.replay, dropped
    with them."""
    m = tv_tensors.Mask(masks)
    keep = torch.ones(masks.shape[0], dtype=torch.bool)
    for name, args in trace:
        kw = dict(args)
        if name in PIXELS or name in ("sanitize_bounding_boxes", "convert_bounding_box_format"):
            continue
        if name == "fixed_size_crop":
            # The detection references' FixedSizeCrop: crop (the boxes left
            # without width or height dropped), then pad target["masks"]
            # with 0, whatever the image's fill.
            h, w = F.get_size(m)
            if (kw["height"], kw["width"]) != (h, w):
                m = F.crop(m, top=kw["top"], left=kw["left"], height=kw["height"], width=kw["width"])
            pad = [0, 0, kw["size"][1] - kw["width"], kw["size"][0] - kw["height"]]
            if pad != [0, 0, 0, 0]:
                m = F.pad(m, pad, fill=0)
            continue
        assert name in GEOMETRY, f"an op masks do not support in the trace: {name}"
        if name == "iou_crop":  # RandomIoUCrop crops a Mask (it marks boxes only)
            m = F.crop(m, **kw)
            continue
        if name == "pad":
            assert all(v == 0 for v in kw["fill"]), kw  # masks: fill 0 only (else refused)
            kw["fill"] = 0  # pad_mask takes a number
        kw.pop("interpolation", None)  # resize_mask: NEAREST
        kw.pop("antialias", None)
        m = getattr(F, name)(m, **kw)
    return m


def fixed_keep(boxes: tv_tensors.BoundingBoxes, trace: List[Any]) -> torch.Tensor:
    """Which instances the trace keeps: test_targets.replay's, with
    FixedSizeCrop's drop (test_lsj's fixed_size_crop) where it stands."""
    _, keep = replay_boxes(boxes, trace)
    return keep


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_coco_masks_are_torchvisions(server: str, det: Path, name: str) -> None:
    want, src = coco_sources(det), coco_masks(det)
    seen, instances, set_px, ops = 0, 0, 0, set()
    for seed in (1, 2):
        with stoker.Loader(server, "coco", batch_size=5, transform=T.Compose(TRANSFORMS[name]),
                           targets=("boxes", "labels", "masks"), trace=True, return_indices=True,
                           pin_memory=False, timeout=60, seed=seed) as ld:
            for b in ld:
                images, targets, indices = b
                for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                    trace = b.trace[i]
                    where = f"{name} seed {seed} sample {idx}: {trace}"
                    assert set(t) == {"boxes", "labels", "masks"}, where
                    m = t["masks"]
                    assert isinstance(m, tv_tensors.Mask) and m.dtype == torch.uint8, where
                    assert tuple(m.shape) == (len(t["labels"]),) + tuple(images.shape[-2:]), where
                    keep = fixed_keep(want[idx]["boxes"], trace)
                    moved = replay_masks(src[idx], want[idx]["boxes"], trace)[keep]
                    assert torch.equal(m.as_subclass(torch.Tensor), moved.as_subclass(torch.Tensor)), where
                    assert torch.equal(t["labels"], want[idx]["labels"][keep]), where
                    ops.update(op for op, _ in trace)
                    seen += 1
                    instances += m.shape[0]
                    set_px += int(m.sum())
            assert not list(ld.sample_errors)
    assert seen == 2 * N and instances > 0 and set_px > 0
    assert OPS_OF[name] <= ops, ops

