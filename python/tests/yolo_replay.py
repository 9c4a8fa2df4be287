"""A served sample's trace replayed through ultralytics' own transforms
(8.4.190, live), every draw forced from the trace: a Mosaic's partners and
centre, a RandomPerspective's warp, a MixUp's partner and ratio, RandomHSV's
gains, a RandomFlip's coin. The YOLO tests (test_yolo_ops.py,
test_yolo_mosaic.py, test_yolo_mosaic_pose.py, test_yolo_segments.py,
test_yolo_copypaste.py) rebuild their samples from these pieces, and
compare what was served with `assert_served`."""

from __future__ import annotations

import contextlib
import random
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import numpy as np
import pytest

from ultralytics.data import augment  # noqa: E402


class Forced:
    """Stands in for ultralytics' `random` module: uniform() and random()
    give the given values in order; the rest is the real module."""

    def __init__(self, uniform: Sequence[float], rand: Sequence[float]) -> None:
        self.u, self.r = iter(uniform), iter(rand)

    def uniform(self, lo: float, hi: float) -> float:
        return next(self.u)

    def random(self) -> float:
        return next(self.r)

    def __getattr__(self, name: str) -> Any:
        return getattr(random, name)


def persp_draws(args: Dict[str, Any]) -> List[float]:
    """A yolo_random_perspective step's draws in RandomPerspective's order."""
    return [*args["perspective"], args["angle"], args["scale"], *args["shear"], *args["translate"]]


def centre(m: Dict[str, Any]) -> List[float]:
    """A Mosaic's draws after its p: yc, xc for 4, none for 9."""
    return [float(m["yc"]), float(m["xc"])] if m["n"] == 4 else []


def mosaic(ds: Any, m: Dict[str, Any], imgsz: int) -> augment.Mosaic:
    """ultralytics' Mosaic whose get_indexes answers the trace's partners."""
    mo = augment.Mosaic(ds, imgsz=imgsz, p=1.0, n=m["n"])
    mo.get_indexes = lambda: list(m["indexes"][1:])
    return mo


def forced(monkeypatch: pytest.MonkeyPatch, op: Callable[[Dict[str, Any]], Dict[str, Any]], labels: Dict[str, Any],
           uniform: Sequence[float] = (), rand: Sequence[float] = (), exact: bool = False) -> Dict[str, Any]:
    """op(labels) with ultralytics' random.uniform and random.random
    answering the given draws; exact: every uniform draw taken."""
    f = Forced(uniform, rand)
    with monkeypatch.context() as mp:
        mp.setattr(augment, "random", f)
        out = op(labels)
    if exact:
        assert next(f.u, None) is None, "the op drew fewer numbers than the trace holds"
    return out


def mosaic_of(ds: Any, idx: int, m: Dict[str, Any], imgsz: int, monkeypatch: pytest.MonkeyPatch) -> Dict[str, Any]:
    """Sample idx through ultralytics' Mosaic with the trace's partners and
    centre (its p drawn as applied); it must draw nothing else."""
    assert m["indexes"][0] == idx and len(m["indexes"]) == m["n"], m
    return forced(monkeypatch, mosaic(ds, m, imgsz), ds.get_image_and_label(idx), [0.0, *centre(m)], exact=True)


def warp(op: augment.RandomPerspective, args: Dict[str, Any], labels: Dict[str, Any],
         monkeypatch: pytest.MonkeyPatch) -> Dict[str, Any]:
    """A RandomPerspective with a yolo_random_perspective step's draws."""
    return forced(monkeypatch, op, labels, persp_draws(args), exact=True)


def mosaic_warped(ds: Any, idx: int, trace: List[Any], hyp: Dict[str, Any], imgsz: int,
                  monkeypatch: pytest.MonkeyPatch) -> Dict[str, Any]:
    """Sample idx through ultralytics' Mosaic and RandomPerspective(**hyp)
    with the draws of its trace's first two entries (yolo_mosaic, then
    yolo_random_perspective)."""
    (op, m), (op1, pa) = trace[0], trace[1]
    assert op == "yolo_mosaic" and op1 == "yolo_random_perspective", trace
    return warp(augment.RandomPerspective(**hyp), pa, mosaic_of(ds, idx, m, imgsz, monkeypatch), monkeypatch)


