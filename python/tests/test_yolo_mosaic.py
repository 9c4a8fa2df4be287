"""Mosaic served: `stoker serve` over a YOLO layout, a Loader with
T.Mosaic, each sample's trace naming its partners and its drawn centre;
ultralytics' own Mosaic (8.4.190, live) rebuilt on its own YOLODataset of
the same files with those partners and that centre forced must give the
same pixels (exact: the images are PNGs, so both decode the same bytes)
and the same boxes (within 1e-3 px) and classes. Partners are read, not
consumed: every index is a primary sample exactly once an epoch."""

from __future__ import annotations

import os
import random
import tempfile
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest
from PIL import Image

import stoker
from stoker import transforms as T
from stoker._local import LocalServer

os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp(prefix="ultralytics-"))

from ultralytics.cfg import DEFAULT_CFG  # noqa: E402
from ultralytics.data import augment  # noqa: E402
from ultralytics.data.dataset import YOLODataset  # noqa: E402

N = 14
IMGSZ = 160


def make_yolo_pngs(root: Path, n: int = N, seed: int = 0) -> None:
    """n PNGs of sizes from 90 to 420 a side (below and above IMGSZ, both
    orientations) with 1 to 4 boxes each, in ultralytics' layout."""
    (root / "images" / "train").mkdir(parents=True)
    (root / "labels" / "train").mkdir(parents=True)
    rng = np.random.default_rng(seed)
    for i in range(n):
        w, h = int(rng.integers(90, 420)), int(rng.integers(90, 420))
        yy, xx = np.mgrid[0:h, 0:w]
        img = np.stack([(xx * 3 + i * 20) % 256, (yy * 2 + i * 7) % 256,
                        ((xx + yy) // 3 + rng.integers(0, 40, (h, w))) % 256], -1).astype(np.uint8)
        Image.fromarray(img).save(root / "images" / "train" / f"{i:06d}.png")
        lines = []
        for _ in range(int(rng.integers(1, 5))):
            bw, bh = rng.uniform(0.05, 0.6), rng.uniform(0.05, 0.6)
            cx, cy = rng.uniform(bw / 2, 1 - bw / 2), rng.uniform(bh / 2, 1 - bh / 2)
            lines.append(f"{int(rng.integers(0, 3))} {cx:.6f} {cy:.6f} {bw:.6f} {bh:.6f}")
        (root / "labels" / "train" / f"{i:06d}.txt").write_text("\n".join(lines) + "\n")
    (root / "data.yaml").write_text("path: .\ntrain: images/train\nval: images/train\nnames:\n  0: a\n  1: b\n  2: c\n")


@pytest.fixture(scope="module")
def yolo_png(stoker_bin: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("yolo-png")
    make_yolo_pngs(root)
    srv = LocalServer(str(stoker_bin), {"y": str(root / "images" / "train")}, workers=2,
                      args=["--grace", "1s", "--annotations", f"y={root / 'data.yaml'}"],
                      log_path=str(tmp_path_factory.mktemp("log") / "server.log"))
    with srv:
        # ultralytics' dataset of the same files, opened after the server
        # read the labels (it writes its labels cache beside them).
        ds = YOLODataset(img_path=str(root / "images" / "train"), data={"names": {0: "a", 1: "b", 2: "c"}, "channels": 3},
                         imgsz=IMGSZ, augment=True, hyp=DEFAULT_CFG)
        assert len(ds) == N
        yield srv.addr, ds


def ultralytics_mosaic(ds: YOLODataset, n: int, idx: int, m: Dict[str, Any]) -> Dict[str, Any]:
    """ultralytics' Mosaic of sample idx with the partners and centre a
    stoker trace drew: get_indexes and random.uniform answer them."""
    mo = augment.Mosaic(ds, imgsz=IMGSZ, p=1.0, n=n)
    mo.get_indexes = lambda: list(m["indexes"][1:])
    draws = iter([0.0, float(m["yc"]), float(m["xc"])])  # the p draw, then yc, xc
    real = random.uniform
    random.uniform = lambda a, b: next(draws)
    try:
        out = mo(ds.get_image_and_label(idx))
    finally:
        random.uniform = real
    if n == 4:
        assert next(draws, None) is None, "Mosaic drew other numbers than p, yc and xc"
    return out


@pytest.mark.parametrize("n", [4, 9])
def test_mosaic_is_ultralytics(yolo_png, n: int) -> None:
    addr, ds = yolo_png
    primaries: List[int] = []
    partners = set()
    boxes = 0
    for epoch_seed in (1, 2):
        with stoker.Loader(addr, "y", batch_size=4, transform=T.Compose([T.YOLOMosaic(IMGSZ, n=n)]), targets=True,
                           trace=True, return_indices=True, pin_memory=False, timeout=120, seed=epoch_seed) as ld:
            for b in ld:
                images, targets, indices = b
                assert images.shape[1:] == (3, 2 * IMGSZ, 2 * IMGSZ)
                for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                    op, m = b.trace[i][0]
                    assert op == "yolo_mosaic" and m["n"] == n and m["imgsz"] == IMGSZ, b.trace[i]
                    assert m["indexes"][0] == idx and len(m["indexes"]) == n
                    partners.update(m["indexes"][1:])
                    primaries.append(idx)
                    want = ultralytics_mosaic(ds, n, idx, m)
                    got = images[i].numpy().transpose(1, 2, 0)[..., ::-1]  # RGB CHW to BGR HWC
                    assert want["img"].shape == got.shape
                    diff = np.abs(want["img"].astype(int) - got.astype(int))
                    assert diff.max() == 0, f"sample {idx} ({m}): {int((diff > 0).sum())} bytes differ, by up to {diff.max()}"
                    ins = want["instances"]
                    assert ins._bboxes.format == "xyxy" and not ins.normalized
                    wb = ins.bboxes.astype(np.float32)
                    gb = t["boxes"].numpy()
                    assert gb.shape == wb.shape, (idx, m, gb, wb)
                    np.testing.assert_allclose(gb, wb, atol=1e-3, rtol=0)
                    boxes += len(gb)
                    assert t["labels"].tolist() == want["cls"].reshape(-1).astype(int).tolist()
            assert not list(ld.sample_errors)
    # Every index a primary exactly once an epoch: partners not consumed.
    assert sorted(primaries) == sorted(list(range(N)) * 2)
    assert len(partners) > N // 2 and boxes > 2 * N


def test_mixup_is_ultralytics(yolo_png) -> None:
    """MixUp(p=0.5) after the Mosaic: a mixed sample's trace names its
    partner's mosaic and the ratio; ultralytics' MixUp with the Mosaic as
    its pre_transform, those forced, gives the same pixels and boxes."""
    addr, ds = yolo_png
    mixed = 0
    with stoker.Loader(addr, "y", batch_size=5, transform=T.Compose([T.YOLOMosaic(IMGSZ), T.YOLOMixUp(0.5)]), targets=True,
                       trace=True, return_indices=True, pin_memory=False, timeout=120, seed=4) as ld:
        for b in ld:
            images, targets, indices = b
            for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                op, m = b.trace[i][0]
                want = ultralytics_mosaic(ds, 4, idx, m)
                if len(b.trace[i]) > 1:
                    op2, mx = b.trace[i][1]
                    assert op2 == "yolo_mixup" and 0 < mx["r"] < 1, b.trace[i]
                    m2 = mx["mosaic"]
                    pre = augment.Mosaic(ds, imgsz=IMGSZ, p=1.0, n=4)
                    pre.get_indexes = lambda m2=m2: list(m2["indexes"][1:])
                    mix = augment.MixUp(ds, pre_transform=pre, p=1.0)
                    mix.get_indexes = lambda m2=m2: m2["indexes"][0]
                    draws = iter([0.0, 0.0, float(m2["yc"]), float(m2["xc"])])  # MixUp's p, then the partner's mosaic
                    real, real_beta = random.uniform, np.random.beta
                    random.uniform = lambda a, b_: next(draws)
                    np.random.beta = lambda a, b_: mx["r"]
                    try:
                        want = mix(want)
                    finally:
                        random.uniform, np.random.beta = real, real_beta
                    assert next(draws, None) is None
                    mixed += 1
                got = images[i].numpy().transpose(1, 2, 0)[..., ::-1]
                diff = np.abs(want["img"].astype(int) - got.astype(int))
                assert diff.max() == 0, f"sample {idx} ({b.trace[i]}): {int((diff > 0).sum())} bytes differ"
                np.testing.assert_allclose(t["boxes"].numpy(), want["instances"].bboxes.astype(np.float32), atol=1e-3, rtol=0)
                assert t["labels"].tolist() == want["cls"].reshape(-1).astype(int).tolist()
        assert not list(ld.sample_errors)
    assert 0 < mixed < N


class Forced:
    """Stands in for ultralytics' `random` module: uniform() and random()
    give the given values in order (test_yolo_ops.py's)."""

    def __init__(self, uniform: List[float], rand: List[float]) -> None:
        self.u, self.r = iter(uniform), iter(rand)

    def uniform(self, lo: float, hi: float) -> float:
        return next(self.u)

    def random(self) -> float:
        return next(self.r)

    def __getattr__(self, name: str) -> Any:
        return getattr(random, name)


def replay_after(labels: Dict[str, Any], steps: List[Any], monkeypatch: pytest.MonkeyPatch) -> Dict[str, Any]:
    """The yolo preset's ops after its geometry's first step, ultralytics'
    own with the trace's draws forced: RandomPerspective (v8_transforms'
    default hyp, size 640), RandomHSV, RandomFlip."""
    for name, args in steps:
        if name == "yolo_random_perspective":
            assert args["warp_perspective"] == 0 and list(args["size"]) == [640, 640]
            op = augment.RandomPerspective(degrees=0.0, translate=0.1, scale=0.5, shear=0.0, perspective=0.0, size=(640, 640))
            with monkeypatch.context() as m:
                m.setattr(augment, "random", Forced([*args["perspective"], args["angle"], args["scale"], *args["shear"],
                                                     *args["translate"]], []))
                labels = op(labels)
        elif name == "yolo_random_hsv":
            with monkeypatch.context() as m:
                m.setattr(augment.np.random, "uniform", lambda *a, **k: np.array(args["r"], np.float64))
                labels = augment.RandomHSV(1.0, 1.0, 1.0)(labels)
        elif name == "yolo_fliplr":
            with monkeypatch.context() as m:
                m.setattr(augment, "random", Forced([], [0.0]))  # drawn: flipped
                labels = augment.RandomFlip(p=0.5, direction="horizontal")(labels)
        else:
            raise AssertionError(f"unexpected step {name} in {steps}")
    return labels


@pytest.mark.parametrize("transform", ["yolo", "no-hsv"])
def test_yolo_preset_is_ultralytics(yolo_png, monkeypatch: pytest.MonkeyPatch, transform: str) -> None:
    """transform="yolo" (ultralytics' v8_transforms, default hyp, imgsz
    640) with stop_epoch=1 (close_mosaic): epoch 0 is Mosaic then
    RandomPerspective, RandomHSV, RandomFlip, epoch 1 load_image then the
    same; each sample rebuilt by ultralytics with its partners and draws
    forced: the pixels within 1 (RandomHSV's bound), exact without the
    RandomHSV (its ops but that one), the boxes within 1e-3 px, the
    classes."""
    tol, label = (1 if transform == "yolo" else 0), transform
    if transform == "no-hsv":
        transform = T.Compose([T.YOLOMosaic(640), T.YOLORandomPerspective(translate=0.1, scale=0.5, size=(640, 640)),
                               T.YOLORandomFlip(0.5)])
    addr, _ = yolo_png
    ds = YOLODataset(img_path=str(Path(yolo_png[1].im_files[0]).parent), data={"names": {0: "a", 1: "b", 2: "c"}, "channels": 3},
                     imgsz=640, augment=True, hyp=DEFAULT_CFG)
    seen, off1, flips, boxes = [0, 0], 0, 0, 0
    with stoker.Loader(addr, "y", batch_size=4, transform=transform, targets=True, trace=True, return_indices=True,
                       pin_memory=False, timeout=300, seed=6, stop_epoch=1) as ld:
        for epoch in range(2):
            for b in ld:
                assert b.epoch == epoch
                images, targets, indices = b
                assert images.shape[1:] == (3, 640, 640)
                for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                    trace = b.trace[i]
                    name, args = trace[0]
                    if epoch == 0:
                        assert name == "yolo_mosaic", trace
                        want = ultralytics_mosaic640(ds, idx, args)
                    else:
                        assert name == "yolo_load_image", trace
                        want = ds.get_image_and_label(idx)
                        assert list(want["img"].shape[:2]) == list(args["size"]), (trace[0], want["img"].shape)
                    want = replay_after(want, trace[1:], monkeypatch)
                    flips += any(s[0] == "yolo_fliplr" for s in trace)
                    got = images[i].numpy().transpose(1, 2, 0)[..., ::-1]
                    d = np.abs(got.astype(int) - want["img"].astype(int))
                    assert d.max() <= tol, f"epoch {epoch} sample {idx}: {int((d > 0).sum())} bytes differ, by {int(d.max())}"
                    off1 += int((d > 0).sum())
                    inst = want["instances"]
                    inst.convert_bbox("xyxy")
                    wb = inst.bboxes.astype(np.float32)
                    gb = t["boxes"].numpy()
                    assert gb.shape == wb.shape, f"epoch {epoch} sample {idx}: {len(gb)} instances, ultralytics {len(wb)}"
                    np.testing.assert_allclose(gb, wb, rtol=0, atol=1e-3, err_msg=f"epoch {epoch} sample {idx}")
                    assert t["labels"].tolist() == [int(c) for c in want["cls"].reshape(-1)]
                    boxes += len(gb)
                    seen[epoch] += 1
        assert not list(ld.sample_errors)
    assert seen == [N, N] and 0 < flips < 2 * N and boxes > N
    print(f"\n{label}: {off1} bytes off by 1 (RandomHSV)")


def ultralytics_mosaic640(ds: YOLODataset, idx: int, m: Dict[str, Any]) -> Dict[str, Any]:
    """ultralytics' Mosaic at imgsz 640 of sample idx with the trace's
    partners and centre."""
    mo = augment.Mosaic(ds, imgsz=640, p=1.0, n=4)
    mo.get_indexes = lambda: list(m["indexes"][1:])
    draws = iter([0.0, float(m["yc"]), float(m["xc"])])
    real = random.uniform
    random.uniform = lambda a, b: next(draws)
    try:
        return mo(ds.get_image_and_label(idx))
    finally:
        random.uniform = real


def persp_draws(args: Dict[str, Any]) -> List[float]:
    """A yolo_random_perspective step's draws in RandomPerspective's order."""
    return [*args["perspective"], args["angle"], args["scale"], *args["shear"], *args["translate"]]


def test_mixup_after_perspective_is_ultralytics(yolo_png, monkeypatch: pytest.MonkeyPatch) -> None:
    """v8_transforms' order with mixup on: Mosaic, RandomPerspective, then
    MixUp, whose partner goes through that pre_transform (its own mosaic
    and warp): the same pixels and boxes as ultralytics' with the draws
    forced."""
    addr, ds = yolo_png
    hyp = dict(degrees=0.0, translate=0.1, scale=0.5, shear=0.0, perspective=0.0, size=(IMGSZ, IMGSZ))
    tf = T.Compose([T.YOLOMosaic(IMGSZ), T.YOLORandomPerspective(translate=0.1, scale=0.5, size=IMGSZ), T.YOLOMixUp(0.5)])
    mixed = 0
    with stoker.Loader(addr, "y", batch_size=5, transform=tf, targets=True, trace=True, return_indices=True,
                       pin_memory=False, timeout=120, seed=8) as ld:
        for b in ld:
            images, targets, indices = b
            for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                trace = b.trace[i]
                (op, m), (op1, pa) = trace[0], trace[1]
                assert op == "yolo_mosaic" and op1 == "yolo_random_perspective", trace
                want = ultralytics_mosaic(ds, 4, idx, m)
                with monkeypatch.context() as mp:
                    mp.setattr(augment, "random", Forced(persp_draws(pa), []))
                    want = augment.RandomPerspective(**hyp)(want)
                if len(trace) > 2:
                    op2, mx = trace[2]
                    assert op2 == "yolo_mixup", trace
                    m2, pa2 = mx["mosaic"], mx["perspective"][1]
                    mo = augment.Mosaic(ds, imgsz=IMGSZ, p=1.0, n=4)
                    mo.get_indexes = lambda m2=m2: list(m2["indexes"][1:])
                    mix = augment.MixUp(ds, pre_transform=augment.Compose([mo, augment.RandomPerspective(**hyp)]), p=1.0)
                    mix.get_indexes = lambda m2=m2: m2["indexes"][0]
                    with monkeypatch.context() as mp:
                        # MixUp's p, the partner's Mosaic's p, yc, xc, then its warp's
                        mp.setattr(augment, "random", Forced([0.0, 0.0, float(m2["yc"]), float(m2["xc"]), *persp_draws(pa2)], []))
                        mp.setattr(augment.np.random, "beta", lambda a, b_: mx["r"])
                        want = mix(want)
                    mixed += 1
                got = images[i].numpy().transpose(1, 2, 0)[..., ::-1]
                d = np.abs(want["img"].astype(int) - got.astype(int))
                assert d.max() == 0, f"sample {idx} ({trace}): {int((d > 0).sum())} bytes differ"
                inst = want["instances"]
                inst.convert_bbox("xyxy")
                np.testing.assert_allclose(t["boxes"].numpy(), inst.bboxes.astype(np.float32), atol=1e-3, rtol=0)
                assert t["labels"].tolist() == want["cls"].reshape(-1).astype(int).tolist()
        assert not list(ld.sample_errors)
    assert 0 < mixed < N
