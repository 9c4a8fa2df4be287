"""stoker.gpu.MultiScale: a size drawn per batch, as ultralytics' multi_scale
(DetectionTrainer.preprocess_batch, ultralytics 8.4.190, pinned) and
D-FINE's BatchImageCollateFunction draw and resize.

1. Pixels: for the size the op draws at a key, the references run with
   their generator made to draw that size (ultralytics' own
   preprocess_batch; D-FINE's collate, copied below) give the same tensor,
   bit for bit.
2. Draws: the op's sizes over many keys against the references' own draws
   from their seeded ``random`` (their interpolate recorded, not run), by
   the harness's chi-square test of homogeneity (0.01 <= p <= 0.99).
3. Targets: boxes in each format, keypoints and masks are what
   torchvision.transforms.v2.functional.resize makes of them at the new
   size (the same bits, canvas_size and format), on synthetic targets and
   on a real ``stoker serve``'s batches.
"""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List

import pytest
import torch
import torch.nn.functional as F
from torchvision import tv_tensors
from torchvision.transforms.v2 import functional as TF

import stoker
from stats import Checks, chi2_homogeneity, in_band
from stoker import gpu
from stoker import transforms as T
from test_targets import det, server  # noqa: F401 (the fixtures)

# ultralytics is pinned in requirements-dev.txt: a missing one fails the
# import, it does not skip the reference.
import ultralytics.models.yolo.detect.train as ultralytics_train  # noqa: E402


# --- D-FINE's collate, the reference ---------------------------------------
# Copied from D-FINE (https://github.com/Peterande/D-FINE, src/data/dataloader.py,
# commit 4a1f73a), itself "Copied from RT-DETR (https://github.com/lyuwenyu/RT-DETR)
# Copyright(c) 2023 lyuwenyu. All Rights Reserved.", under the Apache License 2.0
# (D-FINE's LICENSE). Only its register decorator and the class it derives
# from are left out (BaseCollateFunction's epoch is inlined).


def generate_scales(base_size, base_size_repeat):
    scale_repeat = (base_size - int(base_size * 0.75 / 32) * 32) // 32
    scales = [int(base_size * 0.75 / 32) * 32 + i * 32 for i in range(scale_repeat)]
    scales += [base_size] * base_size_repeat
    scales += [int(base_size * 1.25 / 32) * 32 - i * 32 for i in range(scale_repeat)]
    return scales


class BatchImageCollateFunction:
    def __init__(
        self,
        stop_epoch=None,
        ema_restart_decay=0.9999,
        base_size=640,
        base_size_repeat=None,
    ) -> None:
        super().__init__()
        self.base_size = base_size
        self.scales = (
            generate_scales(base_size, base_size_repeat) if base_size_repeat is not None else None
        )
        self.stop_epoch = stop_epoch if stop_epoch is not None else 100000000
        self.ema_restart_decay = ema_restart_decay

    def set_epoch(self, epoch):
        self._epoch = epoch

    @property
    def epoch(self):
        return self._epoch if hasattr(self, "_epoch") else -1

    def __call__(self, items):
        images = torch.cat([x[0][None] for x in items], dim=0)
        targets = [x[1] for x in items]

        if self.scales is not None and self.epoch < self.stop_epoch:
            sz = random.choice(self.scales)
            images = F.interpolate(images, size=sz)
            if "masks" in targets[0]:
                for tg in targets:
                    tg["masks"] = F.interpolate(tg["masks"], size=sz, mode="nearest")
                raise NotImplementedError("")

        return images, targets

# --- end of D-FINE's code --------------------------------------------------


def ultralytics_trainer(imgsz: int, multi_scale: float, stride: int) -> Any:
    """What DetectionTrainer.preprocess_batch reads of its trainer."""
    return SimpleNamespace(device=torch.device("cpu"), stride=stride,
                           args=SimpleNamespace(imgsz=imgsz, multi_scale=multi_scale))


