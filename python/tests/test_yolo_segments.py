"""A YOLO segment dataset (yolov8-seg's layout: `class x1 y1 x2 y2 ...`
polygons a line) through the YOLO family's ops, served: a real `stoker
serve` of mkdata --coco --yolo's set on real photos (testdata/photos as
backgrounds) and a real client with targets and traces; each sample rebuilt
by ultralytics' own (8.4.190, live) YOLODataset (task="segment": its
polygons resampled to 1000 points), Mosaic, RandomPerspective, MixUp,
LetterBox, RandomHSV and RandomFlip on the same files, with the partners,
centres, warps, ratio, gains and flips forced from stoker's trace (the
pattern of test_yolo_mosaic_pose.py). What must agree: the pixels (exact;
RandomHSV within 1), the instances kept and their classes, and the boxes
within 1e-3 px: after a RandomPerspective, a segment's box is its warped
polygon's segment2box, not its warped box's extent, and the candidate
filter's area threshold is 0.01.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Dict, Iterator, List

import numpy as np
import pytest

from ultralytics.cfg import DEFAULT_CFG  # noqa: E402
from ultralytics.data import augment  # noqa: E402
from ultralytics.data.dataset import YOLODataset  # noqa: E402
from ultralytics.data.utils import polygon2mask, polygons2masks, polygons2masks_overlap  # noqa: E402

import stoker  # noqa: E402
from stoker import transforms as T  # noqa: E402
from stoker._local import LocalServer  # noqa: E402
from yolo_bridge import labels_to_wire, run_cv  # noqa: E402
from yolo_replay import assert_served, finish, mixup, mosaic, mosaic_of, served_bgr, warp  # noqa: E402

N = 12
IMGSZ = 160
ROOT = Path(__file__).resolve().parents[2]
# v8_transforms' RandomPerspective with rotation and shear, so that a
# warped segment's extent is not its warped box's.
PERSP = dict(degrees=10.0, translate=0.1, scale=0.5, shear=2.0, perspective=0.0)

RECIPES: Dict[str, Dict[str, Any]] = {
    "mosaic4": {"ops": [T.YOLOMosaic(IMGSZ, n=4), T.YOLORandomFlip(0.5, direction="vertical"),
                        T.YOLORandomFlip(0.5, direction="horizontal")]},
    "mosaic9": {"ops": [T.YOLOMosaic(IMGSZ, n=9), T.YOLORandomFlip(0.5, direction="horizontal")]},
    # yolov8-seg's training pipeline (v8_transforms), with mixup on.
    "segment": {"ops": [T.YOLOMosaic(IMGSZ), T.YOLORandomPerspective(size=IMGSZ, **PERSP), T.YOLOMixUp(0.5),
                        T.YOLORandomHSV(0.015, 0.7, 0.4), T.YOLORandomFlip(0.5, direction="horizontal")],
                "persp": PERSP},
    # One image: load_image, LetterBox, RandomPerspective (the close_mosaic
    # epochs before 8.1, with more rotation and shear).
    "letterbox": {"imgsz": 320, "letterbox": {"new_shape": 320, "scaleup": False, "center": True},
                  "persp": {"degrees": 10.0, "translate": 0.1, "scale": 0.5, "shear": 3.0, "perspective": 0.0}},
    # 8.4.190's close_mosaic epochs: warped straight to (imgsz, imgsz), in perspective.
    "perspective-size": {"imgsz": 256, "persp": {"degrees": 5.0, "translate": 0.2, "scale": 0.3, "shear": 0.0,
                                                 "perspective": 0.0005, "size": (256, 256)}},
}


def ops_of(r: Dict[str, Any]) -> List[Any]:
    if "ops" in r:
        return r["ops"]
    ops: List[Any] = [T.YOLOLoadImage(r["imgsz"])]
    if "letterbox" in r:
        ops.append(T.YOLOLetterBox(**r["letterbox"]))
    ops.append(T.YOLORandomPerspective(**r["persp"]))
    ops.append(T.YOLORandomFlip(p=0.5, direction="horizontal"))
    return ops


@pytest.fixture(scope="module")
def seg(stoker_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    out = tmp_path_factory.mktemp("seg")
    r = subprocess.run([str(stoker_bin), "mkdata", "--coco", "--yolo", "--backgrounds", str(ROOT / "testdata" / "photos"),
                        "--out", str(out), "--n", str(N), "--seed", "23"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    # "segcoco": the same images with the COCO annotations (polygons, but not
    # a YOLO segment dataset's: no overlap mask).
    srv = LocalServer(str(stoker_bin), {"seg": str(out / "images" / "train"), "segcoco": str(out / "images" / "train")}, workers=2,
                      args=["--grace", "1s", "--annotations", f"seg={out / 'data.yaml'}",
                            "--annotations", f"segcoco={out / 'annotations' / 'instances.json'}"], log_path=str(out / "server.log"))
    with srv:
        yield srv.addr, out


def dataset(out: Path, imgsz: int) -> YOLODataset:
    names = {}
    for ln in (out / "data.yaml").read_text().splitlines():
        if ln.startswith("  ") and ":" in ln:
            k, v = ln.strip().split(":", 1)
            names[int(k)] = v.strip()
    assert names, (out / "data.yaml").read_text()
    ds = YOLODataset(img_path=str(out / "images" / "train"), task="segment", imgsz=imgsz, augment=True, hyp=DEFAULT_CFG,
                     data={"names": names, "channels": 3})
    assert len(ds) == N
    return ds


def perspective(p: Dict[str, Any], args: Dict[str, Any]) -> augment.RandomPerspective:
    size = (args["size"][1], args["size"][0])
    kw = {k: p[k] for k in ("degrees", "translate", "scale", "shear", "perspective")}
    assert args["warp_perspective"] == (1 if p["perspective"] else 0)
    return augment.RandomPerspective(**kw, size=size if "size" in p or "ops" in p else None)


def rebuild(ds: YOLODataset, r: Dict[str, Any], idx: int, trace: List[Any], monkeypatch: pytest.MonkeyPatch) -> Dict[str, Any]:
    """Sample idx as ultralytics makes it with the trace's draws forced."""
    name, m = trace[0]
    rest = trace[1:]
    if name == "yolo_mosaic":
        labels = mosaic_of(ds, idx, m, IMGSZ, monkeypatch)
    else:
        labels = ds.get_image_and_label(idx)
        assert name == "yolo_load_image" and list(m["size"]) == list(labels["img"].shape[:2]), (trace[0], labels["img"].shape)
    persp = None
    while rest and rest[0][0] in ("yolo_letterbox", "yolo_random_perspective"):
        name, args = rest[0]
        if name == "yolo_letterbox":
            lb = r["letterbox"]
            labels = augment.LetterBox(new_shape=lb["new_shape"], scaleup=lb["scaleup"], center=lb["center"])(labels)
        else:
            persp = dict(r["persp"], ops=True) if "ops" in r else r["persp"]
            labels = warp(perspective(persp, args), args, labels, monkeypatch)
        rest = rest[1:]
    if rest and rest[0][0] == "yolo_mixup":
        mx = rest[0][1]
        pre: List[Any] = [mosaic(ds, mx["mosaic"], IMGSZ)]
        if persp is not None:
            pre.append(perspective(persp, mx["perspective"][1]))
        labels = mixup(ds, labels, mx, pre, monkeypatch)
        rest = rest[1:]
    return finish(labels, rest, monkeypatch)


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_segment_boxes_are_ultralytics(seg: Any, monkeypatch: pytest.MonkeyPatch, recipe: str) -> None:
    addr, out = seg
    r = RECIPES[recipe]
    ds = dataset(out, r.get("imgsz", IMGSZ))
    hsv = any(isinstance(o, T.YOLORandomHSV) for o in ops_of(r))
    seen, boxes, inexact, segmented, warped = 0, 0, 0, 0, 0
    with stoker.Loader(addr, "seg", batch_size=4, transform=T.Compose(ops_of(r)), targets=True, trace=True,
                       return_indices=True, pin_memory=False, timeout=300, seed=17) as ld:
        for b in ld:
            images, targets, indices = b
            for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                trace = b.trace[i]
                want = rebuild(ds, r, idx, trace, monkeypatch)
                warped += any(s[0] == "yolo_random_perspective" for s in trace)
                where = f"{recipe} sample {idx} ({trace[0][1].get('indexes', '')})"
                wb = assert_served(served_bgr(images, i), t, want, where, tol=1 if hsv else 0)
                gb, inst = t["boxes"].numpy(), want["instances"]
                assert len(inst.segments) == len(wb), f"{where}: ultralytics has {len(inst.segments)} segments"
                segmented += len(wb)
                inexact += int((gb != wb).sum())
                boxes += gb.size
                seen += 1
        assert not list(ld.sample_errors)
    assert seen == N and segmented > N
    if "persp" in r:
        assert warped == N
    print(f"\n{recipe}: {segmented} instances of segments; {inexact} of {boxes} box coordinates within 1e-3 "
          "but not ultralytics' bits")


