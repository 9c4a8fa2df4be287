"""YOLOXMixUp served: `stoker serve` over a YOLO layout of PNGs, a Loader
with T.YOLOMosaic, T.YOLORandomPerspective and T.YOLOXMixUp, each sample's
trace naming its partner and the draws (jit, flip, the crop's offset).
YOLOX's own MosaicDetection.mixup (Megvii-BaseDetection/YOLOX at
6ddff48, copied below: YOLOX is not installable beside the pinned torch)
run on ultralytics' mosaic and warp of the same files with those draws
forced must give the same pixels (exact: PNGs decode to the same bytes)
and boxes (within 1e-3 px) and classes."""

from __future__ import annotations

import random as _random
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Sequence, Tuple

import cv2
import numpy as np
import pytest

import stoker
from stoker import transforms as T

from ultralytics.data.dataset import YOLODataset  # noqa: E402
from ultralytics.utils.instance import Instances  # noqa: E402
from test_yolo_mosaic import served_yolo_pngs  # noqa: E402
from yolo_bridge import from_wire, labels_to_wire, run_cv, to_wire  # noqa: E402
from yolo_replay import assert_served, mosaic_warped, served_bgr  # noqa: E402

N = 14
IMGSZ = 160
HYP = dict(degrees=0.0, translate=0.1, scale=0.5, shear=0.0, perspective=0.0, size=(IMGSZ, IMGSZ))
REPO = Path(__file__).resolve().parents[2]
PHOTOS = sorted((REPO / "testdata" / "photos").glob("*/*.jpg"))


# YOLOX's yolox/utils/boxes.py adjust_box_anns and
# yolox/data/datasets/mosaicdetection.py MosaicDetection.mixup, at
# 6ddff4824372906469a7fae2dc3206c7aa4bbaee (Apache-2.0, Copyright (c)
# Megvii, Inc. and its affiliates), verbatim; `random` is this module's,
# which the test forces.
def adjust_box_anns(bbox, scale_ratio, padw, padh, w_max, h_max):
    bbox[:, 0::2] = np.clip(bbox[:, 0::2] * scale_ratio + padw, 0, w_max)
    bbox[:, 1::2] = np.clip(bbox[:, 1::2] * scale_ratio + padh, 0, h_max)
    return bbox


class MosaicDetection:
    def __init__(self, dataset: Any, mixup_scale=(0.5, 1.5)) -> None:
        self._dataset = dataset
        self.mixup_scale = mixup_scale

    def __len__(self) -> int:
        return len(self._dataset)

    def mixup(self, origin_img, origin_labels, input_dim):
        jit_factor = random.uniform(*self.mixup_scale)
        FLIP = random.uniform(0, 1) > 0.5
        cp_labels = []
        while len(cp_labels) == 0:
            cp_index = random.randint(0, self.__len__() - 1)
            cp_labels = self._dataset.load_anno(cp_index)
        img, cp_labels, _, _ = self._dataset.pull_item(cp_index)

        if len(img.shape) == 3:
            cp_img = np.ones((input_dim[0], input_dim[1], 3), dtype=np.uint8) * 114
        else:
            cp_img = np.ones(input_dim, dtype=np.uint8) * 114

        cp_scale_ratio = min(input_dim[0] / img.shape[0], input_dim[1] / img.shape[1])
        resized_img = cv2.resize(
            img,
            (int(img.shape[1] * cp_scale_ratio), int(img.shape[0] * cp_scale_ratio)),
            interpolation=cv2.INTER_LINEAR,
        )

        cp_img[
            : int(img.shape[0] * cp_scale_ratio), : int(img.shape[1] * cp_scale_ratio)
        ] = resized_img

        cp_img = cv2.resize(
            cp_img,
            (int(cp_img.shape[1] * jit_factor), int(cp_img.shape[0] * jit_factor)),
        )
        cp_scale_ratio *= jit_factor

        if FLIP:
            cp_img = cp_img[:, ::-1, :]

        origin_h, origin_w = cp_img.shape[:2]
        target_h, target_w = origin_img.shape[:2]
        padded_img = np.zeros(
            (max(origin_h, target_h), max(origin_w, target_w), 3), dtype=np.uint8
        )
        padded_img[:origin_h, :origin_w] = cp_img

        x_offset, y_offset = 0, 0
        if padded_img.shape[0] > target_h:
            y_offset = random.randint(0, padded_img.shape[0] - target_h - 1)
        if padded_img.shape[1] > target_w:
            x_offset = random.randint(0, padded_img.shape[1] - target_w - 1)
        padded_cropped_img = padded_img[
            y_offset: y_offset + target_h, x_offset: x_offset + target_w
        ]

        cp_bboxes_origin_np = adjust_box_anns(
            cp_labels[:, :4].copy(), cp_scale_ratio, 0, 0, origin_w, origin_h
        )
        if FLIP:
            cp_bboxes_origin_np[:, 0::2] = (
                origin_w - cp_bboxes_origin_np[:, 0::2][:, ::-1]
            )
        cp_bboxes_transformed_np = cp_bboxes_origin_np.copy()
        cp_bboxes_transformed_np[:, 0::2] = np.clip(
            cp_bboxes_transformed_np[:, 0::2] - x_offset, 0, target_w
        )
        cp_bboxes_transformed_np[:, 1::2] = np.clip(
            cp_bboxes_transformed_np[:, 1::2] - y_offset, 0, target_h
        )

        cls_labels = cp_labels[:, 4:5].copy()
        box_labels = cp_bboxes_transformed_np
        labels = np.hstack((box_labels, cls_labels))
        origin_labels = np.vstack((origin_labels, labels))
        origin_img = origin_img.astype(np.float32)
        origin_img = 0.5 * origin_img + 0.5 * padded_cropped_img.astype(np.float32)

        return origin_img.astype(np.uint8), origin_labels
