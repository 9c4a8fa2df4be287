"""The YOLO family's kernels (pipeline/kernels/cv) against ultralytics' own
transforms, live: the pinned ultralytics and the OpenCV it calls
(python/requirements-dev.txt) run with fixed drawn parameters on real photos
(testdata/photos, decoded by cv2), and ``stoker ops cv`` runs stoker's Go
kernels with the same parameters on the same pixels and labels.

What must agree: pixels byte for byte (cv2.resize INTER_LINEAR, the warps of
RandomPerspective, RandomHSV, LetterBox, Mosaic, MixUp, CopyPaste's paste);
RandomPerspective's matrix to the float32 bit; boxes, segments and keypoints
within 1e-3 px (issue 46's bound; the tests print how many are the same
bits); which instances are kept, their classes and keypoints' visibility,
exactly. A missing ultralytics fails the import here: nothing is skipped.
"""

from __future__ import annotations

import math
import os
import random
from pathlib import Path
from typing import Any, Dict, Iterator, List


import cv2  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from ultralytics.data import augment  # noqa: E402
from ultralytics.utils.instance import Instances  # noqa: E402

from yolo_bridge import from_wire, labels_to_wire, run_cv, to_wire  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PHOTOS = sorted((REPO / "testdata" / "photos").glob("*/*.jpg"))


def photo(i: int) -> np.ndarray:
    img = cv2.imread(str(PHOTOS[i % len(PHOTOS)]))
    assert img is not None, PHOTOS[i % len(PHOTOS)]
    return img


def diff_report(got: np.ndarray, want: np.ndarray) -> str:
    d = np.abs(got.astype(int) - want.astype(int))
    return f"{int((d > 0).sum())} of {d.size} bytes differ, at most by {int(d.max())}"


