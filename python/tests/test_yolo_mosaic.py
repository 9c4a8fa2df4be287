"""Mosaic served: `stoker serve` over a YOLO layout, a Loader with
T.Mosaic, each sample's trace naming its partners and its drawn centre;
ultralytics' own Mosaic (8.4.190, live) rebuilt on its own YOLODataset of
the same files with those partners and that centre forced must give the
same pixels (exact: the images are PNGs, so both decode the same bytes)
and the same boxes (within 1e-3 px) and classes. Partners are read, not
consumed: every index is a primary sample exactly once an epoch."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import numpy as np
import pytest
from PIL import Image

import stoker
from stoker import transforms as T
from stoker._local import LocalServer

from ultralytics.cfg import DEFAULT_CFG  # noqa: E402
from ultralytics.data import augment  # noqa: E402
from ultralytics.data.dataset import YOLODataset  # noqa: E402
from yolo_replay import assert_served, finish, mixup, mosaic, mosaic_of, mosaic_warped, served_bgr, warp  # noqa: E402

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


@contextlib.contextmanager
def served_yolo_pngs(stoker_bin: Path, tmp_path_factory: pytest.TempPathFactory, n: int = N, imgsz: int = IMGSZ,
                     seed: int = 0) -> Iterator[Tuple[str, YOLODataset]]:
    """make_yolo_pngs served as dataset "y" (with its data.yaml), and
    ultralytics' YOLODataset of the same files at imgsz: (address, dataset)."""
    root = tmp_path_factory.mktemp("yolo-png")
    make_yolo_pngs(root, n, seed)
    srv = LocalServer(str(stoker_bin), {"y": str(root / "images" / "train")}, workers=2,
                      args=["--grace", "1s", "--annotations", f"y={root / 'data.yaml'}"],
                      log_path=str(tmp_path_factory.mktemp("log") / "server.log"))
    with srv:
        # ultralytics' dataset of the same files, opened after the server
        # read the labels (it writes its labels cache beside them).
        ds = YOLODataset(img_path=str(root / "images" / "train"), data={"names": {0: "a", 1: "b", 2: "c"}, "channels": 3},
                         imgsz=imgsz, augment=True, hyp=DEFAULT_CFG)
        assert len(ds) == n
        yield srv.addr, ds


@pytest.fixture(scope="module")
def yolo_png(stoker_bin: Path, tmp_path_factory: pytest.TempPathFactory):
    with served_yolo_pngs(stoker_bin, tmp_path_factory) as served:
        yield served


@pytest.mark.parametrize("n", [4, 9])
def test_mosaic_is_ultralytics(yolo_png, monkeypatch: pytest.MonkeyPatch, n: int) -> None:
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
                    want = mosaic_of(ds, idx, m, IMGSZ, monkeypatch)
                    ins = want["instances"]
                    assert ins._bboxes.format == "xyxy" and not ins.normalized
                    boxes += len(assert_served(served_bgr(images, i), t, want, f"sample {idx} ({m})"))
            assert not list(ld.sample_errors)
    # Every index a primary exactly once an epoch: partners not consumed.
    assert sorted(primaries) == sorted(list(range(N)) * 2)
    assert len(partners) > N // 2 and boxes > 2 * N


def test_mixup_is_ultralytics(yolo_png, monkeypatch: pytest.MonkeyPatch) -> None:
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
                want = mosaic_of(ds, idx, m, IMGSZ, monkeypatch)
                if len(b.trace[i]) > 1:
                    op2, mx = b.trace[i][1]
                    assert op2 == "yolo_mixup" and 0 < mx["r"] < 1, b.trace[i]
                    want = mixup(ds, want, mx, [mosaic(ds, mx["mosaic"], IMGSZ)], monkeypatch)
                    mixed += 1
                assert_served(served_bgr(images, i), t, want, f"sample {idx} ({b.trace[i]})")
        assert not list(ld.sample_errors)
    assert 0 < mixed < N


def replay_after(labels: Dict[str, Any], steps: List[Any], monkeypatch: pytest.MonkeyPatch) -> Dict[str, Any]:
    """The yolo preset's ops after its geometry's first step, ultralytics'
    own with the trace's draws forced: RandomPerspective (v8_transforms'
    default hyp, size 640), RandomHSV, RandomFlip."""
    if steps and steps[0][0] == "yolo_random_perspective":
        args = steps[0][1]
        assert args["warp_perspective"] == 0 and list(args["size"]) == [640, 640]
        op = augment.RandomPerspective(degrees=0.0, translate=0.1, scale=0.5, shear=0.0, perspective=0.0, size=(640, 640))
        labels = warp(op, args, labels, monkeypatch)
        steps = steps[1:]
    return finish(labels, steps, monkeypatch)


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
                        want = mosaic_of(ds, idx, args, 640, monkeypatch)
                    else:
                        assert name == "yolo_load_image", trace
                        want = ds.get_image_and_label(idx)
                        assert list(want["img"].shape[:2]) == list(args["size"]), (trace[0], want["img"].shape)
                    want = replay_after(want, trace[1:], monkeypatch)
                    flips += any(s[0] == "yolo_fliplr" for s in trace)
                    boxes += len(assert_served(served_bgr(images, i), t, want, f"epoch {epoch} sample {idx}", tol=tol))
                    off1 += want["_off"]
                    seen[epoch] += 1
        assert not list(ld.sample_errors)
    assert seen == [N, N] and 0 < flips < 2 * N and boxes > N
    print(f"\n{label}: {off1} bytes off by 1 (RandomHSV)")


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
                want = mosaic_warped(ds, idx, trace, hyp, IMGSZ, monkeypatch)
                if len(trace) > 2:
                    op2, mx = trace[2]
                    assert op2 == "yolo_mixup", trace
                    pre = [mosaic(ds, mx["mosaic"], IMGSZ), augment.RandomPerspective(**hyp)]
                    want = mixup(ds, want, mx, pre, monkeypatch)
                    mixed += 1
                assert_served(served_bgr(images, i), t, want, f"sample {idx} ({trace})")
        assert not list(ld.sample_errors)
    assert 0 < mixed < N
