"""YOLOCopyPaste (ultralytics' CopyPaste in flip mode) and YOLOCutMix served: a real
`stoker serve` of test_yolo_segments.py's YOLO segment set (mkdata --coco
--yolo, polygons a line) and a real client with targets and traces; each
sample rebuilt by ultralytics' own (8.4.190, live) YOLODataset
(task="segment"), Mosaic, CopyPaste(mode="flip"), RandomPerspective, MixUp,
RandomHSV and RandomFlip on the same files, in v8_transforms' order (its
pre_transform is Mosaic, CopyPaste, RandomPerspective, and MixUp's partner
is made by the same pre_transform, CopyPaste included), with the partners,
centres, warps, ratio, gains and flips forced from stoker's trace. CopyPaste
in flip mode draws nothing. What must agree: the pixels (exact; RandomHSV
within 1), the instances kept and their classes, the boxes within 1e-3 px,
and the number of copies pasted. CutMix is rebuilt with ultralytics'
CutMix, its partner, areas (np.random.beta, randint) and choice
(np.random.choice) forced from the trace, on the segment set and on
test_yolo_ops.py's keypoint set (boxes alone). Copies of equal largest IoA (most often
0: copies that overlap nothing) are ordered by index, a stable sort; numpy's
np.argsort, which CopyPaste.get_params calls, orders such ties by
x86-simd-sort on AVX2 and AVX-512 machines (any count), so the rebuild
forces a stable argsort there, and checks on the p=1 recipe that the
default one pastes the same copies (in another order). A dataset of boxes without polygons is
refused (ultralytics' CopyPaste skips it silently).
"""

from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, List

import numpy as np
import pytest

from ultralytics.cfg import DEFAULT_CFG  # noqa: E402
from ultralytics.data import augment  # noqa: E402
from ultralytics.data.dataset import YOLODataset  # noqa: E402

import stoker  # noqa: E402
from stoker import transforms as T  # noqa: E402
from test_yolo_ops import N as N_POSE  # noqa: E402
from test_yolo_ops import pose  # noqa: E402,F401 (the fixture)
from test_yolo_segments import IMGSZ, N, PERSP, dataset, seg  # noqa: E402,F401 (the fixture)
from yolo_replay import (assert_served, centre, finish, forced, mixup, mosaic, mosaic_of,  # noqa: E402
                         persp_draws, served_bgr, stable_argsort, warp)

RECIPES: Dict[str, Dict[str, Any]] = {
    # The mosaic pasted on its 2*IMGSZ canvas, every eligible copy.
    "mosaic": {"p": 1.0, "ops": [T.YOLOMosaic(IMGSZ), T.YOLOCopyPaste(1.0),
                                 T.YOLORandomFlip(0.5, direction="horizontal")]},
    # Half of them (round(p * eligible): the least overlapping first).
    "mosaic9-half": {"p": 0.5, "ops": [T.YOLOMosaic(IMGSZ, n=9), T.YOLOCopyPaste(0.5)]},
    # yolov8-seg's training pipeline (v8_transforms) with copy_paste and mixup on.
    "segment": {"p": 0.5, "persp": PERSP,
                "ops": [T.YOLOMosaic(IMGSZ), T.YOLOCopyPaste(0.5), T.YOLORandomPerspective(size=IMGSZ, **PERSP),
                        T.YOLOMixUp(0.5), T.YOLORandomHSV(0.015, 0.7, 0.4), T.YOLORandomFlip(0.5, direction="horizontal")]},
    # CutMix (v8_transforms' cutmix) on the warped mosaic, its partner made the same way.
    "cutmix": {"persp": PERSP, "cutmix": True,
               "ops": [T.YOLOMosaic(IMGSZ), T.YOLORandomPerspective(size=IMGSZ, **PERSP), T.YOLOCutMix(1.0, num_areas=5)]},
    # copy_paste_mode="mixup": the copies taken from another sample made by
    # the Mosaic and the warp, appended to the pre_transform; every time,
    # every eligible copy.
    "mixup-mode": {"cpm": 1.0, "persp": PERSP,
                   "ops": [T.YOLOMosaic(IMGSZ), T.YOLORandomPerspective(size=IMGSZ, **PERSP),
                           T.YOLOCopyPaste(1.0, mode="mixup")]},
    # yolov8-seg with copy_paste=0.5 in mixup mode, mixup and cutmix on: the
    # MixUp's and CutMix's partners made by the same pre_transform, their
    # own CopyPaste (and its partner) included; a Mosaic of 9.
    "segment-mixup-mode": {"cpm": 0.5, "persp": PERSP, "cutmix": True,
                           "ops": [T.YOLOMosaic(IMGSZ, n=9), T.YOLORandomPerspective(size=IMGSZ, **PERSP),
                                   T.YOLOCopyPaste(0.5, mode="mixup"), T.YOLOMixUp(0.5), T.YOLOCutMix(0.5),
                                   T.YOLORandomHSV(0.015, 0.7, 0.4), T.YOLORandomFlip(0.5, direction="horizontal")]},
    # All of them: yolov8-seg with copy_paste, mixup and cutmix on.
    "segment-cutmix": {"p": 0.5, "persp": PERSP, "cutmix": True,
                       "ops": [T.YOLOMosaic(IMGSZ), T.YOLOCopyPaste(0.5), T.YOLORandomPerspective(size=IMGSZ, **PERSP),
                               T.YOLOMixUp(0.5), T.YOLOCutMix(0.8), T.YOLORandomHSV(0.015, 0.7, 0.4),
                               T.YOLORandomFlip(0.5, direction="horizontal")]},
}


