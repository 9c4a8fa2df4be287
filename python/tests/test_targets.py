"""Loader(targets=True): each sample's boxes and labels moved through its
geometry by the server, checked against torchvision itself. For every
sample, torchvision's CocoDetection wrapper (wrap_dataset_for_transforms_v2)
gives the source BoundingBoxes (YOLO: the label file's boxes as
tv_tensors.BoundingBoxes, CXCYWH in pixels, converted to XYXY), and the
sample's trace (Loader(trace=True): the ops it drew, with their arguments) is
replayed on them through torchvision.transforms.v2.functional; the boxes
must be the same float32 bits, the canvas the same, the labels the same.
A job whose transform has another geometric op is refused, naming it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
import torch
from PIL import Image
from torchvision import tv_tensors
from torchvision.datasets import CocoDetection, wrap_dataset_for_transforms_v2
from torchvision.transforms import v2 as tv2
from torchvision.transforms.v2 import InterpolationMode
from torchvision.transforms.v2 import functional as F

import stoker
from stoker import transforms as T
from stoker._errors import StokerError
from stoker._local import LocalServer

N = 24

# The trace's ops that move boxes, and those that leave them (torchvision
# passes a BoundingBoxes through them).
GEOMETRY = {"resized_crop", "resize", "center_crop", "pad", "crop", "horizontal_flip", "vertical_flip",
            "sanitize_bounding_boxes", "iou_crop", "convert_bounding_box_format", "rotate", "affine", "perspective"}
PIXELS = {"adjust_brightness", "adjust_contrast", "adjust_saturation", "adjust_hue", "rgb_to_grayscale",
          "gaussian_blur", "solarize", "posterize", "invert", "equalize", "autocontrast", "adjust_sharpness",
          "erase", "normalize", "permute_channels"}

# Transforms through every geometry the targets support: a crop inside the
# image, one past it (CenterCrop larger than the image pads; RandomCrop with
# padding and pad_if_needed), Pad before and after, both flips, and ops on
# pixels alone between them. mkdata's images are 320 to 480 pixels a side.
TRANSFORMS = {
    "rrc-hflip-jitter": [T.RandomResizedCrop(64, scale=(0.2, 1.0)), T.RandomHorizontalFlip(),
                         T.ColorJitter(0.4, 0.4, 0.4, 0.1), T.RandomVerticalFlip()],
    "resize-center-vflip": [T.Resize(72), T.CenterCrop((56, 80)), T.RandomVerticalFlip(), T.RandomGrayscale(0.5)],
    "resize-hw": [T.Resize((50, 70)), T.RandomHorizontalFlip(0.5)],
    "pad-randomcrop": [T.Pad((3, 5, 7, 2)), T.RandomCrop((300, 350), padding=(10, 20), pad_if_needed=True),
                       T.RandomHorizontalFlip()],
    "randomcrop-padded": [T.RandomCrop((400, 460), pad_if_needed=True), T.RandomVerticalFlip(),
                          T.RandomErasing(p=0.5)],
    "centercrop-past": [T.CenterCrop((431, 401)), T.Pad(4), T.RandomHorizontalFlip()],
    "center-pad-crop": [T.Pad((6, 2)), T.CenterCrop((300, 500))],
    # Small crops cut boxes to slivers, which SanitizeBoundingBoxes drops
    # where it stands: before the flip, and again after the resize.
    "rrc-sanitize": [T.RandomResizedCrop(48, scale=(0.02, 0.2)), T.SanitizeBoundingBoxes(min_size=2, min_area=6),
                     T.RandomHorizontalFlip(), T.SanitizeBoundingBoxes()],
    "resize-sanitize": [T.Resize((40, 40)), T.SanitizeBoundingBoxes(min_size=3.5, min_area=20)],
    # RandomZoomOut: the boxes padded with the image, then the canvas
    # resized (flipped after), or cropped and sanitized.
    "zoom-resize": [T.RandomZoomOut(fill=(10, 20, 30), side_range=(1, 3), p=0.7), T.Resize((64, 80)),
                    T.RandomHorizontalFlip()],
    "zoom-randomcrop": [T.RandomZoomOut(side_range=(1.5, 2.5), p=0.8), T.RandomCrop((300, 300)),
                        T.SanitizeBoundingBoxes()],
    # RandomIoUCrop: the boxes whose centre it leaves out come as (0, 0, 0,
    # 0), moved by the ops after it (the flip makes them (W, 0, W, 0)) until
    # a SanitizeBoundingBoxes drops them; the DETR recipes' geometry.
    "iou-resize": [T.RandomIoUCrop(), T.Resize((96, 80))],
    "iou-flip": [T.RandomIoUCrop(sampler_options=[0.1, 0.3, 0.5], trials=10), T.RandomHorizontalFlip(),
                 T.Resize((64, 64))],
    "detr": [T.RandomPhotometricDistort(), T.RandomZoomOut(p=0.6), T.RandomIoUCrop(), T.SanitizeBoundingBoxes(min_size=1),
             T.RandomHorizontalFlip(), T.Resize((80, 80)), T.SanitizeBoundingBoxes(), T.ConvertBoundingBoxFormat("CXCYWH")],
    # ConvertBoundingBoxFormat last: the boxes come in its format (only ops
    # on pixels after it).
    "resize-xywh": [T.Resize((72, 64)), T.RandomHorizontalFlip(), T.ConvertBoundingBoxFormat("XYWH"), T.ColorJitter(0.2)],
    # and containers of ops on pixels (once refused as containers)
    "resize-cxcywh-apply": [T.Resize((64, 72)), T.RandomVerticalFlip(), T.ConvertBoundingBoxFormat("CXCYWH"),
                            T.RandomApply([T.ColorJitter(0.2), T.RandomGrayscale(0.5)], p=0.7)],
}

# The ops each transform's traces show (each flip drawn on some sample).
GEOMETRY_OF = {
    "rrc-hflip-jitter": {"resized_crop", "horizontal_flip", "vertical_flip", "adjust_brightness"},
    "resize-center-vflip": {"resize", "center_crop", "vertical_flip", "rgb_to_grayscale"},
    "resize-hw": {"resize", "horizontal_flip"},
    "pad-randomcrop": {"pad", "crop", "horizontal_flip"},
    "randomcrop-padded": {"pad", "crop", "vertical_flip", "erase"},
    "centercrop-past": {"center_crop", "pad", "horizontal_flip"},
    "center-pad-crop": {"pad", "center_crop"},
    "rrc-sanitize": {"resized_crop", "sanitize_bounding_boxes", "horizontal_flip"},
    "resize-sanitize": {"resize", "sanitize_bounding_boxes"},
    "zoom-resize": {"pad", "resize", "horizontal_flip"},
    "zoom-randomcrop": {"pad", "crop", "sanitize_bounding_boxes"},
    "iou-resize": {"iou_crop", "resize"},
    "iou-flip": {"iou_crop", "horizontal_flip", "resize"},
    "detr": {"permute_channels", "pad", "iou_crop", "sanitize_bounding_boxes", "horizontal_flip", "resize",
             "convert_bounding_box_format"},
    "resize-xywh": {"resize", "horizontal_flip", "convert_bounding_box_format", "adjust_brightness"},
    "resize-cxcywh-apply": {"resize", "vertical_flip", "convert_bounding_box_format", "adjust_brightness",
                            "rgb_to_grayscale"},
}


@pytest.fixture(scope="module")
def det(targets_det: Path) -> Path:
    """The session's detection set (conftest's targets_det): this module's
    and every module that imports this fixture."""
    return targets_det


@pytest.fixture(scope="module")
def server(targets_server: str) -> str:
    """The session's server over ``det`` (conftest's targets_server)."""
    return targets_server


def replay(boxes: tv_tensors.BoundingBoxes, trace: List[Any]) -> Tuple[tv_tensors.BoundingBoxes, torch.Tensor]:
    """torchvision's functional ops of a sample's trace, on its boxes; also
    which of the source's instances are left (SanitizeBoundingBoxes drops
    some, where it stands)."""
    keep = torch.ones(boxes.shape[0], dtype=torch.bool)
    for name, args in trace:
        if name in PIXELS:
            continue
        assert name in GEOMETRY, f"an op the targets do not support in the trace: {name}"
        kw = dict(args)
        if name == "sanitize_bounding_boxes":
            boxes, valid = F.sanitize_bounding_boxes(boxes, **kw)
            left = keep.nonzero().flatten()
            keep[left[~valid]] = False
            continue
        if name == "convert_bounding_box_format":
            boxes = F.convert_bounding_box_format(boxes, new_format=kw["new_format"])
            continue
        if name == "iou_crop":  # RandomIoUCrop.transform, its make_params' is_within_crop_area
            boxes = tv2.RandomIoUCrop().transform(boxes, dict(kw, is_within_crop_area=iou_within(boxes, **kw)))
            continue
        if "interpolation" in kw:
            kw["interpolation"] = InterpolationMode(kw["interpolation"])
        kw.pop("fill", None)  # the pixels' fill: boxes have none
        boxes = getattr(F, name)(boxes, **kw)
    return boxes, keep


def iou_within(boxes: tv_tensors.BoundingBoxes, top: int, left: int, height: int, width: int) -> torch.Tensor:
    """RandomIoUCrop.make_params' is_within_crop_area for its crop: the
    boxes whose centre is strictly inside it."""
    xyxy = F.convert_bounding_box_format(boxes.as_subclass(torch.Tensor), boxes.format, tv_tensors.BoundingBoxFormat.XYXY)
    cx, cy = 0.5 * (xyxy[..., 0] + xyxy[..., 2]), 0.5 * (xyxy[..., 1] + xyxy[..., 3])
    return (left < cx) & (cx < left + width) & (top < cy) & (cy < top + height)


def coco_sources(det: Path) -> Dict[int, Dict[str, Any]]:
    """Per sample index, what torchvision's CocoDetection wrapper gives:
    boxes XYXY float32 (from the file's XYWH), labels (the file's category
    ids, which have gaps), iscrowd, image_id: stoker's default targets,
    compared as they are."""
    ds = wrap_dataset_for_transforms_v2(
        CocoDetection(str(det / "images" / "train"), str(det / "annotations" / "instances.json")),
        target_keys=("boxes", "labels", "iscrowd", "image_id"))
    out = {}
    for i in range(len(ds)):
        img, t = ds[i]
        h, w = F.get_size(img)
        if "boxes" not in t:  # an image without annotations
            t = {"image_id": t["image_id"], "boxes": tv_tensors.BoundingBoxes(torch.zeros(0, 4), format="XYXY", canvas_size=(h, w)),
                 "labels": torch.zeros(0, dtype=torch.int64), "iscrowd": torch.zeros(0, dtype=torch.int64)}
        else:
            t["labels"] = torch.as_tensor(t["labels"], dtype=torch.int64)
            t["iscrowd"] = torch.tensor(t["iscrowd"], dtype=torch.int64)
        out[i] = t
    return out


def check(got: Dict[str, Any], want: Dict[str, Any], trace: List[Any], image: torch.Tensor, where: str) -> int:
    """Checks one sample's targets; returns how many of its box
    coordinates lie on the canvas' edge (clamped, or there already)."""
    moved, keep = replay(want["boxes"], trace)
    assert isinstance(got["boxes"], tv_tensors.BoundingBoxes), where
    assert got["boxes"].format == moved.format, where
    assert tuple(got["boxes"].canvas_size) == tuple(moved.canvas_size) == tuple(image.shape[-2:]), where
    g, m = got["boxes"].as_subclass(torch.Tensor), moved.as_subclass(torch.Tensor)
    assert g.dtype == m.dtype == torch.float32, where
    # The same float32 bits: torchvision computes them in float32, and so
    # does the server, op for op.
    assert torch.equal(g, m), f"{where}: {trace}\n{g}\n{m}"
    assert torch.equal(got["labels"], want["labels"][keep]), where
    assert torch.equal(got["iscrowd"], want["iscrowd"][keep]), where
    assert got["image_id"] == want["image_id"], where
    h, w = image.shape[-2:]
    return int((g == 0).sum() + (g[:, 0::2] == w).sum() + (g[:, 1::2] == h).sum())


