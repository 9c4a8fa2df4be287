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
        with stoker.Loader(addr, "y", batch_size=4, transform=T.Compose([T.Mosaic(IMGSZ, n=n)]), targets=True,
                           trace=True, return_indices=True, pin_memory=False, timeout=120, seed=epoch_seed) as ld:
            for b in ld:
                images, targets, indices = b
                assert images.shape[1:] == (3, 2 * IMGSZ, 2 * IMGSZ)
                for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                    op, m = b.trace[i][0]
                    assert op == "mosaic" and m["n"] == n and m["imgsz"] == IMGSZ, b.trace[i]
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
    with stoker.Loader(addr, "y", batch_size=5, transform=T.Compose([T.Mosaic(IMGSZ), T.MixUp(0.5)]), targets=True,
                       trace=True, return_indices=True, pin_memory=False, timeout=120, seed=4) as ld:
        for b in ld:
            images, targets, indices = b
            for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                op, m = b.trace[i][0]
                want = ultralytics_mosaic(ds, 4, idx, m)
                if len(b.trace[i]) > 1:
                    op2, mx = b.trace[i][1]
                    assert op2 == "mixup" and 0 < mx["r"] < 1, b.trace[i]
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