def ultralytics_preprocess(trainer: Any, img: torch.Tensor) -> torch.Tensor:
    return ultralytics_train.DetectionTrainer.preprocess_batch(trainer, {"img": img})["img"]


def photo_batch(b: int, h: int, w: int, seed: int = 0) -> torch.Tensor:
    """uint8 images with smooth content and edges, so that resampling
    differences would show."""
    g = torch.Generator().manual_seed(seed)
    small = torch.randint(0, 256, (b, 3, max(2, h // 8), max(2, w // 8)), generator=g, dtype=torch.uint8)
    x = F.interpolate(small.float(), size=(h, w), mode="bilinear", align_corners=False)
    x = x + torch.randint(-20, 21, (b, 3, h, w), generator=g)
    return x.clamp(0, 255).to(torch.uint8)


@pytest.mark.parametrize("hw,multi_scale", [((640, 640), 0.5), ((480, 640), 0.5), ((352, 288), 0.25)])
def test_ultralytics_pixels(hw: Any, multi_scale: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """The op's batch at a key is ultralytics' preprocess_batch of the
    same uint8 batch when its randrange returns the drawn side (the sides
    are multiples of the stride within its range, so it returns the
    side itself)."""
    h, w = hw
    imgsz, stride = 640, 32
    op = gpu.MultiScale.ultralytics(imgsz=imgsz, multi_scale=multi_scale, stride=stride, seed=3)
    trainer = ultralytics_trainer(imgsz, multi_scale, stride)
    x = photo_batch(2, h, w)
    sides = set()
    for k in range(12):
        side = op.draw(key=(0, k))
        assert side is not None
        sides.add(side)
        monkeypatch.setattr(ultralytics_train.random, "randrange", lambda a, b, s=side: s if a <= s < b else -1)
        want = ultralytics_preprocess(trainer, x.clone())
        got, _ = op(x.float() / 255, key=(0, k))
        assert got.dtype == torch.float32 and got.shape == want.shape and torch.equal(got, want), (k, side)
        assert op.size(h, w, key=(0, k)) == (None if want.shape == x.shape else tuple(want.shape[2:]))
    assert len(sides) > 4, sides


@pytest.mark.parametrize("hw", [(640, 640), (48, 64)])
def test_dfine_pixels(hw: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The op's batch at a key is D-FINE's collate of the same float
    images when its random.choice picks the drawn side; from the stop on
    both leave the batch as it is."""
    h, w = hw
    op = gpu.MultiScale.dfine(base_size=640, base_size_repeat=3, stop_epoch=72, seed=1)
    ref = BatchImageCollateFunction(stop_epoch=72, base_size=640, base_size_repeat=3)
    assert [s for s, _ in op.sizes] == ref.scales
    x = photo_batch(2, h, w, seed=1).float() / 255
    items = [(x[i], {"labels": torch.tensor([1])}) for i in range(len(x))]
    for epoch, k in [(0, 0), (0, 1), (5, 2), (71, 3), (71, 4)]:
        side = op.draw(key=(epoch, k))
        monkeypatch.setattr(random, "choice", lambda seq, s=side: s if s in seq else -1)
        ref.set_epoch(epoch)
        want, _ = ref(items)
        got, _ = op(x, key=(epoch, k))
        assert got.shape == (2, 3, side, side) and torch.equal(got, want), (epoch, k, side)
    ref.set_epoch(72)
    monkeypatch.setattr(random, "choice", lambda seq: pytest.fail("D-FINE drew after its stop"))
    want, _ = ref(items)
    got, _ = op(x, key=(72, 0))
    assert op.draw(key=(72, 0)) is None and torch.equal(want, x) and got is x


def test_uint8_images() -> None:
    """Nearest on uint8 is the float result's pixels; bilinear on uint8 is
    the float32 result rounded."""
    x = photo_batch(2, 40, 56, seed=2)
    near = gpu.MultiScale([(30, 70)], mode="nearest")
    got, _ = near(x, key=(0, 0))
    assert got.dtype == torch.uint8 and torch.equal(got.float(), near(x.float(), key=(0, 0))[0])
    lin = gpu.MultiScale([(30, 70)], mode="bilinear")
    got, _ = lin(x, key=(0, 0))
    want = F.interpolate(x.float(), size=(30, 70), mode="bilinear", align_corners=False).round().to(torch.uint8)
    assert got.dtype == torch.uint8 and torch.equal(got, want)


def ultralytics_draws(imgsz: int, multi_scale: float, stride: int, n: int, seed: int,
                      monkeypatch: pytest.MonkeyPatch) -> List[int]:
    """n sizes ultralytics' preprocess_batch draws from its seeded random,
    read from the interpolate it asks for (recorded, not run), on a square
    batch whose side is no size it may draw (so it always asks)."""
    trainer = ultralytics_trainer(imgsz, multi_scale, stride)
    seen: List[int] = []

    def record(imgs: torch.Tensor, size: Any = None, **kw: Any) -> torch.Tensor:
        seen.append(int(size[0]))
        return imgs

    monkeypatch.setattr(ultralytics_train.nn.functional, "interpolate", record)
    img = torch.zeros((1, 3, 8, 8), dtype=torch.uint8)
    random.seed(seed)
    for _ in range(n):
        ultralytics_preprocess(trainer, img)
    monkeypatch.undo()
    assert len(seen) == n
    return seen


@pytest.mark.parametrize("imgsz,multi_scale,stride", [(640, 0.5, 32), (640, 0.25, 32), (320, 0.5, 64)])
def test_ultralytics_draws(imgsz: int, multi_scale: float, stride: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The op's sides over 20000 batch keys against ultralytics' own 20000
    draws (chi-square of homogeneity), the edge sizes (drawn less often:
    fewer integers round to them) included."""
    n = 20000

    def run(seed: int) -> Checks:
        op = gpu.MultiScale.ultralytics(imgsz=imgsz, multi_scale=multi_scale, stride=stride, seed=seed)
        ours = [op.draw(key=(k // 500, k % 500)) for k in range(n)]
        theirs = ultralytics_draws(imgsz, multi_scale, stride, n, seed, monkeypatch)
        assert set(ours) == set(theirs), (sorted(set(ours)), sorted(set(theirs)))
        c = Checks()
        stat, p, dof = chi2_homogeneity(ours, theirs)
        c.p(f"ultralytics multi_scale={multi_scale} imgsz={imgsz} stride={stride}", p, f"(chi2 {stat:.1f}, dof {dof})")
        return c

    in_band(run)


def test_dfine_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    """The op's sides over 20000 keys against D-FINE's collate's 20000
    (its interpolate recorded), chi-square of homogeneity: 640 three times
    as often as each other scale."""
    n = 20000

    def run(seed: int) -> Checks:
        op = gpu.MultiScale.dfine(base_size=640, base_size_repeat=3, seed=seed)
        ours = [op.draw(key=(k // 1000, k % 1000)) for k in range(n)]
        seen: List[int] = []
        monkeypatch.setattr(torch.nn.functional, "interpolate", lambda imgs, size=None, **kw: seen.append(size) or imgs)
        ref = BatchImageCollateFunction(base_size=640, base_size_repeat=3)
        ref.set_epoch(0)
        items = [(torch.zeros(3, 4, 4), {})]
        random.seed(seed)
        for _ in range(n):
            ref(items)
        monkeypatch.undo()
        c = Checks()
        stat, p, dof = chi2_homogeneity(ours, seen)
        c.p("D-FINE scales", p, f"(chi2 {stat:.1f}, dof {dof})")
        return c

    in_band(run)


def test_draws_are_the_keys() -> None:
    """A pure function of (seed, epoch, number): the same key draws the
    same in a fresh op, whatever was drawn before; keys and seeds differ."""
    a = gpu.MultiScale.dfine(seed=9)
    first = [a.draw(key=(2, k)) for k in range(50)]
    b = gpu.MultiScale.dfine(seed=9)
    assert [b.draw(key=(2, k)) for k in reversed(range(50))][::-1] == first
    assert [gpu.MultiScale.dfine(seed=10).draw(key=(2, k)) for k in range(50)] != first
    assert [a.draw(key=(3, k)) for k in range(50)] != first
    batch = stoker.Batch((torch.zeros(1, 3, 8, 8), None), epoch=2, number=7)
    assert a.draw(batch=batch) == first[7]


def synthetic_targets(h: int, w: int, fmt: str, k: int, seed: int) -> Dict[str, Any]:
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand((k, 2), generator=g) * torch.tensor([w * 0.8, h * 0.8])
    wh = torch.rand((k, 2), generator=g) * torch.tensor([w * 0.5, h * 0.5]) + 0.5
    xyxy = torch.cat([xy, xy + wh], 1)
    boxes = tv_tensors.BoundingBoxes(xyxy, format="XYXY", canvas_size=(h, w))
    boxes = TF.convert_bounding_box_format(boxes, new_format=fmt)
    kp = tv_tensors.KeyPoints(torch.rand((k, 5, 2), generator=g) * torch.tensor([w, h]), canvas_size=(h, w))
    masks = tv_tensors.Mask((torch.rand((k, h, w), generator=g) < 0.3).to(torch.uint8))
    return {"boxes": boxes, "labels": torch.arange(k), "keypoints": kp,
            "keypoints_visibility": torch.full((k, 5), 2, dtype=torch.uint8), "masks": masks,
            "image_id": 5, "overlap_mask": torch.zeros((h // 4, w // 4), dtype=torch.uint8)}


def assert_torchvisions(got: Dict[str, Any], src: Dict[str, Any], size: Any, where: str) -> None:
    """Each tv_tensor of ``got`` is torchvision's resize of ``src``'s to
    ``size`` (the same bits, type, format, canvas); the rest as it was."""
    assert set(got) == set(src), where
    for name in ("boxes", "keypoints", "masks"):
        want = TF.resize(src[name], size=list(size))
        assert type(got[name]) is type(want) and got[name].dtype == want.dtype, (where, name)
        assert torch.equal(got[name].as_subclass(torch.Tensor), want.as_subclass(torch.Tensor)), (where, name)
        if name != "masks":
            assert tuple(got[name].canvas_size) == tuple(want.canvas_size) == tuple(size), (where, name)
    assert got["boxes"].format == src["boxes"].format, where
    for name in ("labels", "keypoints_visibility", "image_id", "overlap_mask"):
        assert got[name] is src[name], (where, name)


@pytest.mark.parametrize("fmt", ["XYXY", "XYWH", "CXCYWH"])
@pytest.mark.parametrize("rule", ["ultralytics", "dfine"])
def test_targets_are_torchvisions(fmt: str, rule: str) -> None:
    """Boxes (each format), keypoints and masks after the op are
    torchvision's resize of them to the batch's new size; an instance-less
    sample too."""
    h, w = 96, 128
    if rule == "ultralytics":
        op = gpu.MultiScale.ultralytics(imgsz=128, multi_scale=0.5, seed=4)
    else:
        op = gpu.MultiScale.dfine(base_size=128, base_size_repeat=1, seed=4)
    x = photo_batch(3, h, w, seed=3)
    resized = 0
    for k in range(6):
        targets = [synthetic_targets(h, w, fmt, kk, seed=k * 10 + i) for i, kk in enumerate((7, 1, 0))]
        images, got = op(x, targets, key=(1, k))
        size = op.size(h, w, key=(1, k))
        if size is None:
            assert images is x and all(a is b for a, b in zip(got, targets))
            continue
        resized += 1
        assert tuple(images.shape[2:]) == size
        for i, (g, t) in enumerate(zip(got, targets)):
            assert_torchvisions(g, t, size, f"{rule} {fmt} key {k} sample {i} size {size}")
            assert t["boxes"].canvas_size == (h, w), "the targets given were changed"
    assert resized >= 4


def test_served_batches(server: str, det: Path) -> None:  # noqa: F811
    """On a real ``stoker serve``'s batches (boxes, keypoints and masks
    moved by the server): each batch resized to its drawn size, its
    targets torchvision's resize of the batch's."""
    op = gpu.MultiScale.dfine(base_size=128, base_size_repeat=1, seed=2)  # 96, 128 or 160
    sizes = set()
    with stoker.Loader(server, "coco", batch_size=6, transform=T.Compose([T.Resize((80, 96))]), seed=2,
                       targets=("boxes", "labels", "keypoints", "keypoints_visibility", "masks"), pin_memory=False,
                       timeout=120) as ld:
        for b in ld:
            images, targets = b
            out, moved = op(images, targets, batch=b)
            size = op.size(80, 96, batch=b)
            want = TF.resize(tv_tensors.Image(images), size=list(size), interpolation=TF.InterpolationMode.NEAREST)
            assert torch.equal(out, want.as_subclass(torch.Tensor)), (b.number, size)
            for i, (m, t) in enumerate(zip(moved, targets)):
                assert len(t["labels"]) and set(t) == {"boxes", "labels", "keypoints", "keypoints_visibility", "masks"}
                for name in ("boxes", "keypoints", "masks"):
                    assert tuple(m[name].shape[-2:] if name == "masks" else m[name].canvas_size) == size
                    w_ = TF.resize(t[name], size=list(size))
                    assert torch.equal(m[name].as_subclass(torch.Tensor), w_.as_subclass(torch.Tensor)), (b.number, i)
            sizes.add(size)
    assert len(sizes) > 1, sizes


@pytest.mark.parametrize("make,err,match", [
    (lambda: gpu.MultiScale([]), TypeError, "non-empty"),
    (lambda: gpu.MultiScale([0]), ValueError, "sizes"),
    (lambda: gpu.MultiScale([True]), TypeError, "sizes"),
    (lambda: gpu.MultiScale([(10, 20, 30)]), ValueError, "pair"),
    (lambda: gpu.MultiScale([(10, 20)], stride=32), ValueError, "longer side"),
    (lambda: gpu.MultiScale([64], mode="bicubic"), ValueError, "mode"),
    (lambda: gpu.MultiScale([64], stop_epoch=0), ValueError, "stop_epoch=0"),
    (lambda: gpu.MultiScale.ultralytics(multi_scale=0.0), ValueError, "multi_scale"),
    (lambda: gpu.MultiScale.ultralytics(multi_scale="0.5"), TypeError, "multi_scale"),
    (lambda: gpu.MultiScale.dfine(base_size_repeat=-1), ValueError, "base_size_repeat"),
])
def test_bad_arguments(make: Any, err: type, match: str) -> None:
    with pytest.raises(err, match=match):
        make()


def test_bad_batches() -> None:
    op = gpu.MultiScale([32])
    x = torch.zeros((2, 3, 16, 24))
    with pytest.raises(ValueError, match="channels-last"):
        op(torch.zeros((2, 16, 24, 3)), key=(0, 0))
    with pytest.raises(ValueError, match="2 images"):
        op(x, [{}], key=(0, 0))
    t = synthetic_targets(20, 24, "XYXY", 2, 0)
    with pytest.raises(ValueError, match="canvas"):
        op(x, [t, t], key=(0, 0))
    padded = stoker.Batch((x, None), epoch=0, number=0)
    padded.sizes = torch.tensor([[16, 24], [10, 12]])
    with pytest.raises(ValueError, match="per-sample sizes"):
        op(x, batch=padded)
    with pytest.raises(TypeError, match="key or batch"):
        op(x, key=(0, 0), batch=stoker.Batch((x, None), epoch=0, number=0))
    assert repr(op).startswith("MultiScale([32], mode='nearest'")