#: The transforms with a SanitizeBoundingBoxes.
SANITIZED = {"rrc-sanitize", "resize-sanitize", "zoom-randomcrop", "detr"}


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_coco_targets_are_torchvisions(server: str, det: Path, name: str) -> None:
    want = coco_sources(det)
    seen, instances, crowds, edges, ops, marked = 0, 0, 0, 0, set(), 0
    for seed in (1, 2):
        with stoker.Loader(server, "coco", batch_size=5, transform=T.Compose(TRANSFORMS[name]), targets=True,
                           trace=True, return_indices=True, pin_memory=False, timeout=60, seed=seed) as ld:
            for b in ld:
                images, targets, indices = b
                assert len(targets) == images.shape[0] and b.targets is targets
                assert b.labels.tolist() == [-1] * images.shape[0] and b.fields == {}
                for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                    edges += check(t, want[idx], b.trace[i], images[i], f"{name} seed {seed} sample {idx}")
                    ops.update(op for op, _ in b.trace[i])
                    seen += 1
                    instances += len(t["labels"])
                    crowds += int(t["iscrowd"].sum())
                    b4 = t["boxes"]  # a box RandomIoUCrop left out: (0, 0, 0, 0), flipped (W, 0, W, 0)
                    marked += int(((b4[:, 0] == b4[:, 2]) & (b4[:, 1] == 0) & (b4[:, 3] == 0)).sum())
            assert not list(ld.sample_errors)
    assert seen == 2 * N and instances > 2 * N * (name not in SANITIZED) and crowds > 0
    if name in SANITIZED:  # some instances were dropped, and some kept
        assert 0 < instances < sum(len(want[i]["labels"]) for i in want) * 2, instances
    # Some boxes were clamped to the canvas' edge (a resize alone clamps
    # none; a Pad last moves the edge's boxes off it).
    assert edges > 0 or name in ("resize-hw", "centercrop-past", "resize-sanitize", "zoom-resize", "resize-xywh", "resize-cxcywh-apply", "detr")
    # RandomIoUCrop left some boxes out, which no SanitizeBoundingBoxes
    # dropped.
    assert marked > 0 or not name.startswith("iou-"), marked
    # Every op of the transform was drawn on some sample (the flips too).
    assert GEOMETRY_OF[name] <= ops, ops


