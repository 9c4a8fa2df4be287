"""ultralytics' ``sem_masks`` (Format(return_mask=True)'s semantic map of
classes, 8.4.190), which the client makes from the overlap mask and the
labels (stoker._targets.sem_mask): against ultralytics' own Format on the
same instances, and, served (Loader(targets=(..., "sem_masks"))), against
Format of each sample rebuilt by ultralytics with stoker's draws forced
(test_yolo_segments' real server and replay).
"""

from __future__ import annotations

import copy
from typing import Any, List

import numpy as np
import pytest
import torch

from ultralytics.data import augment  # noqa: E402
from ultralytics.data.utils import polygon2mask, polygons2masks_overlap  # noqa: E402
from ultralytics.utils.instance import Instances  # noqa: E402

import stoker  # noqa: E402
from stoker import transforms as T  # noqa: E402
from stoker._targets import sem_mask, server_fields, target_names  # noqa: E402
from test_yolo_segments import IMGSZ, N, RECIPES, dataset, ops_of, rebuild, seg, served_order  # noqa: E402,F401


def ultralytics_format(segs: Any, cls: Any, w: int, h: int, ratio: int, overlap: bool) -> Any:
    """ultralytics' Format(return_mask=True) of instances of polygons segs
    (pixels) and classes cls on a w x h image."""
    n = len(segs)
    labels = {"img": np.zeros((h, w, 3), np.uint8), "cls": np.asarray(cls, np.float32).reshape(-1, 1),
              "instances": Instances(np.zeros((n, 4), np.float32), segments=np.asarray(segs, np.float32).reshape(n, 12, 2),
                                     bbox_format="xyxy", normalized=False)}
    fmt = augment.Format(bbox_format="xyxy", normalize=False, return_mask=True, mask_ratio=ratio, mask_overlap=overlap)
    return fmt(labels)