def pre(ds: YOLODataset, r: Dict[str, Any], m: Dict[str, Any], cp: Any = None,
        monkeypatch: Any = None) -> List[Any]:
    """v8_transforms' pre_transform of a sample whose mosaic is m: Mosaic,
    CopyPaste (flip), and RandomPerspective where the recipe has one; in
    mixup mode, then CopyPaste(mode="mixup") as the trace's entry cp says
    (copy_paste_mixup)."""
    ops: List[Any] = [mosaic(ds, m, IMGSZ)]
    if "p" in r:
        ops.append(augment.CopyPaste(p=r["p"], mode="flip"))
    if "persp" in r:
        ops.append(augment.RandomPerspective(size=(IMGSZ, IMGSZ), **r["persp"]))
    if "cpm" in r:
        ops.append(copy_paste_mixup(ds, r, cp, monkeypatch))
    return ops


def copy_paste_mixup(ds: YOLODataset, r: Dict[str, Any], cp: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """ultralytics' CopyPaste(mode="mixup") as v8_transforms appends it to
    the pre_transform (its partner made by Compose([Mosaic, affine])), with
    the draws of the trace's entry cp forced in a context of its own (it
    runs inside a MixUp's or CutMix's forced pre_transform too): not drawn
    (None), its p draws 1.0 (skipped; a sample without instances draws
    nothing); drawn on a sample without instances (applied false), it must
    draw nothing; else its p 0.0, its partner, the partner's Mosaic (p and
    centre) and warp, and its argsort stable. The copies it pastes must be
    as many as stoker's."""
    def run(labels: Dict[str, Any]) -> Dict[str, Any]:
        if cp is None:
            op = augment.CopyPaste(ds, p=r["cpm"], mode="mixup")
            return forced(monkeypatch, op, labels, [1.0])
        m2 = cp["mosaic"]
        op = augment.CopyPaste(ds, pre_transform=augment.Compose([mosaic(ds, m2, IMGSZ), augment.RandomPerspective(
            size=(IMGSZ, IMGSZ), **r["persp"])]), p=r["cpm"], mode="mixup")
        op.get_indexes = lambda: m2["indexes"][0]
        before = len(labels["instances"])
        if not cp["applied"]:
            assert before == 0, cp
            return forced(monkeypatch, op, labels, [], exact=True)
        draws = [0.0, 0.0, *centre(m2), *persp_draws(cp["perspective"][1])]
        with stable_argsort(monkeypatch):
            out = forced(monkeypatch, op, labels, draws, exact=True)
        assert len(out["instances"]) - before == cp["pasted"], f"ultralytics pasted {len(out['instances']) - before}, stoker {cp}"
        return out
    return run


def pasted(labels: Dict[str, Any], m: Dict[str, Any], before: int) -> None:
    if "copy_paste" not in m:
        return
    n = len(labels["instances"])
    assert n - before == m["copy_paste"], f"ultralytics pasted {n - before} copies, stoker {m['copy_paste']} ({m})"


def rebuild(ds: YOLODataset, r: Dict[str, Any], idx: int, trace: List[Any], monkeypatch: pytest.MonkeyPatch,
            stable_sort: bool = True) -> Dict[str, Any]:
    """Sample idx as ultralytics makes it with the trace's draws forced
    (and CopyPaste's argsort stable, unless not stable_sort)."""
    name, m = trace[0]
    assert name == "yolo_mosaic" and ("copy_paste" in m) == ("p" in r), trace
    rest = trace[1:]
    _, *persp = pre(ds, r, m)
    labels = mosaic_of(ds, idx, m, IMGSZ, monkeypatch)
    before = len(labels["instances"])
    if "p" in r:
        cp, *persp = persp
        with stable_argsort(monkeypatch) if stable_sort else contextlib.nullcontext():
            labels = cp(labels)
    pasted(labels, m, before)
    if persp:
        assert rest[0][0] == "yolo_random_perspective", trace
        labels = warp(persp[0], rest[0][1], labels, monkeypatch)
        rest = rest[1:]
    if "cpm" in r:
        cp = None
        if rest and rest[0][0] == "yolo_copy_paste":
            cp, rest = rest[0][1], rest[1:]
            assert cp["mode"] == "mixup", cp
        labels = copy_paste_mixup(ds, r, cp, monkeypatch)(labels)
    if rest and rest[0][0] == "yolo_mixup":
        mx = rest[0][1]
        assert ("copy_paste" in mx["mosaic"]) == ("p" in r), mx
        labels = mixup(ds, labels, mx, pre(ds, r, mx["mosaic"], mx.get("copy_paste"), monkeypatch), monkeypatch,
                       stable_sort=stable_sort)
        rest = rest[1:]
    if rest and rest[0][0] == "yolo_cutmix":
        labels = cutmix(ds, r, labels, rest[0][1], monkeypatch)
        rest = rest[1:]
    return finish(labels, rest, monkeypatch)


def cutmix(ds: YOLODataset, r: Dict[str, Any], labels: Dict[str, Any], cm: Dict[str, Any],
           monkeypatch: pytest.MonkeyPatch) -> Dict[str, Any]:
    """ultralytics' CutMix with the trace's partner, areas and choice forced:
    random.uniform for its p and the partner's Mosaic and warp,
    np.random.beta and randint for each area's ratio and centre, and
    np.random.choice for the area among those free."""
    m3 = cm["mosaic"]
    draws = [0.0, 0.0, *centre(m3)]  # CutMix's p, the partner's Mosaic's p, its centre
    if "persp" in r:
        draws += persp_draws(cm["perspective"][1])
    op = next(o for o in r["ops"] if isinstance(o, T.YOLOCutMix))
    cut = augment.CutMix(ds, pre_transform=augment.Compose(pre(ds, r, m3, cm.get("copy_paste"), monkeypatch)), p=1.0,
                         beta=op.beta, num_areas=op.num_areas)
    cut.get_indexes = lambda: m3["indexes"][0]
    lams = iter([a[0] for a in cm["areas"]])
    ints = iter([v for a in cm["areas"] for v in (a[1], a[2])])

    def choice(idx: Any) -> int:
        assert cm["choice"] in list(idx), (cm, idx)
        return cm["choice"]

    before = len(labels["instances"])
    with stable_argsort(monkeypatch), monkeypatch.context() as mp:
        mp.setattr(augment.np.random, "beta", lambda a, b: next(lams))
        mp.setattr(augment.np.random, "randint", lambda n: next(ints))
        mp.setattr(augment.np.random, "choice", choice)
        labels = forced(monkeypatch, cut, labels, draws, exact=True)
    assert (len(labels["instances"]) > before) == cm["applied"], (cm, before, len(labels["instances"]))
    return labels


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_copy_paste_is_ultralytics(seg: Any, monkeypatch: pytest.MonkeyPatch, recipe: str) -> None:
    addr, out = seg
    r = RECIPES[recipe]
    ds = dataset(out, IMGSZ)
    hsv = "persp" in r
    seen, copies, mixed, instances, reordered, cuts, nested = 0, 0, 0, 0, 0, 0, 0
    with stoker.Loader(addr, "seg", batch_size=4, transform=T.Compose(r["ops"]), targets=True, trace=True,
                       return_indices=True, pin_memory=False, timeout=300, seed=29) as ld:
        for b in ld:
            images, targets, indices = b
            for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                trace = b.trace[i]
                want = rebuild(ds, r, idx, trace, monkeypatch)
                copies += trace[0][1].get("copy_paste", 0)
                copies += sum(s[1]["pasted"] for s in trace if s[0] == "yolo_copy_paste")
                nested += sum(1 for s in trace if s[0] in ("yolo_mixup", "yolo_cutmix") and "copy_paste" in s[1])
                cuts += any(s[0] == "yolo_cutmix" and s[1]["applied"] for s in trace)
                mixed += any(s[0] == "yolo_mixup" for s in trace)
                where = f"{recipe} sample {idx} ({trace[0][1]})"
                wb = assert_served(served_bgr(images, i), t, want, where, tol=1 if hsv else 0)
                instances += len(wb)
                seen += 1
                if r.get("p") == 1.0 and "persp" not in r:  # numpy's own argsort: the same copies
                    dflt = rebuild(ds, r, idx, trace, monkeypatch, stable_sort=False)
                    di = dflt["instances"]
                    di.convert_bbox("xyxy")
                    rows = lambda c, bx: sorted(zip(c.reshape(-1).tolist(), bx.tolist()))  # noqa: E731
                    assert rows(dflt["cls"], di.bboxes.astype(np.float32)) == rows(want["cls"], wb), f"{where}: numpy's argsort"
                    assert np.array_equal(dflt["img"], want["img"]), f"{where}: numpy's argsort, pixels"
                    reordered += int(not np.array_equal(di.bboxes.astype(np.float32), wb))
        assert not list(ld.sample_errors)
    assert seen == N and (copies > 0 or not {"p", "cpm"} & set(r)) and (cuts > 0 or "cutmix" not in r), (seen, copies, cuts)
    note = f"; {reordered} samples whose copies numpy's default argsort orders otherwise" if r.get("p") == 1.0 else ""
    if "cpm" in r and r["cpm"] < 1:  # a MixUp's or CutMix's partner pasted by a CopyPaste of its own
        assert nested > 0, nested
    print(f"\n{recipe}: {copies} copies pasted in {seen} samples ({mixed} mixed, {cuts} cut, {nested} partners "
          f"with a CopyPaste of their own), {instances} instances{note}")


def test_copy_paste_of_boxes_is_refused(pose: Any) -> None:
    """A dataset of boxes without polygons (test_yolo_ops.py's pose layout):
    each sample fails, saying CopyPaste wants a segment dataset."""
    addr, _ = pose
    errs: List[str] = []
    try:
        with stoker.Loader(addr, "pose", batch_size=4, transform=T.Compose([T.YOLOMosaic(IMGSZ), T.YOLOCopyPaste(0.5)]),
                           targets=True, pin_memory=False, timeout=120, seed=3) as ld:
            for _ in ld:
                pass
            errs = [str(e) for e in ld.sample_errors]
    except Exception as e:  # a job whose every sample fails may end so
        errs = [str(e)]
    assert errs and all("boxes without polygons" in e for e in errs), errs[:3]


def test_cutmix_of_keypoints_is_ultralytics(pose: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """CutMix on a dataset of boxes and keypoints (no polygons: the partner's
    instances taken at IoA 0.1, their keypoints outside the area made
    invisible), after a Mosaic, its warp and MixUp, against ultralytics'."""
    from test_yolo_ops import FLIP_IDX, P

    addr, out = pose
    ds = YOLODataset(img_path=str(out / "images" / "train"), task="pose", imgsz=IMGSZ, augment=True, hyp=DEFAULT_CFG,
                     data={"names": {i: c for i, c in enumerate("abcde")}, "kpt_shape": [P, 3], "flip_idx": FLIP_IDX,
                           "channels": 3})
    r = {"persp": PERSP, "cutmix": True, "ops": [T.YOLOMosaic(IMGSZ), T.YOLORandomPerspective(size=IMGSZ, **PERSP),
                                                 T.YOLOMixUp(0.5), T.YOLOCutMix(1.0, num_areas=6)]}
    seen, cuts = 0, 0
    with stoker.Loader(addr, "pose", batch_size=4, transform=T.Compose(r["ops"]), targets=True, trace=True,
                       return_indices=True, pin_memory=False, timeout=300, seed=31) as ld:
        for b in ld:
            images, targets, indices = b
            for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                trace = b.trace[i]
                want = rebuild(ds, r, idx, trace, monkeypatch)
                cuts += any(s[0] == "yolo_cutmix" and s[1]["applied"] for s in trace)
                where = f"pose sample {idx} ({trace[-1]})"
                assert_served(served_bgr(images, i), t, want, where)
                inst = want["instances"]
                wk = inst.keypoints
                gk = t["keypoints"].numpy().reshape(-1, P, 2)
                gv = t["keypoints_visibility"].numpy().reshape(-1, P)
                np.testing.assert_array_equal(gv, wk[..., 2].astype(np.uint8), err_msg=f"{where}: visibility")
                np.testing.assert_allclose(gk, wk[..., :2], rtol=0, atol=1e-3, err_msg=f"{where}: keypoints")
                seen += 1
        assert not list(ld.sample_errors)
    assert seen == N_POSE and cuts > 0, (seen, cuts)