# (end of YOLOX's code)


random: Any = _random


class Draws:
    """Stands in for `random` in the copy above: uniform() and randint()
    give the trace's draws in order."""

    def __init__(self, uniform: Sequence[float], randint: Sequence[int]) -> None:
        self.u, self.i = iter(uniform), iter(randint)

    def uniform(self, lo: float, hi: float) -> float:
        return next(self.u)

    def randint(self, lo: int, hi: int) -> int:
        v = next(self.i)
        assert lo <= v <= hi, (v, lo, hi)
        return v


class COCOLike:
    """YOLOX's COCODataset as its mixup reads one: load_anno and pull_item
    of (BGR image load_resized_img'd, labels [x1, y1, x2, y2, class] times
    load_anno_from_ids' r, img_size (h, w): the mixup's input_dim), from item(index):
    the image as decoded, its boxes XYXY in its pixels (float32, as stoker
    reads them) and classes."""

    def __init__(self, n: int, item: Callable[[int], Tuple[np.ndarray, np.ndarray, np.ndarray]], img_size: Tuple[int, int]) -> None:
        self.n, self.item, self.img_size = n, item, img_size

    def __len__(self) -> int:
        return self.n

    def load_anno(self, index: int) -> np.ndarray:
        return self.pull_item(index)[1]

    def pull_item(self, index: int):
        img, boxes, cls = self.item(index)
        h0, w0 = img.shape[:2]
        res = np.zeros((len(cls), 5))
        res[:, 0:4] = boxes
        res[:, 4] = np.asarray(cls).reshape(-1)
        r = min(self.img_size[0] / h0, self.img_size[1] / w0)
        res[:, :4] *= r
        resized = cv2.resize(img, (int(img.shape[1] * r), int(img.shape[0] * r)), interpolation=cv2.INTER_LINEAR).astype(np.uint8)
        return resized, res, (h0, w0), (resized.shape[0], resized.shape[1])


