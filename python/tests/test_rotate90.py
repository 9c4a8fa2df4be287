"""RandomRotate90 (albumentations' op: with probability p, k quarter turns
counter-clockwise, k uniform in 0..3) end to end, against torch and
torchvision.

A real `stoker serve` over mkdata --coco's set. The same job is read twice
with one seed, once without the op: Resize has no draw, so each sample's
image with the op is the one without it turned by the k its trace says,
torch.rot90(image, k), which is torchvision's rotate(image, 90 k,
expand=True) too, byte for byte; an odd k swaps the sides (the batch's
sizes and mask say each sample's). The boxes and keypoints are replayed
through torchvision.transforms.v2.functional (test_rotate_expand's
replay_expand), within torchvision's own tolerance.

The op is defined in pipeline/transform/op_warp.go alone (its Python class
is generated from its schema): the example of a geometric op added to its
family's file, with these tests.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Dict, List

import pytest
import torch
from torchvision.transforms.v2 import functional as F

import stoker
from stoker import transforms as T
from stoker._errors import StokerError
from test_rotate_expand import replay_expand
from test_targets import N, coco_sources, det, server  # noqa: F401 (the fixtures)
from test_targets_kpts import coco_points

SIZE = (72, 97)


def _images(server: str, ops: List[Any], seed: int) -> Dict[int, torch.Tensor]:
    """Every sample's image (cut to its size) of the job of ops, by index."""
    out = {}
    with stoker.Loader(server, "coco", batch_size=5, transform=T.Compose(ops), return_indices=True, pin_memory=False,
                       timeout=60, seed=seed) as ld:
        for b in ld:
            images, _, indices = b
            for i, idx in enumerate(indices.tolist()):
                h, w = b.sizes[i].tolist() if b.sizes is not None else images[i].shape[-2:]
                out[idx] = images[i][:, :h, :w].clone()
    return out


def test_rotate90_is_torchvisions(server: str, det: Path) -> None:  # noqa: F811
    want, pts = coco_sources(det), coco_points(det)
    turns: Counter = Counter()
    for seed in (1, 2):
        plain = _images(server, [T.Resize(SIZE)], seed)
        with stoker.Loader(server, "coco", batch_size=5, transform=T.Compose([T.Resize(SIZE), T.RandomRotate90(p=0.8)]),
                           targets=True, trace=True, return_indices=True, pin_memory=False, timeout=60, seed=seed) as ld:
            for b in ld:
                images, targets, indices = b
                assert b.sizes is not None and b.mask is not None
                assert max(images.shape[-2:]) <= max(SIZE)  # the bound: the longer side, both ways
                for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                    trace = b.trace[i]
                    where = f"seed {seed} sample {idx}: {trace}"
                    steps = dict(trace)
                    k = 0
                    if "rotate" in steps:
                        args = steps["rotate"]
                        assert args["expand"] and args["angle"] in (90, 180, 270), where
                        k = int(args["angle"]) // 90
                    h, w = b.sizes[i].tolist()
                    turned = torch.rot90(plain[idx], k, dims=(1, 2))
                    assert (h, w) == tuple(turned.shape[-2:]), where
                    assert torch.equal(images[i][:, :h, :w], turned), where
                    assert torch.equal(F.rotate(plain[idx], 90.0 * k, expand=True), turned), where
                    assert not images[i][:, h:, :].any() and not images[i][:, :, w:].any(), f"{where}: padding not zero"
                    boxes, points, _, size, _ = replay_expand(want[idx]["boxes"], pts[idx][0], None, trace)
                    assert size == (h, w), where
                    torch.testing.assert_close(t["boxes"].as_subclass(torch.Tensor), boxes.as_subclass(torch.Tensor),
                                               msg=lambda s: f"{where}: boxes: {s}")
                    torch.testing.assert_close(t["keypoints"].as_subclass(torch.Tensor), points.as_subclass(torch.Tensor),
                                               msg=lambda s: f"{where}: keypoints: {s}")
                    assert tuple(t["boxes"].canvas_size) == (h, w), where
                    turns[k] += 1
            assert not list(ld.sample_errors)
    assert sum(turns.values()) == 2 * N and all(turns[k] > 0 for k in range(4)), turns


def test_rotate90_refused(server: str) -> None:  # noqa: F811
    with pytest.raises(ValueError, match=r"RandomRotate90: p should be in 0\.\.1, got 1\.5"):
        T.RandomRotate90(p=1.5)
    # the turned image's sides are the image's own: something after it must bound them
    with pytest.raises(StokerError, match="nothing bounds"):
        with stoker.Loader(server, "coco", batch_size=2, transform=T.Compose([T.RandomRotate90(), T.RandomHorizontalFlip()]),
                           timeout=30) as ld:
            next(iter(ld))


def test_rotate90_then_a_fixed_size(server: str) -> None:  # noqa: F811
    """A Resize((h, w)) after the turns fixes the size again: one size a
    batch, no sizes or mask, each image the turned one resized."""
    turned = _images(server, [T.Resize(SIZE), T.RandomRotate90(p=1.0)], seed=3)
    with stoker.Loader(server, "coco", batch_size=5, transform=T.Compose([T.Resize(SIZE), T.RandomRotate90(p=1.0),
                                                                          T.Resize((40, 50))]),
                       return_indices=True, pin_memory=False, timeout=60, seed=3) as ld:
        seen = 0
        for b in ld:
            images, _, indices = b
            assert b.sizes is None and tuple(images.shape[-2:]) == (40, 50)
            for img, idx in zip(images, indices.tolist()):
                want = F.resize(turned[idx], [40, 50], antialias=True)
                assert torch.equal(img, want), idx  # torchvision's resize of the turned image, to the byte
                seen += 1
        assert seen == N and not list(ld.sample_errors)
