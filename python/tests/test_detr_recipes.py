"""Detection as the repositories write it: a COCO set's labels as
torchvision's wrapper gives them (the file's category ids, with gaps),
contiguous ranks on request, and RandomIoUCrop's p, which the DETR family's
dataloader.yml sets (RT-DETR v2, D-FINE, DEIM: ``RandomIoUCrop, p: 0.8``)
and torchvision writes ``RandomApply([RandomIoUCrop()], p)``.
"""
from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Any, List

import pytest
import torch
from google.protobuf import json_format
from torchvision.transforms import v2 as tv2

import stoker
from helpers import wire_args
from stoker import transforms as T
from stoker.v1 import stoker_pb2 as pb
from test_targets import N, coco_sources, det, server  # noqa: F401 (the fixtures)

DRAWS = 10000


def _dfine_iou_crop() -> type:
    """The DETR family's RandomIoUCrop as their src/data/transforms/_transforms.py
    defines it (a module of that name, as importing their repository gives):
    torchvision's with a p, the sample left when torch.rand(1) >= p."""
    name = "src.data.transforms._transforms"
    mod = sys.modules.get(name) or types.ModuleType(name)

    class RandomIoUCrop(tv2.RandomIoUCrop):
        def __init__(self, min_scale: float = 0.3, max_scale: float = 1, min_aspect_ratio: float = 0.5,
                     max_aspect_ratio: float = 2, sampler_options: Any = None, trials: int = 40, p: float = 1.0):
            super().__init__(min_scale, max_scale, min_aspect_ratio, max_aspect_ratio, sampler_options, trials)
            self.p = p

        def __call__(self, *inputs: Any) -> Any:
            if torch.rand(1) >= self.p:
                return inputs if len(inputs) > 1 else inputs[0]
            return super().forward(*inputs)

    RandomIoUCrop.__module__ = name
    mod.RandomIoUCrop = RandomIoUCrop  # type: ignore[attr-defined]
    sys.modules[name] = mod
    return RandomIoUCrop


def dfine_train(p: float = 0.8) -> tv2.Compose:
    """D-FINE's configs/dfine/include/dataloader.yml train transforms, with
    torchvision's own classes where theirs are conversions (their
    ConvertPILImage is ToImage + ToDtype(float32, scale=True); their
    ConvertBoxes(fmt='cxcywh', normalize=True) is ConvertBoundingBoxFormat,
    the division by the canvas the trainer's)."""
    return tv2.Compose([
        tv2.RandomPhotometricDistort(p=0.5), tv2.RandomZoomOut(fill=0), _dfine_iou_crop()(p=p),
        tv2.SanitizeBoundingBoxes(min_size=1), tv2.RandomHorizontalFlip(), tv2.Resize(size=[640, 640]),
        tv2.SanitizeBoundingBoxes(min_size=1), tv2.ToImage(), tv2.ToDtype(torch.float32, scale=True),
        tv2.ConvertBoundingBoxFormat("CXCYWH")])


def cropped(stoker_bin: Path, spec: Any, seed: int = 5) -> List[bool]:
    """Whether each of DRAWS samples' trace has the IoU crop, drawn by
    `stoker ops draw` (spec: a list of stoker ops, or a TransformSpec as a
    dict) on a 200x150 source with one box."""
    js = json.dumps(spec) if isinstance(spec, dict) else \
        json_format.MessageToJson(pb.TransformSpec(ops=[op.to_proto() for op in spec]), indent=None)
    r = subprocess.run([str(stoker_bin), "ops", "draw", "--spec", js, "--n", str(DRAWS), "--seed", str(seed),
                        "--source", "200x150", "--boxes", "[[40, 30, 120, 100]]"], capture_output=True, text=True,
                       timeout=600, stdin=subprocess.DEVNULL, check=True)
    traces = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    assert len(traces) == DRAWS
    return [any(s == "iou_crop" for s, _ in t) for t in traces]


def share_of(with_p: List[bool], without: List[bool]) -> float:
    """The share of the samples a crop of p 1 crops that the crop of p
    crops too: p's draw has its own stream, so where it passes the crop is
    the one p 1 draws, and a sample p 1 leaves whole (an option >= 1
    drawn first) stays whole."""
    assert all(b for a, b in zip(with_p, without) if a), "a sample cropped with p that p=1 leaves"
    return sum(with_p) / sum(without)


@pytest.mark.parametrize("p", [0.8, 0.3, 1.0])
def test_iou_crop_p_is_its_share(stoker_bin: Path, p: float) -> None:
    """With one sampler option of IoU 0 every drawn crop is made: the share
    of samples cropped is p, over 10^4 draws (0.8 +- 0.02 for the DETR
    recipes' p; 4 sigma is 0.016 there)."""
    share = sum(cropped(stoker_bin, [T.RandomIoUCrop(sampler_options=[0.0], p=p), T.Resize((64, 64))])) / DRAWS
    assert abs(share - p) <= 0.02, share


