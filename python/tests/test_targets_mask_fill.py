"""A fill per type with masks: torchvision's ``fill={tv_tensors.Image: v,
tv_tensors.Mask: m}`` (or ``"others"``) on Pad, RandomCrop, RandomZoomOut,
RandomRotation and RandomAffine, through a real ``stoker serve``. Each
sample's trace (whose fill is the pixels') is replayed by
torchvision.transforms.v2.functional: on decode_jpeg's pixels with the
Image's fill, the same bytes; on the source masks (pycocotools') with the
Mask's fill, the same bytes, as torchvision's transform would call its
kernels. The same recipes converted from torchvision's own classes by
from_torchvision (the SSD references' ``RandomZoomOut(fill={Image: (123, 117,
104), "others": 0})`` among them) give the same spec. A Mask's fill other
than 0 is refused, saying so."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import pytest
import torch
from torchvision import tv_tensors
from torchvision.io import ImageReadMode, decode_jpeg, read_file
from torchvision.transforms import v2 as tv2

import stoker
from stoker import transforms as T
from stoker._errors import StokerError
from test_detection_ops import replay_pixels
from test_targets import N, coco_sources, det, server  # noqa: F401 (the fixtures)
from test_targets_masks import coco_masks, fixed_keep, replay_masks

IMG, MASK = tv_tensors.Image, tv_tensors.Mask

# name: (stoker's ops, torchvision's classes of the same recipe, the steps drawn)
RECIPES: Dict[str, Any] = {
    "pad-randomcrop": (
        lambda: [T.Pad((3, 5, 7, 2), fill={IMG: (200, 100, 50), MASK: 0}),
                 T.RandomCrop((300, 350), padding=(10, 20), pad_if_needed=True, fill={IMG: (200, 100, 50), "others": 0}),
                 T.RandomHorizontalFlip()],
        lambda: [tv2.Pad((3, 5, 7, 2), fill={IMG: (200, 100, 50), MASK: 0}),
                 tv2.RandomCrop((300, 350), padding=(10, 20), pad_if_needed=True, fill={IMG: (200, 100, 50), "others": 0}),
                 tv2.RandomHorizontalFlip()],
        {"pad", "crop"}),
    "ssd-zoom-out": (
        lambda: [T.RandomZoomOut(fill={IMG: (123, 117, 104), "others": 0}, p=0.7), T.Resize((96, 96))],
        lambda: [tv2.RandomZoomOut(fill={IMG: (123, 117, 104), "others": 0}, p=0.7), tv2.Resize((96, 96))],
        {"pad", "resize"}),
    "rotate": (
        lambda: [T.Resize((96, 128)), T.RandomRotation(30, fill={IMG: (10, 20, 30), MASK: 0})],
        lambda: [tv2.Resize((96, 128)), tv2.RandomRotation(30, fill={IMG: (10, 20, 30), MASK: 0})],
        {"resize", "rotate"}),
    "affine": (
        lambda: [T.Resize((80, 100)), T.RandomAffine(15, translate=(0.2, 0.1), scale=(0.7, 1.1),
                                                      fill={IMG: 77, MASK: 0})],
        lambda: [tv2.Resize((80, 100)), tv2.RandomAffine(15, translate=(0.2, 0.1), scale=(0.7, 1.1),
                                                          fill={IMG: 77, MASK: 0})],
        {"resize", "affine"}),
}


def masks_trace(trace: List[Any], mask_fill: float) -> List[Any]:
    """The trace as torchvision's transform runs it on a Mask: its fill
    the Mask's, not the pixels'."""
    out = []
    for name, args in trace:
        if name in ("pad", "rotate", "affine"):
            args = dict(args, fill=[mask_fill])
        out.append((name, args))
    return out


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_fill_per_type_is_torchvisions(server: str, det: Path, name: str) -> None:  # noqa: F811
    ours, theirs, steps = RECIPES[name]
    tf = T.Compose(ours())
    converted = T.from_torchvision(tv2.Compose(theirs()))
    def fills(ops: List[Any]) -> List[Any]:
        return [(type(op).__name__, getattr(op, "fill", None), vars(op).get("mask_fill")) for op in ops]

    assert fills(converted.transforms) == fills(tf.transforms)
    assert any(op.to_proto().ListFields()[0][1].HasField("mask_fill") for op in tf.transforms
               if "mask_fill" in vars(op))
    want, src = coco_sources(det), coco_masks(det)
    images_dir = det / "images" / "train"
    seen, exact, filled, instances, ops = 0, 0, 0, 0, set()
    with stoker.Loader(server, "coco", batch_size=5, transform=tf, targets=("boxes", "labels", "masks"), trace=True,
                       return_indices=True, fields=("path",), pin_memory=False, timeout=60, seed=3) as ld:
        for b in ld:
            images, targets, indices = b
            for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                trace = b.trace[i]
                where = f"{name} sample {idx}: {trace}"
                keep = fixed_keep(want[idx]["boxes"], trace)
                moved = replay_masks(src[idx], want[idx]["boxes"], masks_trace(trace, 0))[keep]
                assert torch.equal(t["masks"].as_subclass(torch.Tensor), moved.as_subclass(torch.Tensor)), where
                if b.decode == "exact":
                    img = decode_jpeg(read_file(str(images_dir / b.fields["path"][i].decode())), mode=ImageReadMode.RGB)
                    assert torch.equal(images[i], replay_pixels(img, trace)), where
                    exact += 1
                ops.update(op for op, _ in trace)
                filled += any(op in ("pad", "rotate", "affine") and any(a.get("fill") or ()) for op, a in trace)
                instances += len(t["labels"])
                seen += 1
        assert not list(ld.sample_errors)
    assert seen == N and instances > 0 and exact > 0 and filled > 0, (seen, instances, exact, filled)
    assert steps <= ops, ops


@pytest.mark.parametrize("fill,what", [
    ({IMG: 7, MASK: 1}, "Pad (op 0): mask fill 1: masks are filled with 0 only"),
    ({"others": 7}, "Pad (op 0): mask fill 7: masks are filled with 0 only"),
])
def test_mask_fill_refused(server: str, fill: Any, what: str) -> None:  # noqa: F811
    with pytest.raises(StokerError) as e:
        with stoker.Loader(server, "coco", batch_size=4, transform=T.Compose([T.Pad(4, fill=fill), T.CenterCrop(64)]),
                           targets=("masks",), pin_memory=False, timeout=60) as ld:
            next(iter(ld))
    assert e.value.code == "INVALID_ARGUMENT" and what in str(e.value), str(e.value)


def test_without_masks_the_image_fill_is_all(server: str) -> None:  # noqa: F811
    """Without masks a fill per type serves as its Image's fill alone: the
    same batches as the plain fill."""
    def batches(fill: Any) -> List[torch.Tensor]:
        with stoker.Loader(server, "coco", batch_size=6, transform=T.Compose([T.CenterCrop(90), T.Pad(6, fill=fill)]),
                           targets=True, pin_memory=False, timeout=60, seed=1) as ld:
            return [b.images.clone() for b in ld]

    assert all(torch.equal(a, b) for a, b in zip(batches({IMG: (1, 2, 3), MASK: 5}), batches((1, 2, 3))))


@pytest.mark.parametrize("fill,error,match", [
    ({IMG: 1, tv_tensors.Video: 2}, TypeError, "key Video"),
    ({IMG: 1, MASK: 1.5}, ValueError, "integer in 0..255"),
    ({IMG: 1, MASK: (1, 2, 3)}, ValueError, "Mask's fill"),
    ({IMG: 300}, ValueError, "0..255"),
])
def test_bad_fill_per_type(fill: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        T.Pad(4, fill=fill)