def yolo_labels(addr: str, dataset: str, images: Path) -> Iterator[Tuple[int, List[Dict[str, Any]], int, int, Any]]:
    """Each sample of a YOLO dataset: its index, its label file's labels
    (the field "yolo", as the file gives them), the image's width and
    height, and its boxes (normalized cx, cy, w, h) in pixels as
    torchvision converts them: BoundingBoxes CXCYWH of the float32 boxes
    times (W, H), to XYXY."""
    with stoker.Loader(addr, dataset, batch_size=8, transform=T.Compose([T.Resize((8, 8))]), fields=("yolo", "path"),
                       shuffle=False, return_indices=True, pin_memory=False, timeout=60) as ld:
        for b in ld:
            for raw, path, idx in zip(b.fields["yolo"], b.fields["path"], b.indices.tolist()):
                labels = json.loads(raw)["labels"]
                with Image.open(images / path.decode()) as im:
                    w, h = im.size
                box = torch.tensor([lb["box"] for lb in labels], dtype=torch.float32).reshape(-1, 4)
                box = box * torch.tensor([w, h, w, h], dtype=torch.float32)
                cxcywh = tv_tensors.BoundingBoxes(box, format="CXCYWH", canvas_size=(h, w))
                yield idx, labels, w, h, F.convert_bounding_box_format(cxcywh, new_format="XYXY")


