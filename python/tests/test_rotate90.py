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
replay_expand), within torchvision's own tolerance, and the masks
(rotate_mask) exactly. The draws are held to albumentations' sampling by a
chi-square test (`stoker ops draw`, no decode).

The op's Go is its Def in pipeline/transform/op_warp.go alone (its Python
class is generated from its schema): the example of a geometric op added to
its family's file, with these tests (and its valid example in
server/floats_test.go's validOpLists).
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List

import pytest
import torch
from google.protobuf import json_format
from torchvision.transforms.v2 import functional as F

import stoker
from stats import Checks, chi2_homogeneity, in_band, ops_draw
from stoker import transforms as T
from stoker._errors import StokerError
from stoker.v1 import stoker_pb2 as pb
from test_rotate_expand import replay_expand
from test_targets import N, coco_sources, det, server  # noqa: F401 (the fixtures)
from test_targets_kpts import coco_points
from test_targets_masks import coco_masks, replay_masks

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


def test_rotate90_masks_are_torchvisions(server: str, det: Path) -> None:  # noqa: F811
    """The instances' masks turn with the image: each is torchvision's
    rotate_mask of the trace's steps (test_targets_masks' replay), exactly."""
    want, src = coco_sources(det), coco_masks(det)
    seen, set_px = 0, 0
    with stoker.Loader(server, "coco", batch_size=5, transform=T.Compose([T.Resize(SIZE), T.RandomRotate90(p=0.8)]),
                       targets=("boxes", "labels", "masks"), trace=True, return_indices=True, pin_memory=False,
                       timeout=60, seed=4) as ld:
        for b in ld:
            _, targets, indices = b
            for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                where = f"sample {idx}: {b.trace[i]}"
                h, w = b.sizes[i].tolist()
                m = t["masks"].as_subclass(torch.Tensor)
                assert tuple(m.shape[-2:]) == (h, w), where
                assert torch.equal(m, replay_masks(src[idx], want[idx]["boxes"], b.trace[i]).as_subclass(torch.Tensor)), where
                seen += 1
                set_px += int(m.sum())
        assert not list(ld.sample_errors)
    assert seen == N and set_px > 0


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


def test_rotate90_draws_are_albumentations(stoker_bin: Path) -> None:
    """The turns drawn (none, or k = 1, 2, 3), against albumentations'
    sampling, written out here as its code does it (the package is not
    installed): BasicTransform applies with ``random.random() < p``, then
    RandomRotate90's get_params draws ``random.randint(0, 3)``; k = 0 and
    not applied both leave the image. A chi-square test on 20,000 draws a
    side, at two values of p."""
    draws = 20000

    def run(k: int) -> Checks:
        c = Checks()
        for p in (0.5, 0.9):
            spec = json_format.MessageToJson(pb.TransformSpec(ops=[T.Resize((8, 6)).to_proto(),
                                                                   T.RandomRotate90(p=p).to_proto()]), indent=None)
            mine = [int(t["rotate"]["angle"]) // 90 if "rotate" in t else 0
                    for t in ops_draw(stoker_bin, spec, draws, seed=k, source=(64, 48))]
            rng = random.Random(300 + k)
            theirs = [rng.randint(0, 3) if rng.random() < p else 0 for _ in range(draws)]
            stat, pv, df = chi2_homogeneity(mine, theirs)
            c.p(f"p={p}: the quarter turns", pv, f"(chi2 {stat:.1f}, df {df}; ours {sorted(Counter(mine).items())})")
        return c

    in_band(run)