_argsort = np.argsort


@contextlib.contextmanager
def stable_argsort(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A context in which ultralytics' np.argsort (CopyPaste's, CutMix's)
    is a stable sort: ties in index order, as stoker takes them."""
    with monkeypatch.context() as mp:
        mp.setattr(augment.np, "argsort", lambda a, *args, **kw: _argsort(a, kind="stable"))
        yield


def mixup(ds: Any, labels: Dict[str, Any], mx: Dict[str, Any], pre: List[Any], monkeypatch: pytest.MonkeyPatch,
          stable_sort: bool = False) -> Dict[str, Any]:
    """ultralytics' MixUp of labels with a yolo_mixup step's partner (made by
    pre, v8_transforms' pre_transform: its Mosaic first, then a
    RandomPerspective where the step has one) and ratio forced."""
    m2 = mx["mosaic"]
    draws = [0.0, 0.0, *centre(m2)]  # MixUp's p, the partner's Mosaic's p, its centre
    if "perspective" in mx:
        draws += persp_draws(mx["perspective"][1])
    mix = augment.MixUp(ds, pre_transform=augment.Compose(pre), p=1.0)
    mix.get_indexes = lambda: m2["indexes"][0]
    with contextlib.ExitStack() as st:
        if stable_sort:
            st.enter_context(stable_argsort(monkeypatch))
        mp = st.enter_context(monkeypatch.context())
        mp.setattr(augment.np.random, "beta", lambda a, b: mx["r"])
        return forced(monkeypatch, mix, labels, draws, exact=True)


def finish(labels: Dict[str, Any], steps: List[Any], monkeypatch: pytest.MonkeyPatch,
           flip_idx: Optional[List[int]] = None) -> Dict[str, Any]:
    """The steps that end v8_transforms, replayed: RandomHSV with the
    trace's gains, RandomFlip (with flip_idx where the dataset has
    keypoints) drawn as flipped. Any other step fails the replay."""
    for name, args in steps:
        if name == "yolo_random_hsv":
            with monkeypatch.context() as mp:
                mp.setattr(augment.np.random, "uniform", lambda *a, **k: np.array(args["r"], np.float64))
                labels = augment.RandomHSV(1.0, 1.0, 1.0)(labels)
        elif name in ("yolo_fliplr", "yolo_flipud"):
            if flip_idx is not None:
                assert args["flip_idx"] == flip_idx, args
            op = augment.RandomFlip(p=0.5, direction="horizontal" if name == "yolo_fliplr" else "vertical", flip_idx=flip_idx)
            labels = forced(monkeypatch, op, labels, rand=[0.0])  # drawn: flipped
        else:
            raise AssertionError(f"unexpected step {name} in {steps}")
    return labels


def served_bgr(images: Any, i: int) -> np.ndarray:
    """Sample i of a served batch as OpenCV's BGR HWC array."""
    return images[i].numpy().transpose(1, 2, 0)[..., ::-1]


def assert_served(got: np.ndarray, t: Dict[str, Any], want: Dict[str, Any], where: str, tol: int = 0) -> np.ndarray:
    """The served sample (got: BGR HWC; t: its targets) against
    ultralytics' labels: the pixels within tol, the same instances and
    classes, the boxes (XYXY) within 1e-3 px. Returns ultralytics' boxes
    as float32, and counts the bytes that differ in want["_off"]."""
    assert got.shape == want["img"].shape, f"{where}: shape {got.shape}, ultralytics {want['img'].shape}"
    d = np.abs(got.astype(int) - want["img"].astype(int))
    assert d.max() <= tol, f"{where}: {int((d > 0).sum())} bytes differ, by up to {int(d.max())}"
    want["_off"] = int((d > 0).sum())
    inst = want["instances"]
    inst.convert_bbox("xyxy")
    wb = inst.bboxes.astype(np.float32)
    gb = t["boxes"].numpy()
    assert gb.shape == wb.shape, f"{where}: {len(gb)} instances, ultralytics {len(wb)}"
    assert t["labels"].tolist() == [int(c) for c in want["cls"].reshape(-1)], f"{where}: classes"
    np.testing.assert_allclose(gb, wb, rtol=0, atol=1e-3, err_msg=f"{where}: boxes")
    return wb