def yolo_item(ds: YOLODataset) -> Callable[[int], Tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The YOLO layout's image index as COCOLike's item: its boxes from
    ultralytics' normalized labels at its size (convert_bbox, denormalize:
    stoker reads them so)."""
    def item(index: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        img = cv2.imread(ds.im_files[index])
        lab = ds.labels[index]
        ins = Instances(lab["bboxes"].copy(), bbox_format="xywh", normalized=True)
        ins.convert_bbox("xyxy")
        ins.denormalize(img.shape[1], img.shape[0])
        return img, ins.bboxes.astype(np.float32), lab["cls"]
    return item


def forced_mixup(ref: MosaicDetection, img: np.ndarray, origin: np.ndarray, mx: Dict[str, Any], monkeypatch: pytest.MonkeyPatch):
    """ref.mixup of img (labels origin) with the draws mx forced (its jit,
    flip, partner index and offsets); every draw taken."""
    h, w = img.shape[:2]
    randints: List[int] = [mx["index"]]
    jw, jh = int(w * mx["jit"]), int(h * mx["jit"])
    for big, off in ((jh > h, "y_offset"), (jw > w, "x_offset")):
        if big:
            randints.append(mx[off])
        else:
            assert mx[off] == 0, mx
    draws = Draws([mx["jit"], 1.0 if mx["flip"] else 0.0], randints)
    with monkeypatch.context() as mp:
        mp.setattr(sys.modules[__name__], "random", draws)
        out = ref.mixup(img, origin, (h, w))
    assert next(draws.u, None) is None and next(draws.i, None) is None, "YOLOX drew fewer numbers than given"
    return out


@pytest.fixture(scope="module")
def yolo_png(stoker_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with served_yolo_pngs(stoker_bin, tmp_path_factory, N, IMGSZ, seed=3) as served:
        yield served


def yolox_mixup(ds: YOLODataset, want: Dict[str, Any], mx: Dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Dict[str, Any]:
    """YOLOX's mixup of want (ultralytics' labels dict: BGR image, XYXY
    instances) with the trace's partner and draws forced."""
    inst = want["instances"]
    inst.convert_bbox("xyxy")
    origin = np.hstack([inst.bboxes.astype(np.float64), want["cls"].reshape(-1, 1).astype(np.float64)])
    ref = MosaicDetection(COCOLike(len(ds), yolo_item(ds), (IMGSZ, IMGSZ)))
    out_img, labels = forced_mixup(ref, want["img"], origin, mx, monkeypatch)
    return {"img": out_img, "instances": Instances(labels[:, :4].astype(np.float32), bbox_format="xyxy", normalized=False),
            "cls": labels[:, 4:5]}


def test_yolox_mixup_is_yoloxs(yolo_png, monkeypatch: pytest.MonkeyPatch) -> None:
    """p=0.6: a mixed sample's trace has its yolox_mixup entry (partner,
    jit, flip, offsets); ultralytics' Mosaic and RandomPerspective, then
    YOLOX's mixup with those forced, give the same pixels, boxes (the
    partner's after the sample's, the empty ones kept, as YOLOX keeps
    them) and classes."""
    addr, ds = yolo_png
    tf = T.Compose([T.YOLOMosaic(IMGSZ), T.YOLORandomPerspective(translate=0.1, scale=0.5, size=IMGSZ),
                    T.YOLOXMixUp(0.6, mixup_scale=(0.5, 1.5))])
    mixed, flips, jits = 0, set(), []
    for seed in (5, 6):
        with stoker.Loader(addr, "y", batch_size=5, transform=tf, targets=True, trace=True, return_indices=True,
                           pin_memory=False, timeout=120, seed=seed) as ld:
            for b in ld:
                images, targets, indices = b
                assert images.shape[1:] == (3, IMGSZ, IMGSZ)
                for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                    trace = b.trace[i]
                    want = mosaic_warped(ds, idx, trace, HYP, IMGSZ, monkeypatch)
                    if len(trace) > 2:
                        op2, mx = trace[2]
                        assert op2 == "yolox_mixup" and 0.5 <= mx["jit"] < 1.5, trace
                        img0 = cv2.imread(ds.im_files[mx["index"]])
                        assert list(mx["size"]) == [img0.shape[1], img0.shape[0]], mx
                        assert mx["applied"] == (len(want["cls"]) > 0), mx
                        if mx["applied"]:
                            want = yolox_mixup(ds, want, mx, monkeypatch)
                            mixed += 1
                            flips.add(mx["flip"])
                            jits.append(mx["jit"])
                    assert_served(served_bgr(images, i), t, want, f"sample {idx} ({trace})")
            assert not list(ld.sample_errors)
    assert 0 < mixed < 2 * N and flips == {False, True}
    assert min(jits) < 1 < max(jits), jits  # the canvas both shrunk (padded with 0) and grown (cropped)


def test_yolox_mixup_placement_is_checked(yolo_png) -> None:
    """Where YOLOX's recipe does not put it, the job is refused saying so."""
    addr, _ = yolo_png
    for tf, want in [(T.Compose([T.YOLOMosaic(IMGSZ), T.YOLOXMixUp()]), "YOLORandomPerspective"),
                     (T.Compose([T.YOLOMosaic(IMGSZ), T.YOLORandomPerspective(size=IMGSZ), T.YOLOMixUp(0.5), T.YOLOXMixUp()]),
                      "without a YOLOMixUp"),
                     (T.Compose([T.YOLOMosaic(IMGSZ), T.YOLORandomPerspective(size=IMGSZ), T.YOLOXMixUp(mixup_scale=(1.5, 0.5))]),
                      "mixup_scale")]:
        with pytest.raises(Exception, match=want):
            with stoker.Loader(addr, "y", batch_size=2, transform=tf, targets=True, pin_memory=False, timeout=60) as ld:
                next(iter(ld))



