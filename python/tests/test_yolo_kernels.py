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
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterator, List

os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp(prefix="ultralytics-"))
os.environ.setdefault("YOLO_OFFLINE", "1")

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
