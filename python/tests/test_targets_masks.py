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
from test_targets import GEOMETRY, N, PIXELS, coco_sources, det, server, yolo_labels  # noqa: F401 (the fixtures)

# Every geometry masks follow: crops inside and past the image, pads (fill
# 0), both flips, nearest resizes down and up (2x and not), RandomResizedCrop,
# RandomZoomOut, RandomIoUCrop with SanitizeBoundingBoxes, ScaleJitter and
# FixedSizeCrop, RandomRotation and RandomAffine; ops on pixels alone
# between them. mkdata's images are 320
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
    # Rotations and affines (nearest, fill 0) between separable ops: about
    # the centre and a given point, torchvision's fast paths of 90 and 180
    # degrees on a square canvas, every RandomAffine parameter.
    "rotate": [T.Resize((96, 128)), T.CenterCrop((80, 100)), T.RandomRotation(30), T.RandomHorizontalFlip()],
    "rotate-center-90": [T.Resize((64, 64)), T.RandomChoice([T.RandomRotation((90, 90)), T.RandomRotation((180, 180)),
                                                            T.RandomRotation(20, center=(10, 50))])],
    "affine-sanitize": [T.RandomResizedCrop(80, scale=(0.3, 1.0)),
                        T.RandomAffine(15, translate=(0.1, 0.1), scale=(0.8, 1.2), shear=(-5, 5, -3, 3)),
                        T.SanitizeBoundingBoxes(min_size=2), T.RandomVerticalFlip()],
    # A rotation, then an affine of its result, then a flip.
    "rotate-affine": [T.Resize((72, 90)), T.RandomRotation(25), T.RandomAffine(10, translate=(0.05, 0.1), scale=(0.9, 1.1)),
                      T.RandomHorizontalFlip()],
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
    "rotate": {"resize", "rotate", "horizontal_flip", "center_crop"},
    "rotate-center-90": {"resize", "rotate"},
    "affine-sanitize": {"resized_crop", "affine", "sanitize_bounding_boxes", "vertical_flip"},
    "rotate-affine": {"resize", "rotate", "affine", "horizontal_flip"},
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
        if name in ("pad", "rotate", "affine", "perspective") and kw.get("fill") is not None:
            assert len(set(kw["fill"])) == 1, kw  # a Mask's fill is one number (pad_mask refuses more)
            kw["fill"] = int(kw["fill"][0])  # the Mask kernels take a number
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



def yolo_masks(server: str, det: Path) -> Dict[int, Dict[str, Any]]:
    """Per sample index of the YOLO layout: its boxes and labels (as
    test_targets' yolo_sources) and its masks: each segment line's
    normalized polygon times the image's width and height in float32 (as
    ultralytics scales a segment), rasterized by pycocotools."""
    from pycocotools import mask as cocomask

    out = {}
    for idx, labels, w, h, boxes in yolo_labels(server, "yolo", det / "images" / "train"):
        ms = []
        for lb in labels:
            xy = np.asarray(lb["polygon"], dtype=np.float32).reshape(-1, 2) * np.asarray([w, h], dtype=np.float32)
            rle = cocomask.merge(cocomask.frPyObjects([xy.reshape(-1).astype(np.float64).tolist()], h, w))
            ms.append(torch.from_numpy(cocomask.decode(rle)))
        out[idx] = {"boxes": boxes, "labels": torch.tensor([lb["class"] for lb in labels], dtype=torch.int64).reshape(-1),
                    "masks": torch.stack(ms) if ms else torch.zeros(0, h, w, dtype=torch.uint8)}
    return out


@pytest.mark.parametrize("name,transport", [("rrc-flips-jitter", "grpc"), ("detr", "shm"), ("centercrop-past", "auto")])
def test_yolo_masks_are_torchvisions(server: str, det: Path, name: str, transport: str) -> None:
    """A YOLO segment dataset's masks, through both transports."""
    want = yolo_masks(server, det)
    assert len(want) == N
    seen, set_px = 0, 0
    with stoker.Loader(server, "yolo", batch_size=6, transform=T.Compose(TRANSFORMS[name]), targets=("masks", "labels"),
                       trace=True, return_indices=True, pin_memory=False, timeout=60, seed=3, transport=transport) as ld:
        for b in ld:
            images, targets, indices = b
            for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                trace, where = b.trace[i], f"yolo {name} sample {idx}"
                assert list(t) == ["masks", "labels"], where
                keep = fixed_keep(want[idx]["boxes"], trace)
                moved = replay_masks(want[idx]["masks"], want[idx]["boxes"], trace)[keep]
                assert torch.equal(t["masks"].as_subclass(torch.Tensor), moved.as_subclass(torch.Tensor)), where
                assert torch.equal(t["labels"], want[idx]["labels"][keep]), where
                seen += 1
                set_px += int(t["masks"].sum())
        assert not list(ld.sample_errors)
    assert seen == N and set_px > 0