@pytest.mark.parametrize("overlap", [True, False])
def test_sem_mask_is_ultralytics_format(overlap: bool) -> None:
    """sem_mask of Format's own masks and classes is Format's sem_masks,
    exactly (float32, the shape, every pixel): random polygons that
    overlap, cross the sides, are degenerate; ratios 1 and 4; no instance."""
    rng = np.random.default_rng(11)
    background = 0
    for k in range(40):
        w, h = int(rng.integers(24, 160)), int(rng.integers(24, 160))
        n = int(rng.integers(0, 6)) if k % 8 else 0
        segs = (rng.uniform(-0.2, 1.2, (n, 12, 2)) * np.array([w, h])).astype(np.float32)
        cls = rng.integers(0, 80, n)
        for ratio in (1, 4):
            f = ultralytics_format(segs, cls, w, h, ratio, overlap)
            want = f["sem_masks"]
            labels = f["cls"].reshape(-1).to(torch.int64)
            masks = f["masks"][0] if overlap else f["masks"]
            got = sem_mask(masks, labels, not overlap, h // ratio, w // ratio, torch)
            where = f"case {k}: {n} instances on {w}x{h}/{ratio}"
            assert got.dtype == want.dtype == torch.float32, f"{where}: {got.dtype}, ultralytics {want.dtype}"
            assert got.shape == want.shape, f"{where}: {tuple(got.shape)}, ultralytics {tuple(want.shape)}"
            assert torch.equal(got, want), f"{where}: {int((got != want).sum())} of {want.numel()} pixels differ"
            if overlap and n:
                background += int((masks == 0).sum())
    if overlap:
        assert background > 0  # Format's class of no instance (the last's) was met


def test_server_fields() -> None:
    """"sem_masks" is asked of the server as the overlap mask and the labels;
    with "masks" (which the overlap mask cannot come with) it is refused."""
    assert server_fields(("boxes", "sem_masks")) == ("boxes", "labels", "overlap_mask")
    assert server_fields(("sem_masks", "labels", "overlap_mask")) == ("labels", "overlap_mask")
    assert server_fields(("boxes", "labels")) == ("boxes", "labels")
    with pytest.raises(ValueError, match='"sem_masks" is made from ultralytics\' overlap mask'):
        target_names(("masks", "sem_masks"))


@pytest.mark.parametrize("recipe,transport,ratio,overlap", [
    ("segment", "grpc", None, None), ("segment", "shm", 2, False), ("letterbox", "grpc", 3, None)])
def test_served_sem_masks_are_ultralytics_format(seg: Any, monkeypatch: pytest.MonkeyPatch, recipe: str, transport: str,
                                                 ratio: Any, overlap: Any) -> None:
    """Loader(targets=("boxes", "sem_masks")): each sample's sem_masks
    against ultralytics' Format(return_mask=True, mask_ratio, mask_overlap)
    of the sample rebuilt with stoker's draws, exactly; only the asked-for
    keys come. Where instances of equal area are ordered otherwise by
    numpy's argsort (test_yolo_segments.assert_overlap_is_ultralytics), a
    pixel may name the other of them, and the background (the last
    instance's class) too: there each pixel's class must be one of the
    instances of the area ultralytics' names; such samples are counted."""
    addr, out = seg
    r = RECIPES[recipe]
    ds = dataset(out, r.get("imgsz", IMGSZ))
    rt = ratio or 4
    seen, exact, instances = 0, 0, 0
    with stoker.Loader(addr, "seg", batch_size=4, transform=T.Compose(ops_of(r)), targets=("boxes", "sem_masks"),
                       trace=True, return_indices=True, pin_memory=False, timeout=300, seed=17, transport=transport,
                       mask_ratio=ratio, mask_overlap=overlap) as ld:
        for b in ld:
            _, targets, indices = b
            for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                assert list(t) == ["boxes", "sem_masks"]
                want = rebuild(ds, r, idx, b.trace[i], monkeypatch)
                h, w = want["img"].shape[:2]
                where = f"{recipe}/{transport}/{ratio}/{overlap} sample {idx}"
                inst = copy.deepcopy(want["instances"])
                inst.convert_bbox("xyxy")
                f = augment.Format(bbox_format="xyxy", normalize=False, return_mask=True, mask_ratio=rt,
                                   mask_overlap=overlap is not False)(copy.deepcopy(want))
                ws, gs = f["sem_masks"], t["sem_masks"]
                assert gs.dtype == torch.float32 and gs.shape == ws.shape == (h // rt, w // rt), \
                    f"{where}: {gs.dtype} {tuple(gs.shape)}, ultralytics {tuple(ws.shape)}"
                k = len(inst.segments)
                instances += k
                seen += 1
                same = overlap is False or k == 0
                if not same:
                    index = polygons2masks_overlap((h, w), list(inst.segments), downsample_ratio=rt)[1].tolist()
                    same = served_order(t["boxes"].numpy(), inst.bboxes.astype(np.float32), where) == index
                if same:
                    assert torch.equal(gs, ws), f"{where}: {int((gs != ws).sum())} of {ws.numel()} pixels differ"
                    exact += 1
                    continue
                # Ties: each pixel's class must be that of an instance of
                # the area of the one ultralytics' map names there (the last,
                # for none).
                areas = np.array([int(polygon2mask((h, w), [q.reshape(-1)], downsample_ratio=rt).sum())
                                  for q in inst.segments])[index]
                fcls = f["cls"].reshape(-1).numpy()
                wm = f["masks"][0].numpy().astype(np.int64)
                at = areas[np.where(wm > 0, wm - 1, k - 1)]
                g, ok = gs.numpy(), np.zeros(wm.shape, bool)
                for a in np.unique(at):
                    ok[at == a] = np.isin(g[at == a], fcls[areas == a])
                assert ok.all(), f"{where}: {int((~ok).sum())} pixels of a class no instance of that area has"
        assert not list(ld.sample_errors)
    assert seen == N and instances > N and exact > N // 2
    print(f"\n{recipe}/{transport}/{ratio}/{overlap}: {seen} samples, {exact} exact, {seen - exact} with ties of equal areas")
