"""Keypoints through YOLOMosaic (4 and 9), its YOLORandomPerspective and
YOLOMixUp, served: a real `stoker serve` of test_yolo_ops.py's YOLO pose
layout (mkdata --coco's images, `class cx cy w h` and 5 (x, y, v) keypoints
a line, kpt_shape [5, 3]) and a real client with targets and traces; each
sample rebuilt by ultralytics' own (8.4.190, live) Mosaic, RandomPerspective,
MixUp, RandomHSV and RandomFlip (with flip_idx) on its own YOLODataset of
the same files (task="pose"), with the partners, centres, warps, ratio,
gains and flips forced from stoker's trace. What must agree: the pixels
(exact; RandomHSV within 1), the instances kept and their classes, the boxes
and keypoints within 1e-3 px, the visibilities exactly (a keypoint that the
mosaic's clip or the warp takes off the canvas made invisible).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest

from ultralytics.cfg import DEFAULT_CFG  # noqa: E402
from ultralytics.data import augment  # noqa: E402
from ultralytics.data.dataset import YOLODataset  # noqa: E402

import stoker  # noqa: E402
from stoker import transforms as T  # noqa: E402
from test_yolo_ops import FLIP_IDX, N, P, pose  # noqa: E402,F401 (the fixture)
from yolo_replay import assert_served, finish, mixup, mosaic, mosaic_of, served_bgr, warp  # noqa: E402

IMGSZ = 160
# v8_transforms' RandomPerspective with more rotation and shear than its
# default hyp (0, 0), so that keypoints turn off the canvas.
PERSP = dict(degrees=10.0, translate=0.1, scale=0.5, shear=2.0, perspective=0.0)

RECIPES: Dict[str, List[Any]] = {
    # The mosaic alone, flipped both ways with flip_idx (its 2*IMGSZ canvas).
    "mosaic4": [T.YOLOMosaic(IMGSZ, n=4), T.YOLORandomFlip(0.5, direction="vertical", flip_idx=FLIP_IDX),
                T.YOLORandomFlip(0.5, direction="horizontal", flip_idx=FLIP_IDX)],
    "mosaic9": [T.YOLOMosaic(IMGSZ, n=9), T.YOLORandomFlip(0.5, direction="horizontal", flip_idx=FLIP_IDX)],
    # yolov8-pose's training pipeline (v8_transforms), with mixup on.
    "pose": [T.YOLOMosaic(IMGSZ), T.YOLORandomPerspective(size=IMGSZ, **PERSP), T.YOLOMixUp(0.5),
             T.YOLORandomHSV(0.015, 0.7, 0.4), T.YOLORandomFlip(0.5, direction="horizontal", flip_idx=FLIP_IDX)],
}


def rebuild(ds: YOLODataset, idx: int, trace: List[Any], monkeypatch: pytest.MonkeyPatch) -> Dict[str, Any]:
    """Sample idx as ultralytics makes it with the trace's draws forced."""
    name, m = trace[0]
    assert name == "yolo_mosaic", trace
    labels = mosaic_of(ds, idx, m, IMGSZ, monkeypatch)
    rest = trace[1:]
    persp = None
    if rest and rest[0][0] == "yolo_random_perspective":
        persp = augment.RandomPerspective(size=(IMGSZ, IMGSZ), **PERSP)
        labels = warp(persp, rest[0][1], labels, monkeypatch)
        rest = rest[1:]
    if rest and rest[0][0] == "yolo_mixup":
        mx = rest[0][1]
        pre: List[Any] = [mosaic(ds, mx["mosaic"], IMGSZ)]
        if persp is not None:
            pre.append(augment.RandomPerspective(size=(IMGSZ, IMGSZ), **PERSP))
        labels = mixup(ds, labels, mx, pre, monkeypatch)
        rest = rest[1:]
    return finish(labels, rest, monkeypatch, flip_idx=FLIP_IDX)


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_mosaic_keypoints_are_ultralytics(pose: Any, monkeypatch: pytest.MonkeyPatch, recipe: str) -> None:
    addr, out = pose
    ds = YOLODataset(img_path=str(out / "images" / "train"), task="pose", imgsz=IMGSZ, augment=True, hyp=DEFAULT_CFG,
                     data={"names": {i: c for i, c in enumerate("abcde")}, "kpt_shape": [P, 3], "flip_idx": FLIP_IDX,
                           "channels": 3})
    assert len(ds) == N
    hsv = recipe == "pose"
    side = IMGSZ if recipe == "pose" else 2 * IMGSZ
    seen, mixed, flips, points, edge_hidden = 0, 0, 0, 0, 0
    with stoker.Loader(addr, "pose", batch_size=4, transform=T.Compose(RECIPES[recipe]), targets=True, trace=True,
                       return_indices=True, pin_memory=False, timeout=300, seed=11) as ld:
        for b in ld:
            images, targets, indices = b
            assert images.shape[1:] == (3, side, side)
            for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                trace = b.trace[i]
                want = rebuild(ds, idx, trace, monkeypatch)
                mixed += any(s[0] == "yolo_mixup" for s in trace)
                flips += any(s[0] in ("yolo_fliplr", "yolo_flipud") for s in trace)
                where = f"{recipe} sample {idx} ({trace[0][1]['indexes']})"
                wb = assert_served(served_bgr(images, i), t, want, where, tol=1 if hsv else 0)
                inst = want["instances"]
                wk = inst.keypoints
                assert wk is not None and wk.shape == (len(wb), P, 3), where
                gk = t["keypoints"].numpy().reshape(-1, P, 2)
                gv = t["keypoints_visibility"].numpy().reshape(-1, P)
                np.testing.assert_array_equal(gv, wk[..., 2].astype(np.uint8), err_msg=f"{where}: visibility")
                np.testing.assert_allclose(gk, wk[..., :2], rtol=0, atol=1e-3, err_msg=f"{where}: keypoints")
                points += gk.shape[0] * P
                on_edge = (gk[..., 0] == 0) | (gk[..., 1] == 0) | (gk[..., 0] == side) | (gk[..., 1] == side)
                edge_hidden += int((on_edge & (gv == 0)).sum())
                seen += 1
        assert not list(ld.sample_errors)
    assert seen == N and points > 4 * N and 0 < flips < N
    assert edge_hidden > 0, "no keypoint was taken off the canvas: the case is too easy"
    if recipe == "pose":
        assert 0 < mixed < N
    print(f"\n{recipe}: {points} keypoints, {edge_hidden} clipped to the edge and hidden, {mixed} mixed")