def test_targets_true_has_no_masks(server: str) -> None:
    """targets=True is every key but "masks" (torchvision's
    wrap_dataset_for_transforms_v2 default); a tuple gives exactly its
    keys, in its order."""
    tf = T.Compose([T.Resize((16, 16))])
    with stoker.Loader(server, "coco", batch_size=6, transform=tf, targets=True, pin_memory=False, timeout=60) as ld:
        _, targets = next(iter(ld))
    assert all(set(t) == {"boxes", "labels", "iscrowd", "image_id", "keypoints", "keypoints_visibility"} for t in targets)
    with stoker.Loader(server, "coco", batch_size=6, transform=tf, targets=("image_id", "masks", "iscrowd"),
                       pin_memory=False, timeout=60) as ld:
        _, targets = next(iter(ld))
    assert all(list(t) == ["image_id", "masks", "iscrowd"] and t["masks"].shape[1:] == (16, 16) for t in targets)


def wire_size(t: Dict[str, Any], p: int) -> int:
    """The bytes of a sample's targets with masks (docs/detection.md): the
    targets' 24 + 25K + 9KP, to a multiple of 4, K run counts, the runs
    (a mask's changes of value, plus one, plus one more when its first
    pixel is set: the runs start with 0s)."""
    m = t["masks"].as_subclass(torch.Tensor).reshape(t["masks"].shape[0], -1).to(torch.int16)
    k = m.shape[0]
    runs = int((m[:, 1:] != m[:, :-1]).sum()) + k + int(m[:, 0].sum())
    return (24 + 25 * k + 9 * k * p + 3) // 4 * 4 + 4 * k + 4 * runs


@pytest.mark.expect_warning(RuntimeWarning, match="could not be made")
def test_masks_over_the_bound_fail_alone(server: str) -> None:
    """A sample whose targets with masks pass max_targets_bytes fails by
    itself, naming the field and the bound; exactly those over it fail, and
    the others come whole."""
    tf = T.Compose([T.Resize((64, 64))])
    with stoker.Loader(server, "coco", batch_size=1, transform=tf, targets=("keypoints", "masks"),
                       pin_memory=False, timeout=60, return_indices=True, shuffle=False) as ld:
        sizes = {int(i): wire_size(t[0], t[0]["keypoints"].shape[1]) for _, t, i in ld}
    bound = sorted(sizes.values())[N // 2]
    with stoker.Loader(server, "coco", batch_size=N, transform=tf, targets=("boxes", "masks"), max_targets_bytes=bound,
                       fail_policy="drop", max_sample_errors=N, pin_memory=False, timeout=60, return_indices=True,
                       drop_last=False) as ld:
        got = sorted(int(i) for b in ld for i in b.indices)
        errors = list(ld.sample_errors)
    assert got == sorted(i for i, n in sizes.items() if n <= bound) and len(got) >= N // 2
    assert len(errors) == N - len(got) > 0
    assert all('field "targets" takes at least' in e.reason and f"bound of {bound} bytes (max_targets_bytes)" in e.reason
               for e in errors), errors[0].reason


@pytest.mark.parametrize("ops,targets,what", [
    # A fill of several values: torchvision's pad_mask refuses it (a plain
    # fill of one value fills the masks too: test_targets_mask_fill).
    ([T.Resize((32, 32)), T.RandomRotation(10, fill=(3, 4, 5))], ("boxes", "masks"), "RandomRotation (op 1): fill [3 4 5] with masks"),
    ([T.Pad(4, fill=(7, 7, 8)), T.CenterCrop(64)], ("masks",), "Pad (op 0): fill [7 7 8] with masks"),
    ([T.RandomZoomOut(fill=(1, 2, 3)), T.Resize((32, 32))], ("masks",), "RandomZoomOut (op 0): fill [1 2 3] with masks"),
])
def test_masks_refused(server: str, ops: List[Any], targets: Any, what: str) -> None:
    with pytest.raises(StokerError) as e:
        with stoker.Loader(server, "coco", batch_size=4, transform=T.Compose(ops), targets=targets, pin_memory=False,
                           timeout=60) as ld:
            next(iter(ld))
    assert e.value.code == "INVALID_ARGUMENT" and what in str(e.value), str(e.value)


@pytest.mark.parametrize("targets,error", [(("boxes", "area"), ValueError), ((), ValueError), (("masks", "masks"), ValueError),
                                           ("masks", TypeError)])
def test_target_names_checked(server: str, targets: Any, error: type) -> None:
    with pytest.raises(error):
        stoker.Loader(server, "coco", batch_size=4, targets=targets)
