"""Boxes through RandomRotation and RandomAffine, against torchvision.

1. The box maths alone: torchvision.transforms.v2.functional's rotate and
   affine on tv_tensors.BoundingBoxes (XYXY float32, with their
   canvas_size, clamping_mode "soft") over a grid of explicit parameters
   (angles, translations, scales, shears, centers, 1 to 9 boxes, boxes
   past the canvas and degenerate ones) make pipeline/testdata/
   targets_affine.json, which the Go test TestAffineBoxesGolden holds the
   server's arithmetic to, bit for bit. Here the file is checked to be what
   torchvision computes now (STOKER_UPDATE_GOLDEN=1 rewrites it).
2. End to end: a real `stoker serve` over mkdata --coco's set (and its YOLO
   layout), jobs with targets whose transforms rotate and shear; each
   sample's trace (Loader(trace=True): the angle, translate, scale, shear
   and center the pixels were moved by) replayed on its source boxes
   through torchvision.transforms.v2.functional (test_targets.replay), in
   XYXY, XYWH and CXCYWH.

Exactness: torch computes the corners through the matrix with torch.matmul,
whose float32 sums are ordered by the BLAS it dispatches to (on x86-64: its
own gemm below 16 points, MKL's fused multiply-adds above); the server
follows that order. Where torch here gives the file's bits (the
`torch_is_stokers` fixture), the end-to-end boxes must be torchvision's
float32 bits; elsewhere within torchvision's own tolerance
(torch.testing.assert_close's float32 defaults, rtol 1.3e-6, atol 1e-5).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest
import torch
import torchvision
from torchvision import tv_tensors
from torchvision.transforms.v2 import functional as F

import stoker
from stoker import transforms as T
from test_targets import N, coco_sources, det, replay, server, yolo_sources  # noqa: F401 (the fixtures)

GOLDEN = Path(__file__).resolve().parents[2] / "pipeline" / "transform" / "testdata" / "targets_affine.json"


def golden_cases() -> List[Dict[str, Any]]:
    """The grid: each case a canvas, its boxes and one rotate or affine."""
    rng = np.random.default_rng(46)
    cases = []
    angles = [0.0, 90.0, -90.0, 180.0, 45.0, -30.5, 359.9, 1e-3, 270.0]
    for i in range(72):
        w, h = int(rng.integers(8, 700)), int(rng.integers(8, 700))
        k = [1, 2, 3, 4, 5, 9][i % 6]  # both of torch.matmul's paths
        x = rng.uniform(-0.2 * w, 1.1 * w, size=(k, 2))
        y = rng.uniform(-0.2 * h, 1.1 * h, size=(k, 2))
        boxes = np.stack([x.min(1), y.min(1), x.max(1), y.max(1)], 1).astype(np.float32)
        if i % 7 == 3:
            boxes[0] = 0  # RandomIoUCrop's mark
        if i % 5 == 1:
            boxes[-1, 2] = boxes[-1, 0]  # zero width
        angle = angles[i % len(angles)] if i % 3 == 0 else float(rng.uniform(-180, 180))
        center = None if i % 4 else [float(rng.uniform(-20, w + 20)), float(np.round(rng.uniform(0, h)))]
        if i % 2 == 0:
            args: Dict[str, Any] = {"angle": angle, "center": center}
            fn = "rotate"
        else:
            fn = "affine"
            args = {"angle": angle, "translate": [float(np.round(rng.uniform(-0.3, 0.3) * w)),
                                                  float(np.round(rng.uniform(-0.3, 0.3) * h))],
                    "scale": float(rng.uniform(0.3, 2.0)),
                    "shear": [float(rng.uniform(-40, 40)) if i % 3 else 0.0, float(rng.uniform(-40, 40)) if i % 5 else 0.0],
                    "center": center}
        cases.append({"fn": fn, "w": w, "h": h, "args": args, "boxes": boxes.tolist()})
    return cases


def torchvision_boxes(c: Dict[str, Any]) -> torch.Tensor:
    bb = tv_tensors.BoundingBoxes(torch.tensor(c["boxes"], dtype=torch.float32), format="XYXY",
                                  canvas_size=(c["h"], c["w"]))
    assert bb.clamping_mode == "soft"
    out = getattr(F, c["fn"])(bb, **c["args"])
    assert tuple(out.canvas_size) == (c["h"], c["w"])
    return out.as_subclass(torch.Tensor)


@pytest.fixture(scope="module")
def torch_is_stokers() -> bool:
    """Whether torchvision here computes the golden file's bits (which the
    server's arithmetic is held to): torch.matmul orders its sums as the
    server does."""
    doc = json.loads(GOLDEN.read_text())
    return all(torch.equal(torchvision_boxes(c), torch.tensor(c["want"], dtype=torch.float32)) for c in doc["cases"])


def test_golden_file_is_torchvisions() -> None:
    cases = golden_cases()
    for c in cases:
        c["want"] = torchvision_boxes(c).tolist()
    if os.environ.get("STOKER_UPDATE_GOLDEN") == "1":
        doc = {"torch": torch.__version__, "torchvision": torchvision.__version__,
               "what": "python/tests/test_targets_affine.py: torchvision's rotate and affine on XYXY float32 "
                       "BoundingBoxes (clamping_mode soft); pipeline/targets_affine_test.go checks the server's",
               "cases": cases}
        GOLDEN.write_text(json.dumps(doc, indent=None, separators=(",", ":")) + "\n")
    doc = json.loads(GOLDEN.read_text())
    assert [{k: v for k, v in c.items() if k != "want"} for c in doc["cases"]] == \
        [{k: v for k, v in c.items() if k != "want"} for c in cases], "the grid changed: STOKER_UPDATE_GOLDEN=1"
    exact = 0
    for i, (c, d) in enumerate(zip(cases, doc["cases"])):
        got, want = torch.tensor(c["want"], dtype=torch.float32), torch.tensor(d["want"], dtype=torch.float32)
        torch.testing.assert_close(got, want, msg=lambda m: f"case {i} {c['fn']} {c['args']}: {m}")
        exact += torch.equal(got, want)
    print(f"\n{exact} of {len(cases)} cases the file's bits (torch {torch.__version__})")
    # Both of torch.matmul's summation orders, and boxes clamped on every
    # side, are in the grid.
    assert {len(c["boxes"]) for c in cases} >= {1, 3, 4, 9}
    wants = np.concatenate([np.array(c["want"], np.float32) for c in cases])
    assert (wants[:, 0] == 0).any() and (wants[:, 3] > 0).any()
    assert any(math.isclose(max(b[2] for b in c["want"]), c["w"]) for c in cases)


# Transforms that rotate and shear the boxes after the geometry, with the
# ops around them (RandomIoUCrop's marked boxes rotated, sanitized, flips,
# a conversion last). mkdata's images are 320 to 480 pixels a side.
TRANSFORMS = {
    "resize-rotate": [T.Resize((96, 128)), T.RandomRotation(30)],
    "rrc-rotate-center-flip": [T.RandomResizedCrop((80, 100), scale=(0.3, 1.0)),
                               T.RandomRotation((-180, 180), interpolation="bilinear", center=(20.5, 70)),
                               T.RandomHorizontalFlip()],
    "affine-sanitize": [T.Resize((90, 110)),
                        T.RandomAffine(25, translate=(0.2, 0.1), scale=(0.7, 1.3), shear=(-10, 10, -5, 5)),
                        T.SanitizeBoundingBoxes(min_size=1)],
    "affine-center-cxcywh": [T.Resize(100), T.CenterCrop((88, 88)),
                             T.RandomAffine((-90, 90), translate=(0.1, 0.3), shear=15, center=(10, 80),
                                            fill=(30, 60, 90)),
                             T.RandomVerticalFlip(), T.ConvertBoundingBoxFormat("CXCYWH")],
    "apply-rotate-scale-xywh": [T.Resize((64, 64)), T.RandomApply([T.RandomRotation(45)], p=0.6),
                                T.RandomAffine(0, scale=(0.5, 1.5)), T.ConvertBoundingBoxFormat("XYWH"),
                                T.ColorJitter(0.2)],
    "iou-rotate": [T.RandomZoomOut(p=0.5), T.RandomIoUCrop(), T.Resize((96, 96)), T.RandomRotation(20),
                   T.SanitizeBoundingBoxes()],
}
OPS_OF = {
    "resize-rotate": {"rotate"},
    "rrc-rotate-center-flip": {"rotate", "horizontal_flip"},
    "affine-sanitize": {"affine", "sanitize_bounding_boxes"},
    "affine-center-cxcywh": {"affine", "vertical_flip", "convert_bounding_box_format"},
    "apply-rotate-scale-xywh": {"rotate", "affine", "convert_bounding_box_format"},
    "iou-rotate": {"iou_crop", "rotate", "sanitize_bounding_boxes"},
}


def compare(got: Dict[str, Any], want: Dict[str, Any], trace: List[Any], image: torch.Tensor, exact: bool,
            where: str) -> bool:
    """One sample's targets against torchvision's replay of its trace:
    the boxes' bits when exact, else within assert_close's float32
    defaults; the format, canvas, labels, crowds and image id the same.
    Returns whether the boxes were the same bits."""
    moved, keep = replay(want["boxes"], trace)
    assert got["boxes"].format == moved.format, where
    assert tuple(got["boxes"].canvas_size) == tuple(moved.canvas_size) == tuple(image.shape[-2:]), where
    g, m = got["boxes"].as_subclass(torch.Tensor), moved.as_subclass(torch.Tensor)
    assert g.dtype == m.dtype == torch.float32, where
    same = torch.equal(g, m)
    if exact:
        assert same, f"{where}: {trace}\n{g}\n{m}\n{g - m}"
    else:
        torch.testing.assert_close(g, m, msg=lambda s: f"{where}: {trace}: {s}")
    assert torch.equal(got["labels"], want["labels"][keep]), where
    assert torch.equal(got["iscrowd"], want["iscrowd"][keep]), where
    assert got["image_id"] == want["image_id"], where
    return same


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_rotated_targets_are_torchvisions(server: str, det: Path, torch_is_stokers: bool, name: str) -> None:  # noqa: F811
    want = coco_sources(det)
    seen, same, instances, ops, moved = 0, 0, 0, set(), 0
    for seed in (1, 2):
        with stoker.Loader(server, "coco", batch_size=5, transform=T.Compose(TRANSFORMS[name]), targets=True,
                           trace=True, return_indices=True, pin_memory=False, timeout=60, seed=seed) as ld:
            for b in ld:
                images, targets, indices = b
                for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                    where = f"{name} seed {seed} sample {idx}"
                    same += compare(t, want[idx], b.trace[i], images[i], torch_is_stokers, where)
                    steps = dict(b.trace[i])
                    # Some rotations turned the boxes by a real angle.
                    moved += abs(steps.get("rotate", steps.get("affine", {"angle": 0}))["angle"]) > 1
                    ops.update(op for op, _ in b.trace[i])
                    instances += len(t["labels"])
                    seen += 1
            assert not list(ld.sample_errors)
    assert seen == 2 * N and instances > N and moved > N // 2, (seen, instances, moved)
    assert OPS_OF[name] <= ops, ops
    print(f"\n{name}: {same} of {seen} samples torchvision's bits (exact required: {torch_is_stokers})")


def test_yolo_rotated_targets_are_torchvisions(server: str, det: Path, torch_is_stokers: bool) -> None:  # noqa: F811
    want = yolo_sources(det, server)
    seen = 0
    tf = T.Compose([T.RandomResizedCrop(72, scale=(0.4, 1.0)),
                    T.RandomAffine(180, translate=(0.1, 0.1), scale=(0.8, 1.2), shear=20, interpolation="bilinear")])
    with stoker.Loader(server, "yolo", batch_size=6, transform=tf, targets=True, trace=True, return_indices=True,
                       pin_memory=False, timeout=60, seed=5) as ld:
        for b in ld:
            images, targets, indices = b
            for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                compare(t, want[idx], b.trace[i], images[i], torch_is_stokers, f"yolo sample {idx}")
                seen += 1
    assert seen == N