def assert_pixels(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"
    assert np.array_equal(got, want), f"{what}: {diff_report(got, want)}"


class Draws:
    """Stands in for ultralytics' `random` module: uniform() gives the given
    values in order (the drawn parameters), the rest is random's."""

    def __init__(self, values: List[float]) -> None:
        self.values: Iterator[float] = iter(values)

    def uniform(self, lo: float, hi: float) -> float:
        return next(self.values)

    def __getattr__(self, name: str) -> Any:
        return getattr(random, name)


@pytest.fixture()
def draws(monkeypatch: pytest.MonkeyPatch):
    def set_draws(values: List[float]) -> None:
        monkeypatch.setattr(augment, "random", Draws(values))
    return set_draws


def test_resize_linear(stoker_bin: Path) -> None:
    """cv2.resize INTER_LINEAR on uint8, up and down, odd sizes, an exact
    halving (OpenCV takes INTER_AREA then), and load_image's sizes."""
    cases, wants = [], []
    rng = np.random.default_rng(46)
    for i in range(len(PHOTOS)):
        img = photo(i)
        h, w = img.shape[:2]
        sizes = [(640 if w >= h else math.ceil(w * 640 / h), 640 if h >= w else math.ceil(h * 640 / w)),
                 (int(rng.integers(1, 2 * w)), int(rng.integers(1, 2 * h))), (w // 2, h // 2), (w * 2, h * 2)]
        if i % 6 == 0:
            img = img[: h - h % 2, : w - w % 2]
            sizes.append((img.shape[1] // 2, img.shape[0] // 2))
            sizes.append((1, 1))
        for dw, dh in sizes:
            cases.append({"op": "resize", "images": [to_wire(img)], "dw": dw, "dh": dh})
            wants.append(cv2.resize(img, (dw, dh), interpolation=cv2.INTER_LINEAR))
    for c, res, want in zip(cases, run_cv(stoker_bin, cases), wants):
        assert_pixels(from_wire(res["images"][0]), want, f"resize to {c['dw']}x{c['dh']}")


def perspective_draws(rng: np.random.Generator, persp: bool) -> Dict[str, float]:
    """Drawn parameters of RandomPerspective at YOLO's hyperparameters and
    beyond (degrees 0..45, translate 0.1..0.3, scale 0.5..1.5, shear 0..10,
    perspective 0 or up to 0.001)."""
    p = 0.0005 if persp else 0.0
    return {"px": float(rng.uniform(-p, p)), "py": float(rng.uniform(-p, p)),
            "angle": float(rng.uniform(-45, 45)), "scale": float(rng.uniform(0.3, 1.7)),
            "shear_x": float(rng.uniform(-10, 10)), "shear_y": float(rng.uniform(-10, 10)),
            "tx": float(rng.uniform(0.3, 0.7)), "ty": float(rng.uniform(0.3, 0.7))}


def ultralytics_matrix(draws, img: np.ndarray, d: Dict[str, float], size) -> np.ndarray:
    rp = augment.RandomPerspective(degrees=45, translate=0.3, scale=0.7, shear=10,
                                   perspective=0.001 if d["px"] or d["py"] else 0.0, size=size)
    draws([d["px"], d["py"], d["angle"], d["scale"], d["shear_x"], d["shear_y"], d["tx"], d["ty"]])
    M, s = rp._compute_affine_matrix(img, size)
    assert s == d["scale"]
    return M


def test_perspective_matrix_and_warps(stoker_bin: Path, draws) -> None:
    """RandomPerspective's M (the float32 bits) and cv2.warpAffine /
    cv2.warpPerspective with it (border 114) on photos, to sizes of their
    own and mosaic's (a 2s canvas to s)."""
    rng = np.random.default_rng(7)
    cases, wants = [], []
    for i in range(24):
        img = photo(i)
        h, w = img.shape[:2]
        size = (w, h) if i % 3 else (int(rng.integers(50, 700)), int(rng.integers(50, 700)))
        d = perspective_draws(rng, persp=i % 2 == 1)
        M = ultralytics_matrix(draws, img, d, size)
        cases.append({"op": "perspective_matrix", "images": [to_wire(img)], "perspective": d,
                      "dw": size[0], "dh": size[1]})
        wants.append(("m", M))
        if d["px"] or d["py"]:
            want = cv2.warpPerspective(img, M, dsize=size, borderValue=(114, 114, 114, 114))
            cases.append({"op": "warp_perspective", "images": [to_wire(img)], "m": M.astype(np.float64).ravel().tolist(),
                          "dw": size[0], "dh": size[1], "border": 114})
        else:
            want = cv2.warpAffine(img, M[:2], dsize=size, borderValue=(114, 114, 114, 114))
            cases.append({"op": "warp_affine", "images": [to_wire(img)], "m": M[:2].astype(np.float64).ravel().tolist(),
                          "dw": size[0], "dh": size[1], "border": 114})
        wants.append(("img", want))
    for c, res, (kind, want) in zip(cases, run_cv(stoker_bin, cases), wants):
        if kind == "m":
            got = np.array(res["m"], np.float32).reshape(3, 3)
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), \
                f"M for {c['perspective']}:\n{got}\nwant\n{want}"
        else:
            assert_pixels(from_wire(res["images"][0]), want, f"{c['op']} {c['dw']}x{c['dh']}")


def test_hsv(stoker_bin: Path) -> None:
    """RandomHSV with drawn gains on photos, and every one of the 2^24
    colours through BGR2HSV, the LUTs and HSV2BGR. Not yet OpenCV's bytes:
    BGR2HSV is (its integer tables), HSV2BGR's float path is not (OpenCV's
    SIMD code rounds otherwise than its scalar formula, which stoker
    follows): within 1, the count printed."""
    cases, wants = [], []
    cube = np.arange(1 << 24, dtype=np.uint32)
    cube = np.stack([(cube >> 16) & 255, (cube >> 8) & 255, cube & 255], -1).astype(np.uint8).reshape(4096, 4096, 3)
    for i in range(10):
        img = photo(i) if i < 8 else cube[(i - 8) * 2048:(i - 7) * 2048]
        np.random.seed(i)
        r = np.random.uniform(-1, 1, 3) * [0.015, 0.7, 0.4] if i % 4 else np.random.uniform(-1, 1, 3) * [0.5, 0.9, 0.9]
        gains = [float(v) for v in r]
        want = img.copy()
        np.random.seed(i)
        hsv = augment.RandomHSV(*(([0.015, 0.7, 0.4]) if i % 4 else [0.5, 0.9, 0.9]))
        hsv.apply_image({"img": want})
        cases.append({"op": "hsv", "images": [to_wire(img)], "gains": gains})
        wants.append(want)
    off = total = 0
    for c, res, want in zip(cases, run_cv(stoker_bin, cases), wants):
        got = from_wire(res["images"][0])
        d = np.abs(got.astype(int) - want.astype(int))
        assert d.max() <= 1, f"hsv {c['gains']}: {diff_report(got, want)}"
        off, total = off + int((d > 0).sum()), total + d.size
    print(f"\nRandomHSV: {off} of {total} bytes off by 1")


def sample_labels(rng: np.random.Generator, w: int, h: int, n: int, segs: bool = False, kpts: bool = False):
    """n instances on a w x h image: XYXY float32 boxes (some past the
    edges), 8-point segments inside each box (resampled to 100 points as the
    dataset does), 5 keypoints with visibility."""
    x = rng.uniform(-0.1 * w, 1.1 * w, (n, 2))
    y = rng.uniform(-0.1 * h, 1.1 * h, (n, 2))
    boxes = np.stack([x.min(1), y.min(1), x.max(1), y.max(1)], 1).astype(np.float32)
    cls = rng.integers(0, 80, n)
    segments = None
    if segs:
        from ultralytics.utils.ops import resample_segments
        t = np.linspace(0, 2 * np.pi, 9)[:-1]
        polys = [np.stack([(b[0] + b[2]) / 2 + (b[2] - b[0]) / 2 * np.cos(t), (b[1] + b[3]) / 2 + (b[3] - b[1]) / 2 * np.sin(t)], 1)
                 .astype(np.float32) for b in boxes]
        segments = np.stack(resample_segments(polys, n=100), 0).astype(np.float32)
    keypoints = None
    if kpts:
        keypoints = np.concatenate([rng.uniform(0, 1, (n, 5, 2)) * [w, h], rng.integers(0, 3, (n, 5, 1))], -1).astype(np.float32)
    return boxes, cls, segments, keypoints


def ul_labels(img, boxes, cls, segments, keypoints) -> Dict[str, Any]:
    return {"img": img, "cls": np.asarray(cls).reshape(-1, 1),
            "instances": Instances(boxes.copy(), None if segments is None else segments.copy(),
                                   None if keypoints is None else keypoints.copy(), bbox_format="xyxy", normalized=False)}


def assert_labels(got: Dict[str, Any], want: Dict[str, Any], what: str) -> int:
    """The kept instances, classes and visibilities exactly, coordinates
    within 1e-3 px; returns how many coordinates were not the same bits."""
    inst = want["instances"]
    wb = inst.bboxes.astype(np.float32)
    gb = np.array(got["boxes"], np.float32).reshape(-1, 4)
    assert gb.shape == wb.shape, f"{what}: {len(gb)} instances kept, ultralytics {len(wb)}"
    assert list(got["cls"]) == [int(c) for c in np.asarray(want["cls"]).reshape(-1)], f"{what}: classes"
    np.testing.assert_allclose(gb, wb, rtol=0, atol=1e-3, err_msg=f"{what}: boxes")
    inexact = int((gb != wb).sum())
    if len(inst.segments):
        gs = np.array(got["segments"], np.float32)
        np.testing.assert_allclose(gs, inst.segments, rtol=0, atol=1e-3, err_msg=f"{what}: segments")
        inexact += int((gs != inst.segments).sum())
    if inst.keypoints is not None:
        gk = np.array(got["keypoints"], np.float32).reshape(inst.keypoints.shape)
        np.testing.assert_array_equal(gk[..., 2], inst.keypoints[..., 2], err_msg=f"{what}: visibility")
        np.testing.assert_allclose(gk[..., :2], inst.keypoints[..., :2], rtol=0, atol=1e-3, err_msg=f"{what}: keypoints")
        inexact += int((gk != inst.keypoints).sum())
    return inexact


def test_random_perspective_targets(stoker_bin: Path, draws) -> None:
    """RandomPerspective.__call__ with drawn parameters: the image, and the
    boxes (with segments, keypoints) moved, clipped and filtered."""
    rng = np.random.default_rng(11)
    cases, wants = [], []
    for i in range(30):
        img = photo(i)
        h, w = img.shape[:2]
        size = (w, h) if i % 2 else (320, 256)
        d = perspective_draws(rng, persp=i % 3 == 2)
        boxes, cls, segs, kpts = sample_labels(rng, w, h, int(rng.integers(1, 12)), segs=i % 4 == 1, kpts=i % 4 == 3)
        rp = augment.RandomPerspective(degrees=45, translate=0.3, scale=0.7, shear=10,
                                       perspective=0.001 if d["px"] or d["py"] else 0.0, size=size)
        draws([d["px"], d["py"], d["angle"], d["scale"], d["shear_x"], d["shear_y"], d["tx"], d["ty"]])
        want = rp(ul_labels(img.copy(), boxes, cls, segs, kpts))
        cases.append({"op": "perspective", "images": [to_wire(img)], "perspective": d, "dw": size[0], "dh": size[1],
                      "labels": [labels_to_wire(boxes, cls, segs, kpts)]})
        wants.append(want)
    inexact = 0
    for c, res, want in zip(cases, run_cv(stoker_bin, cases), wants):
        assert_pixels(from_wire(res["images"][0]), want["img"], f"perspective {c['perspective']}")
        inexact += assert_labels(res["labels"], want, f"perspective {c['perspective']}")
    print(f"\nRandomPerspective: {inexact} coordinates within 1e-3 but not ultralytics' bits")


def test_letterbox(stoker_bin: Path) -> None:
    rng = np.random.default_rng(5)
    cases, wants = [], []
    for i in range(24):
        img = photo(i)
        h, w = img.shape[:2]
        a = {"h": int(rng.choice([640, 320, 333, 480])), "w": int(rng.choice([640, 320, 500])), "auto": i % 5 == 1,
             "scale_fill": i % 5 == 2, "scaleup": i % 3 != 0, "center": i % 4 != 3, "stride": 32}
        boxes, cls, segs, kpts = sample_labels(rng, w, h, 5, segs=i % 2 == 0, kpts=i % 3 == 0)
        lb = augment.LetterBox(new_shape=(a["h"], a["w"]), auto=a["auto"], scale_fill=a["scale_fill"],
                               scaleup=a["scaleup"], center=a["center"], stride=32)
        want = lb(ul_labels(img.copy(), boxes, cls, segs, kpts))
        cases.append({"op": "letterbox", "images": [to_wire(img)], "letterbox": a,
                      "labels": [labels_to_wire(boxes, cls, segs, kpts)]})
        wants.append(want)
    for c, res, want in zip(cases, run_cv(stoker_bin, cases), wants):
        assert_pixels(from_wire(res["images"][0]), want["img"], f"letterbox {c['letterbox']}")
        assert assert_labels(res["labels"], want, f"letterbox {c['letterbox']}") == 0


class FakeDataset:
    """What Mosaic and MixUp ask of a dataset: images as load_image gives
    them, with their labels."""

    cache = "ram"

    def __init__(self, items: List[Dict[str, Any]]) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def get_image_and_label(self, i: int) -> Dict[str, Any]:
        it = self.items[i]
        d = ul_labels(it["img"].copy(), it["boxes"], it["cls"], it["segs"], None)
        d.update({"im_file": f"{i}.jpg", "ori_shape": it["img"].shape[:2], "resized_shape": it["img"].shape[:2]})
        return d


def loaded_items(rng: np.random.Generator, n: int, imgsz: int, segs: bool) -> List[Dict[str, Any]]:
    out = []
    for i in range(n):
        img = photo(int(rng.integers(0, 1000)))
        h0, w0 = img.shape[:2]
        r = imgsz / max(h0, w0)
        w, h = min(math.ceil(w0 * r), imgsz), min(math.ceil(h0 * r), imgsz)
        img = cv2.resize(img, (w, h), interpolation=cv2.INTER_LINEAR)
        boxes, cls, sg, _ = sample_labels(rng, w, h, int(rng.integers(1 if segs else 0, 6)), segs=segs)
        out.append({"img": img, "boxes": boxes, "cls": cls, "segs": sg})
    return out


def test_mosaic(stoker_bin: Path, draws) -> None:
    """Mosaic 4 (at drawn centres) and 9 of load_image-sized photos."""
    rng = np.random.default_rng(9)
    cases, wants = [], []
    for i in range(12):
        n, imgsz = (4, 9)[i % 2], (640, 320)[i // 6]
        items = loaded_items(rng, n, imgsz, segs=i % 3 == 0)
        mosaic = augment.Mosaic(FakeDataset(items), imgsz=imgsz, p=1.0, n=n)
        mosaic.get_indexes = lambda n=n: list(range(1, n))
        yc, xc = (int(rng.uniform(imgsz // 2, 2 * imgsz - imgsz // 2)) for _ in range(2))
        draws([0.0, float(yc), float(xc)])  # __call__'s p draw, then yc, xc
        want = mosaic(FakeDataset(items).get_image_and_label(0))
        cases.append({"op": "mosaic", "images": [to_wire(it["img"]) for it in items],
                      "labels": [labels_to_wire(it["boxes"], it["cls"], it["segs"]) for it in items],
                      "mosaic": {"n": n, "imgsz": imgsz, "xc": xc, "yc": yc}})
        wants.append(want)
    for c, res, want in zip(cases, run_cv(stoker_bin, cases), wants):
        assert_pixels(from_wire(res["images"][0]), want["img"], f"mosaic {c['mosaic']}")
        assert assert_labels(res["labels"], want, f"mosaic {c['mosaic']}") == 0


def test_mixup(stoker_bin: Path) -> None:
    rng = np.random.default_rng(13)
    cases, wants = [], []
    for i in range(8):
        a, b = (cv2.resize(photo(int(rng.integers(0, 1000))), (320, 256)) for _ in range(2))
        ba, ca, _, _ = sample_labels(rng, 320, 256, 3)
        bb, cb, _, _ = sample_labels(rng, 320, 256, 2)
        ds = FakeDataset([{"img": b, "boxes": bb, "cls": cb, "segs": None}])
        mix = augment.MixUp(ds, p=1.0)
        np.random.seed(i)
        r = float(np.random.beta(32.0, 32.0))
        np.random.seed(i)
        want = mix(ul_labels(a.copy(), ba, ca, None, None))
        cases.append({"op": "mixup", "images": [to_wire(a), to_wire(b)], "r": r,
                      "labels": [labels_to_wire(ba, ca), labels_to_wire(bb, cb)]})
        wants.append(want)
    for c, res, want in zip(cases, run_cv(stoker_bin, cases), wants):
        assert_pixels(from_wire(res["images"][0]), want["img"], f"mixup r={c['r']}")
        assert assert_labels(res["labels"], want, f"mixup r={c['r']}") == 0


def test_copypaste_flip(stoker_bin: Path) -> None:
    """CopyPaste in flip mode: which mirrored segments are pasted and the
    instances, exactly; the pixels given the mask cv2.drawContours draws,
    and given none (stoker's rasterization of the selected segments,
    cv.CopyPasteMask, against cv2.drawContours)."""
    rng = np.random.default_rng(17)
    cases, wants, masks = [], [], []
    for i in range(10):
        img = cv2.resize(photo(i), (320, 256))
        boxes, cls, segs, _ = sample_labels(rng, 320, 256, int(rng.integers(1, 9)), segs=True)
        boxes = np.clip(boxes, 0, [320, 256, 320, 256]).astype(np.float32)
        segs = np.clip(segs, 0, [320, 256]).astype(np.float32)
        p = float(rng.choice([0.1, 0.5, 1.0]))
        cp = augment.CopyPaste(p=p, mode="flip")
        labels = ul_labels(img.copy(), boxes, cls, segs, None)
        params = cp.get_params(labels)
        for j in params["selected"]:
            cv2.drawContours(params["im_new"], params["instances2"].segments[[j]].astype(np.int32), -1, 1, cv2.FILLED)
        mask = params["im_new"].copy()
        params["im_new"][:] = 0
        want = cp.apply_instances(cp.apply_image(labels, params), params)
        mimg = np.repeat(mask[..., None], 3, -1)
        for given in ([to_wire(img), to_wire(mimg)], [to_wire(img)]):
            cases.append({"op": "copypaste", "images": given, "p": p, "labels": [labels_to_wire(boxes, cls, segs)]})
            wants.append((want, list(params["selected"])))
    for c, res, (want, sel) in zip(cases, run_cv(stoker_bin, cases), wants):
        what = f"copypaste p={c['p']}, mask {'given' if len(c['images']) == 2 else 'rasterized'}"
        assert res.get("ints", []) == [int(s) for s in sel], f"{what}: selected"
        assert_pixels(from_wire(res["images"][0]), want["img"], what)
        assert assert_labels(res["labels"], want, what) == 0