def yolo_sources(det: Path, server: str) -> Dict[int, Dict[str, Any]]:
    """Per sample index, the label file's boxes in pixels (yolo_labels),
    labels and crowd flags (none)."""
    out = {}
    for idx, labels, _, _, boxes in yolo_labels(server, "yolo", det / "images" / "train"):
        out[idx] = {"boxes": boxes,
                    "labels": torch.tensor([lb["class"] for lb in labels], dtype=torch.int64).reshape(-1),
                    "iscrowd": torch.zeros(len(labels), dtype=torch.int64), "image_id": idx}
    return out


@pytest.mark.parametrize("name,transport", [("rrc-hflip-jitter", "grpc"), ("rrc-hflip-jitter", "shm"),
                                            ("pad-randomcrop", "auto"), ("centercrop-past", "auto")])
def test_yolo_targets_are_torchvisions(server: str, det: Path, name: str, transport: str) -> None:
    """Through both transports: the targets are the batch header's ragged
    arrays, with gRPC chunks or beside a shared-memory slot."""
    want = yolo_sources(det, server)
    assert len(want) == N
    seen = 0
    with stoker.Loader(server, "yolo", batch_size=6, transform=T.Compose(TRANSFORMS[name]), targets=True, trace=True,
                       return_indices=True, pin_memory=False, timeout=60, seed=3, transport=transport) as ld:
        for b in ld:
            images, targets, indices = b
            for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                check(t, want[idx], b.trace[i], images[i], f"yolo {name} sample {idx}")
                seen += 1
    assert seen == N


def test_without_targets_nothing_changes(server: str) -> None:
    """Without targets=True a batch is (images, labels) as before."""
    with stoker.Loader(server, "coco", batch_size=6, transform=T.Compose([T.Resize((16, 16))]), pin_memory=False,
                       timeout=60) as ld:
        b = next(iter(ld))
    images, labels = b
    assert b.targets is None and labels.tolist() == [-1] * 6