def test_yolox_mixup_kernel_on_photos(stoker_bin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel alone (``stoker ops cv``'s case yolox_mixup) on real
    photos decoded by cv2: samples of 640x640 and 640x480, partners as
    decoded, shrunk and grown by the load (some shapes whose int()
    truncation makes the mixup resize them again), the jit at its ends and
    between, both flips, offsets drawn over the padded canvas: YOLOX's
    pixels byte for byte, its boxes within 1e-3 px."""
    assert len(PHOTOS) >= 8, "testdata/photos"
    rng = np.random.default_rng(29)
    cases, wants, resized_twice = [], [], 0
    for i in range(12):
        w, h = (640, 640) if i % 2 == 0 else (640, 480)
        sample = cv2.resize(cv2.imread(str(PHOTOS[i % len(PHOTOS)])), (w, h))
        part = cv2.imread(str(PHOTOS[(i * 5 + 3) % len(PHOTOS)]))
        if i % 3 == 1:  # a partner larger than the sample: the load shrinks it
            part = cv2.resize(part, (int(part.shape[1] * 2.7), int(part.shape[0] * 2.3)))
        elif i % 3 == 2:  # odd shapes; 303x211, 154x53: load_resized_img gives 639 wide, the mixup resizes it to 640
            shape = [(303, 211), (154, 53)][i % 2] if i < 6 else (int(rng.integers(97, 900)), int(rng.integers(53, 700)))
            part = cv2.resize(part, shape)
        jit = [0.5, 1.5, 1.0][i % 3] if i < 6 else float(rng.uniform(0.5, 1.5))
        n = int(rng.integers(1, 6))
        x, y = rng.uniform(0, part.shape[1], (n, 2)), rng.uniform(0, part.shape[0], (n, 2))
        pboxes = np.stack([x.min(1), y.min(1), x.max(1), y.max(1)], 1).astype(np.float32)
        pcls = rng.integers(0, 80, len(pboxes))
        sboxes = np.array([[10, 20, 200, 300], [300, 100, 620, 400]], np.float32)
        scls = np.array([3, 7])
        r = min(h / part.shape[0], w / part.shape[1])
        h1, w1 = int(part.shape[0] * r), int(part.shape[1] * r)
        r2 = min(h / h1, w / w1)
        resized_twice += (int(w1 * r2), int(h1 * r2)) != (w1, h1)
        jh, jw = int(h * jit), int(w * jit)
        mx = {"index": 0, "jit": jit, "flip": bool(i % 2), "x_offset": int(rng.integers(0, jw - w)) if jw > w else 0,
              "y_offset": int(rng.integers(0, jh - h)) if jh > h else 0}
        ref = MosaicDetection(COCOLike(1, lambda _, p=part, b=pboxes, c=pcls: (p, b, c), (h, w)))
        wants.append((forced_mixup(ref, sample.copy(), np.hstack([sboxes, scls[:, None]]).astype(np.float64), mx, monkeypatch), w, h))
        cases.append({"op": "yolox_mixup", "images": [to_wire(sample), to_wire(part)], "jit": jit, "flip": mx["flip"],
                      "x_offset": mx["x_offset"], "y_offset": mx["y_offset"],
                      "labels": [labels_to_wire(sboxes, scls), labels_to_wire(pboxes, pcls)]})
    for c, res, ((img, labels), w, h) in zip(cases, run_cv(stoker_bin, cases), wants):
        what = f"yolox_mixup {w}x{h} jit={c['jit']} flip={c['flip']} offset=({c['x_offset']}, {c['y_offset']})"
        got = from_wire(res["images"][0])
        assert got.shape == img.shape and np.array_equal(got, img), f"{what}: {int((got != img).sum())} bytes differ"
        gb = np.array(res["labels"]["boxes"], np.float32).reshape(-1, 4)
        np.testing.assert_allclose(gb, labels[:, :4].astype(np.float32), rtol=0, atol=1e-3, err_msg=what)
        assert res["labels"]["cls"] == [int(v) for v in labels[:, 4]], what
    assert resized_twice > 0