def stoker_overlap(stoker_bin: Path, cases: List[Any]) -> List[Any]:
    """stoker's polygons2masks_overlap (pipeline/kernels/cv) of each (segments,
    w, h, ratio), through `stoker ops cv`: (mask, order) each."""
    wire = [{"op": "polygons2masks_overlap", "images": [], "dw": w, "dh": h, "ratio": r,
             "labels": [labels_to_wire(np.zeros((len(s), 4)), np.zeros(len(s)), s)]} for s, w, h, r in cases]
    out = []
    for (s, w, h, r), res in zip(cases, run_cv(stoker_bin, wire)):
        m = np.asarray(res.get("mask", []), np.int64).reshape(h // r, w // r)
        out.append((m, res.get("ints", [])))
    return out


def assert_overlap_is_ultralytics(stoker_bin: Path, cases: List[Any], what: str) -> int:
    """Each case's mask and order, stoker's against ultralytics' own
    polygons2masks_overlap; returns the pixels set. Exact, but for the order
    of instances of equal area: stoker keeps them in index order (a stable
    sort), numpy's np.argsort(-areas) (x86-simd-sort on AVX2 and AVX-512
    machines) may not; there each pixel must still name the same instance,
    or one of the same area."""
    set_px, ties = 0, 0
    for (s, w, h, r), (got, order) in zip(cases, stoker_overlap(stoker_bin, cases)):
        want, index = polygons2masks_overlap((h, w), list(s), downsample_ratio=r)
        where = f"{what} ({len(s)} segments, {w}x{h}/{r})"
        if order == index.tolist():
            d = got != want.astype(np.int64)
            assert not d.any(), f"{where}: {int(d.sum())} of {d.size} mask pixels differ"
        else:
            areas = np.array([int(polygon2mask((h, w), [q.reshape(-1)], downsample_ratio=r).sum()) for q in s])
            assert areas[order].tolist() == areas[index].tolist(), f"{where}: order {order}, ultralytics {index.tolist()}"
            ids = lambda m, o: np.where(m > 0, np.asarray([-1, *o])[m], -1)  # noqa: E731
            gi, wi = ids(got, order), ids(want.astype(np.int64), index.tolist())
            d = gi != wi
            assert (gi[d] >= 0).all() and (wi[d] >= 0).all() and (areas[gi[d]] == areas[wi[d]]).all(), \
                f"{where}: {int(d.sum())} pixels name another instance, not one of equal area"
            ties += 1
        set_px += int((want > 0).sum())
    print(f"\n{what}: {len(cases)} cases, {ties} ordered otherwise among equal areas by numpy's argsort")
    return set_px


def test_overlap_masks_of_polygons_are_ultralytics(stoker_bin: Path) -> None:
    """cv2.fillPoly's pixels (ratio 1: the fill alone) and the downsampled
    index map (ratio 4) of polygons that cross the image's sides, turn back
    on themselves, are degenerate (a line, a point) or overlap, as
    ultralytics' polygons2masks_overlap makes them."""
    rng = np.random.default_rng(5)
    cases: List[Any] = []
    for k in range(40):
        w, h = int(rng.integers(24, 200)), int(rng.integers(24, 200))
        n, pts = int(rng.integers(1, 7)), int(rng.integers(3, 40))
        segs = rng.uniform(-0.3, 1.3, (n, pts, 2)) * np.array([w, h])
        if k % 5 == 0:
            segs[0] = segs[0, :1]  # a point
        if k % 7 == 0:
            segs[-1, :, 1] = segs[-1, 0, 1]  # a horizontal line
        if k % 3 == 0:  # clipped to the image as ultralytics' warps and clips leave them, sides included
            segs = np.clip(segs, 0, [w, h])
        segs = segs.astype(np.float32)
        cases += [(segs, w, h, 1), (segs, w - w % 4, h - h % 4, 4), (segs, w, h, 4)]
    assert assert_overlap_is_ultralytics(stoker_bin, cases, "random polygons") > 0


def test_instance_masks_of_polygons_are_ultralytics(stoker_bin: Path) -> None:
    """Format(mask_overlap=False)'s masks: stoker's kernel
    (cv.AppendPolygonMasks, through `stoker ops cv`) against ultralytics'
    polygons2masks, one mask an instance in their order, at ratios 1
    (the fill alone), 2 (cv2.resize's halving), 3 and 4 (its linear path),
    on sizes their multiples or not, the polygons as above."""
    rng = np.random.default_rng(6)
    cases: List[Any] = []
    for k in range(30):
        w, h = int(rng.integers(24, 200)), int(rng.integers(24, 200))
        n, pts = int(rng.integers(1, 7)), int(rng.integers(3, 40))
        segs = rng.uniform(-0.3, 1.3, (n, pts, 2)) * np.array([w, h])
        if k % 5 == 0:
            segs[0] = segs[0, :1]  # a point
        if k % 7 == 0:
            segs[-1, :, 1] = segs[-1, 0, 1]  # a horizontal line
        if k % 3 == 0:
            segs = np.clip(segs, 0, [w, h])
        segs = segs.astype(np.float32)
        cases += [(segs, w, h, 1), (segs, w - w % 2, h - h % 2, 2), (segs, w, h, 3), (segs, w, h, 4)]
    wire = [{"op": "polygons2masks", "images": [], "dw": w, "dh": h, "ratio": r,
             "labels": [labels_to_wire(np.zeros((len(s), 4)), np.zeros(len(s)), s)]} for s, w, h, r in cases]
    set_px = 0
    for (s, w, h, r), res in zip(cases, run_cv(stoker_bin, wire)):
        assert "error" not in res or not res["error"], res
        got = np.asarray(res.get("mask", []), np.int64).reshape(len(s), h // r, w // r)
        want = polygons2masks((h, w), list(s), color=1, downsample_ratio=r)
        assert want.dtype == np.uint8 and want.shape == got.shape
        d = got != want
        assert not d.any(), f"{len(s)} segments, {w}x{h}/{r}: {int(d.sum())} of {d.size} mask pixels differ"
        set_px += int(want.sum())
    assert set_px > 0


def test_overlap_masks_of_served_segments_are_ultralytics(seg: Any, stoker_bin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """yolov8-seg's masks (Format(return_mask=True, mask_ratio=4,
    mask_overlap=True)) of the segments ultralytics makes for the served
    samples of the "segment" recipe (Mosaic, a warp, MixUp, HSV, a flip),
    stoker's kernel against ultralytics' polygons2masks_overlap."""
    addr, out = seg
    r = RECIPES["segment"]
    ds = dataset(out, IMGSZ)
    cases: List[Any] = []
    with stoker.Loader(addr, "seg", batch_size=4, transform=T.Compose(ops_of(r)), targets=True, trace=True,
                       return_indices=True, pin_memory=False, timeout=300, seed=17) as ld:
        for b in ld:
            for i, idx in enumerate(b[2].tolist()):
                want = rebuild(ds, r, idx, b.trace[i], monkeypatch)
                inst = want["instances"]
                h, w = want["img"].shape[:2]
                cases.append((inst.segments.astype(np.float32), w, h, 4))
    assert len(cases) == N and sum(len(c[0]) for c in cases) > N
    assert assert_overlap_is_ultralytics(stoker_bin, cases, "served segments") > 0


def served_order(gb: np.ndarray, wb: np.ndarray, where: str) -> List[int]:
    """Which of ultralytics' instances (boxes wb, before Format) each served
    box gb is: the one within 1e-3 px (the first unclaimed, for equal boxes)."""
    order: List[int] = []
    for n, b in enumerate(gb):
        hits = [k for k in np.nonzero(np.abs(wb - b).max(axis=1) <= 1e-3)[0].tolist() if k not in order]
        assert hits, f"{where}: served instance {n}'s box {b} is none of ultralytics'"
        order.append(hits[0])
    return order


def assert_format_is_ultralytics(t: Dict[str, Any], want: Dict[str, Any], where: str, ratio: int = 4,
                                 overlap: bool = True) -> int:
    """The served overlap_mask and the instances' order against ultralytics'
    Format(return_mask=True, mask_ratio=ratio, mask_overlap=overlap) of the
    same sample (want: the rebuilt labels before Format). Exact, but for
    instances of equal area, which numpy's argsort may order otherwise (see
    assert_overlap_is_ultralytics): there the served order must still be by
    area, and each pixel name the same instance or one of the same area.
    Returns 1 where such a tie was met. Without overlap (one mask an
    instance, the instances in their order) exact, ties or not."""
    h, w = want["img"].shape[:2]
    inst = want["instances"]
    inst.convert_bbox("xyxy")
    wb, cls, segs = inst.bboxes.astype(np.float32), want["cls"].reshape(-1).astype(np.int64), inst.segments
    fmt = augment.Format(bbox_format="xyxy", normalize=False, return_mask=True, mask_ratio=ratio,
                         mask_overlap=overlap, batch_idx=True)
    import copy
    f = fmt(copy.deepcopy(want))
    wm = f["masks"].numpy()
    gm = t["overlap_mask"].numpy()
    k = len(wb)
    gb, gl = t["boxes"].numpy(), t["labels"].numpy()
    assert len(gb) == k, f"{where}: {len(gb)} instances, ultralytics {k}"
    fb, fc = f["bboxes"].numpy(), f["cls"].numpy().reshape(-1).astype(np.int64)
    if not overlap:
        assert wm.shape == (k, h // ratio, w // ratio), f"{where}: ultralytics' masks {wm.shape}"
        assert gm.shape == wm.shape and gm.dtype == np.uint8, f"{where}: {gm.shape} {gm.dtype}"
        np.testing.assert_allclose(gb, fb, rtol=0, atol=1e-3, err_msg=f"{where}: boxes (in the instances' order)")
        assert gl.tolist() == fc.tolist(), f"{where}: classes"
        d = gm != wm.astype(np.uint8)
        assert not d.any(), f"{where}: {int(d.sum())} of {d.size} instance mask pixels differ"
        return 0
    assert wm.shape == (1, h // ratio, w // ratio), f"{where}: ultralytics' mask {wm.shape}"
    wm = wm[0]
    assert gm.shape == (h // ratio, w // ratio) and gm.dtype == (np.int32 if k > 255 else np.uint8), f"{where}: {gm.shape} {gm.dtype}"
    if k == 0:
        assert not gm.any() and not wm.any(), where
        return 0
    order = served_order(gb, wb, where)
    assert gl.tolist() == cls[order].tolist(), f"{where}: labels not in the served boxes' order"
    index = polygons2masks_overlap((h, w), list(segs), downsample_ratio=ratio)[1].tolist()
    np.testing.assert_array_equal(fb, wb[index], err_msg=f"{where}: Format's boxes are not instances[sorted_idx]")
    if order == index:
        np.testing.assert_allclose(gb, fb, rtol=0, atol=1e-3, err_msg=f"{where}: boxes")
        assert gl.tolist() == fc.tolist(), f"{where}: classes in Format's order"
        d = gm.astype(np.int64) != wm.astype(np.int64)
        assert not d.any(), f"{where}: {int(d.sum())} of {d.size} overlap mask pixels differ"
        return 0
    areas = np.array([int(polygon2mask((h, w), [q.reshape(-1)], downsample_ratio=ratio).sum()) for q in segs])
    assert areas[order].tolist() == areas[index].tolist(), f"{where}: order {order}, ultralytics {index}"
    ids = lambda m, o: np.where(m > 0, np.asarray([-1, *o])[m], -1)  # noqa: E731
    gi, wi = ids(gm.astype(np.int64), order), ids(wm.astype(np.int64), index)
    d = gi != wi
    assert (gi[d] >= 0).all() and (wi[d] >= 0).all() and (areas[gi[d]] == areas[wi[d]]).all(), \
        f"{where}: {int(d.sum())} pixels name another instance, not one of equal area"
    return 1


@pytest.mark.parametrize("recipe,transport,ratio,overlap", [
    ("segment", "grpc", None, None), ("segment", "shm", None, None), ("mosaic9", "grpc", None, None),
    ("letterbox", "shm", None, None), ("perspective-size", "grpc", None, None),
    # Format's other options: mask_ratio other than 4 (1: the fill alone,
    # 2: cv2.resize's halving, 3: its linear path on sizes not its
    # multiple), and mask_overlap=False (one mask an instance, as bits).
    ("segment", "shm", 3, None), ("segment", "grpc", 4, False), ("segment", "shm", 2, False),
    ("letterbox", "grpc", 1, False), ("mosaic9", "shm", 3, False)])
def test_served_overlap_mask_is_ultralytics_format(seg: Any, monkeypatch: pytest.MonkeyPatch, recipe: str, transport: str,
                                                   ratio: Any, overlap: Any) -> None:
    """Loader(targets=(..., "overlap_mask"), mask_ratio=..., mask_overlap=...):
    per sample the [H/r, W/r] map and the boxes and labels in its order (or,
    with mask_overlap=False, the [K, H/r, W/r] masks, the instances in
    theirs), against ultralytics' own Format of the sample rebuilt with
    stoker's draws forced; through plain gRPC and through shared memory
    (the targets' arrays in the slot)."""
    import stoker._buffers as buffers

    addr, out = seg
    r = RECIPES[recipe]
    ds = dataset(out, r.get("imgsz", IMGSZ))
    in_slot: List[bool] = []
    real = buffers.targets_of

    def tap(bt: Any, *args: Any, **kw: Any) -> Any:
        in_slot.append(bt.HasField("in_slot"))
        return real(bt, *args, **kw)

    monkeypatch.setattr(buffers, "targets_of", tap)
    seen, ties, instances = 0, 0, 0
    with stoker.Loader(addr, "seg", batch_size=4, transform=T.Compose(ops_of(r)), targets=("boxes", "labels", "overlap_mask"),
                       trace=True, return_indices=True, pin_memory=False, timeout=300, seed=17, transport=transport,
                       mask_ratio=ratio, mask_overlap=overlap) as ld:
        for b in ld:
            _, targets, indices = b
            for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                assert list(t) == ["boxes", "labels", "overlap_mask"]
                want = rebuild(ds, r, idx, b.trace[i], monkeypatch)
                ties += assert_format_is_ultralytics(t, want, f"{recipe}/{transport}/{ratio}/{overlap} sample {idx}",
                                                     ratio or 4, overlap is not False)
                instances += len(t["boxes"])
                seen += 1
        assert not list(ld.sample_errors)
    monkeypatch.setattr(buffers, "targets_of", real)
    assert seen == N and instances > N
    assert in_slot and all(in_slot) == (transport == "shm"), in_slot
    print(f"\n{recipe}/{transport}: {instances} instances, {ties} samples ordered otherwise among equal areas")


@pytest.mark.parametrize("ops,targets,what", [
    ([T.Resize((64, 64))], ("boxes", "overlap_mask"), "has no YOLO geometry"),
    (RECIPES["segment"]["ops"], ("overlap_mask",), "the dataset has no polygons (a YOLO segment dataset's"),
    ([T.YOLOMosaic(IMGSZ), T.RandomHorizontalFlip()], ("overlap_mask",), "RandomHorizontalFlip (op 1) moves the boxes but not"),
    ([T.YOLOMosaic(IMGSZ)], ("masks", "overlap_mask"), '"masks" and "overlap_mask" together'),
])
def test_overlap_mask_refused(seg: Any, ops: List[Any], targets: Any, what: str) -> None:
    from stoker._errors import StokerError

    addr, _ = seg
    name = "segcoco" if "no polygons" in what else "seg"
    with pytest.raises(StokerError) as e:
        with stoker.Loader(addr, name, batch_size=4, transform=T.Compose(ops), targets=targets, pin_memory=False,
                           timeout=60) as ld:
            next(iter(ld))
    assert e.value.code == "INVALID_ARGUMENT" and what in str(e.value), str(e.value)


def test_mask_options_refused(seg: Any) -> None:
    """mask_ratio and mask_overlap: a ratio past the output's smaller side
    (Format's own check: masks of no pixels) is the server's
    INVALID_ARGUMENT at open, naming the bound; a ratio not a positive int,
    a mask_overlap not a bool, or either without "overlap_mask", the
    client's error before anything is sent (the server's own refusals of a
    JobSpec from another client: server/maskformat_test.go)."""
    from stoker._errors import StokerError

    addr, _ = seg
    ops = ops_of(RECIPES["letterbox"])  # a 320 x 320 output
    with pytest.raises(StokerError) as e:
        with stoker.Loader(addr, "seg", batch_size=4, transform=T.Compose(ops), targets=("boxes", "overlap_mask"),
                           mask_ratio=321, pin_memory=False, timeout=60) as ld:
            next(iter(ld))
    assert e.value.code == "INVALID_ARGUMENT" and \
        "mask_ratio=321 downsamples the transform's 320x320 output to zero size; use mask_ratio <= 320" in str(e.value), \
        str(e.value)
    for kw, err, what in [({"mask_ratio": 0}, ValueError, "mask_ratio must be in 1.."),
                          ({"mask_ratio": 2.0}, TypeError, "mask_ratio must be an int"),
                          ({"mask_overlap": 1}, TypeError, "mask_overlap must be a bool")]:
        with pytest.raises(err, match=what):
            stoker.Loader(addr, "seg", batch_size=4, transform=T.Compose(ops), targets=("boxes", "overlap_mask"), **kw)
    for kw in ({"mask_ratio": 2}, {"mask_overlap": False}):
        with pytest.raises(ValueError, match="they need targets=\\(..., 'overlap_mask'\\)"):
            stoker.Loader(addr, "seg", batch_size=4, transform=T.Compose(ops), targets=("boxes",), **kw)