@pytest.mark.parametrize("ops,dataset,what", [
    ([T.Resize((32, 32)), T.RandAugment()], "coco", "RandAugment"),
    ([T.RandomResizedCrop(32), T.RandomRotation(10), T.AutoAugment()], "coco", "AutoAugment"),
    ([T.Resize((32, 32)), T.TrivialAugmentWide()], "yolo", "TrivialAugmentWide"),
    ([T.Resize((32, 32)), T.RandomApply([T.RandomAffine(5), T.AugMix()], p=0.5)], "coco", "AugMix"),
    ([T.Resize((32, 32))], "plain", "no annotations"),
])
def test_refused(server: str, ops: List[Any], dataset: str, what: str) -> None:
    """A job with targets and an op they do not support yet (or a dataset
    without annotations) is refused at open, naming it."""
    with stoker.Loader(server, dataset, batch_size=4, transform=T.Compose(ops), targets=True, pin_memory=False,
                       timeout=60) as ld:
        with pytest.raises(StokerError) as e:
            next(iter(ld))
    assert e.value.code == "INVALID_ARGUMENT", e.value
    assert what in str(e.value), e.value
    if dataset != "plain":
        assert "targets do not support it yet" in str(e.value), e.value


def test_refused_on_a_mix(server: str) -> None:
    with stoker.Loader(server, stoker.Mix({"coco": 0.5, "yolo": 0.5}, samples=20), batch_size=4,
                       transform=T.Compose([T.Resize((32, 32))]), targets=True, pin_memory=False, timeout=60) as ld:
        with pytest.raises(StokerError) as e:
            next(iter(ld))
    assert e.value.code == "INVALID_ARGUMENT" and "mix" in str(e.value), e.value


@pytest.mark.filterwarnings("ignore:stoker.*could not be made:RuntimeWarning")
def test_malformed_annotation_fails_its_sample(stoker_bin: Path, det: Path, tmp_path: Path) -> None:
    """A malformed annotation fails its image alone when targets are asked
    for, naming the file, the annotation and the field; the others come."""
    doc = json.loads((det / "annotations" / "instances.json").read_text())
    broken = doc["annotations"][3]
    broken["bbox"][3] = float("nan")
    ann = tmp_path / "instances.json"
    ann.write_text(json.dumps(doc))
    srv = LocalServer(str(stoker_bin), {"coco": str(det / "images" / "train")}, workers=1,
                      args=["--grace", "1s", "--annotations", f"coco={ann}"], log_path=str(tmp_path / "log"))
    with srv:
        with stoker.Loader(srv.addr, "coco", batch_size=4, transform=T.Compose([T.Resize((32, 32))]), targets=True,
                           pin_memory=False, timeout=60, shuffle=False, fail_policy="drop") as ld:
            ids = [t["image_id"] for _, targets in ld for t in targets]
            errors = list(ld.sample_errors)
    assert len(errors) == 1, errors
    reason = errors[0].reason
    assert "targets" in reason and f"annotation {broken['id']}" in reason and "field bbox" in reason, reason
    assert sorted(ids) == sorted(im["id"] for im in doc["images"] if im["id"] != broken["image_id"])


def test_targets_not_a_field() -> None:
    with pytest.raises(ValueError, match="targets=True"):
        stoker.Loader("127.0.0.1:1", "coco", fields=("targets",), targets=True)


@pytest.mark.parametrize("args,steps", [([], 3), (["--transform", "detr"], 1), (["--transform", "frcnn"], 1)])
def test_detection_example(server: str, run_script, tmp_path: Path, args: List[str], steps: int) -> None:
    """examples/detection_train.py, as a user runs it: torchvision's Faster
    R-CNN trained 3 steps on the targets (CPU), every loss finite; with
    the detr preset (640x640), 1 step; with the frcnn preset (each image
    its own size, as a list of views), 1 step. In its own process
    (conftest's run_script: forked from an interpreter that imported torch
    and torchvision once)."""
    repo = Path(__file__).resolve().parents[2]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(repo / "python"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    r = run_script([str(repo / "examples" / "detection_train.py"), "--target", server, "--dataset", "coco", "--steps",
                    str(steps), *args], cwd=tmp_path, env=env, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"trained {steps} steps" in r.stdout, r.stdout
    assert r.stdout.count(" boxes in 2 images)") == steps, r.stdout