def test_dfine_pipeline_converts_with_its_p(stoker_bin: Path) -> None:
    spec = stoker.transforms.from_torchvision(dfine_train())
    crops = [op for op in spec.transforms if isinstance(op, T.RandomIoUCrop)]
    assert len(crops) == 1 and crops[0].p == pytest.approx(0.8)
    # torchvision's seven options, one of which (1) leaves the image, and a
    # round whose crop is not found draws its option again: against the
    # same pipeline with p=1, 0.8 of its crops are made.
    crops[0].p = 1.0
    every = cropped(stoker_bin, spec.transforms)
    crops[0].p = 0.8
    share = share_of(cropped(stoker_bin, spec.transforms), every)
    assert abs(share - 0.8) <= 0.02, share


def test_random_apply_of_an_iou_crop_converts() -> None:
    spec = stoker.transforms.from_torchvision(tv2.Compose([
        tv2.RandomApply([tv2.RandomIoUCrop()], p=0.8), tv2.SanitizeBoundingBoxes(), tv2.Resize((320, 320))]))
    crop = spec.transforms[0]
    assert isinstance(crop, T.RandomIoUCrop) and crop.p == pytest.approx(0.8)
    assert wire_args(crop.to_proto())["p"] == pytest.approx(0.8)
    # Both p: RandomApply's of the DETR family's.
    spec = stoker.transforms.from_torchvision(tv2.Compose([
        tv2.RandomApply([_dfine_iou_crop()(p=0.5)], p=0.5), tv2.Resize((320, 320))]))
    assert spec.transforms[0].p == pytest.approx(0.25)
    with pytest.raises(ValueError, match="p=0"):
        stoker.transforms.from_torchvision(tv2.Compose([tv2.RandomApply([tv2.RandomIoUCrop()], p=0.0),
                                                       tv2.Resize((320, 320))]))
    with pytest.raises(ValueError, match="p=1.5"):
        T.RandomIoUCrop(p=1.5)
    # Without p, torchvision's crop: always drawn.
    assert wire_args(T.RandomIoUCrop().to_proto())["p"] == 1


def test_detr_preset_crops_four_in_five(stoker_bin: Path) -> None:
    """The detr preset is the DETR family's recipe with its p=0.8: against
    the same ops with p=1, 0.8 of their crops are made."""
    ops = [T.RandomPhotometricDistort(p=0.5), T.RandomZoomOut(fill=0), T.RandomIoUCrop(p=1.0),
           T.SanitizeBoundingBoxes(min_size=1), T.RandomHorizontalFlip(), T.Resize((640, 640)),
           T.SanitizeBoundingBoxes(min_size=1)]
    share = share_of(cropped(stoker_bin, {"preset": "detr"}, seed=3), cropped(stoker_bin, ops, seed=3))
    assert abs(share - 0.8) <= 0.02, share


def test_labels_are_the_wrappers_category_ids(server: str, det: Path) -> None:  # noqa: F811
    """The default labels equal wrap_dataset_for_transforms_v2(CocoDetection)'s
    (the file's category ids, which have gaps here: 1, 2, 4, 7, 9);
    labels="contiguous" gives each one's rank among them."""
    want = coco_sources(det)
    ids = sorted({int(c) for t in want.values() for c in t["labels"]})
    assert ids != list(range(1, len(ids) + 1)), ids  # the ids have gaps: the two mappings differ
    every = sorted(ids)
    got = {}
    for labels in ("category_id", "contiguous"):
        seen = 0
        with stoker.Loader(server, "coco", batch_size=4, shuffle=False, transform=T.Compose([T.Resize((64, 64))]),
                           targets=("boxes", "labels"), return_indices=True, pin_memory=False, timeout=60,
                           labels=labels) as ld:
            for _, targets, indices in ld:
                for t, idx in zip(targets, indices.tolist()):
                    w = want[idx]["labels"]
                    if labels == "contiguous":
                        cats = [every.index(int(c)) for c in w]  # the DETR family's remap_mscoco_category
                        w = torch.tensor(cats, dtype=torch.int64)
                    assert torch.equal(t["labels"], w), (labels, idx, t["labels"], w)
                    got.setdefault(labels, []).append(t["labels"])
                    seen += 1
        assert seen == N
    assert not torch.equal(torch.cat(got["category_id"]), torch.cat(got["contiguous"]))


def test_labels_refused_without_targets(server: str) -> None:  # noqa: F811
    with pytest.raises(ValueError, match="needs targets"):
        stoker.Loader(server, "coco", batch_size=4, labels="contiguous")
    with pytest.raises(ValueError, match="labels must be"):
        stoker.Loader(server, "coco", batch_size=4, targets=True, labels="ranks")
