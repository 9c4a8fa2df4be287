"""A Mask's fill: torchvision's plain ``fill=v`` (the image's and the masks'
alike) and its ``fill={tv_tensors.Image: v, tv_tensors.Mask: m}`` (or
``"others"``) on Pad, RandomCrop, RandomZoomOut, RandomRotation,
RandomAffine and RandomPerspective, m 0, 1 or 255 (the segmentation references' ignore index),
with a flip or a resize after, through a real ``stoker serve``. Each
sample's trace (whose fill is the pixels') is replayed by
torchvision.transforms.v2.functional: on decode_jpeg's pixels with the
Image's fill, the same bytes; on the source masks (pycocotools') with the
Mask's fill, the same bytes, as torchvision's transform would call its
kernels. A deterministic Pad is checked against torchvision's own classes
run on the image and its masks. The same recipes converted from
torchvision's own classes by from_torchvision (the SSD references'
``RandomZoomOut(fill={Image: (123, 117, 104), "others": 0})`` among them)
give the same spec. A Mask fill past a byte, negative, or of several values
is refused, naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import pytest
import torch
from torchvision import tv_tensors
from torchvision.io import ImageReadMode, decode_jpeg, read_file
from torchvision.transforms import v2 as tv2

import stoker
from helpers import wire_args
from stoker import _buffers as buffers
from stoker import transforms as T
from stoker._errors import StokerError
from stoker._targets import arrays_of
from stoker.v1 import stoker_pb2 as pb
from test_detection_ops import replay_pixels
from test_targets import N, coco_sources, det, server  # noqa: F401 (the fixtures)
from test_targets_masks import coco_masks, fixed_keep, replay_masks

IMG, MASK = tv_tensors.Image, tv_tensors.Mask

# name: (stoker's ops, torchvision's classes of the same recipe, the steps
# drawn, the Mask's fill of each filling step: one for all, or by the step's
# pixel fill)
RECIPES: Dict[str, Any] = {
    "pad-randomcrop": (
        lambda: [T.Pad((3, 5, 7, 2), fill={IMG: (200, 100, 50), MASK: 0}),
                 T.RandomCrop((300, 350), padding=(10, 20), pad_if_needed=True, fill={IMG: (200, 100, 50), "others": 0}),
                 T.RandomHorizontalFlip()],
        lambda: [tv2.Pad((3, 5, 7, 2), fill={IMG: (200, 100, 50), MASK: 0}),
                 tv2.RandomCrop((300, 350), padding=(10, 20), pad_if_needed=True, fill={IMG: (200, 100, 50), "others": 0}),
                 tv2.RandomHorizontalFlip()],
        {"pad", "crop"}, 0),
    "ssd-zoom-out": (
        lambda: [T.RandomZoomOut(fill={IMG: (123, 117, 104), "others": 0}, p=0.7), T.Resize((96, 96))],
        lambda: [tv2.RandomZoomOut(fill={IMG: (123, 117, 104), "others": 0}, p=0.7), tv2.Resize((96, 96))],
        {"pad", "resize"}, 0),
    "rotate": (
        lambda: [T.Resize((96, 128)), T.RandomRotation(30, fill={IMG: (10, 20, 30), MASK: 0})],
        lambda: [tv2.Resize((96, 128)), tv2.RandomRotation(30, fill={IMG: (10, 20, 30), MASK: 0})],
        {"resize", "rotate"}, 0),
    "affine": (
        lambda: [T.Resize((80, 100)), T.RandomAffine(15, translate=(0.2, 0.1), scale=(0.7, 1.1),
                                                      fill={IMG: 77, MASK: 0})],
        lambda: [tv2.Resize((80, 100)), tv2.RandomAffine(15, translate=(0.2, 0.1), scale=(0.7, 1.1),
                                                          fill={IMG: 77, MASK: 0})],
        {"resize", "affine"}, 0),
}


def _recipes(m: int) -> Dict[str, Any]:
    """The six ops with a Mask fill of m (a fill per type, and a plain
    fill, every type's), a flip or a resize after."""
    def both(ops: Any) -> Any:  # stoker's and torchvision's classes of one recipe
        return lambda: ops(T), lambda: ops(tv2)

    typed = lambda img: {IMG: img, MASK: m}  # noqa: E731
    return {
        f"pad-randomcrop-typed-{m}": (*both(lambda t: [
            t.Pad((3, 5, 7, 2), fill=typed((200, 100, 50))),
            t.RandomCrop((300, 350), padding=(10, 20), pad_if_needed=True, fill=typed((200, 100, 50))),
            t.RandomHorizontalFlip()]), {"pad", "crop", "horizontal_flip"}, m),
        f"pad-randomcrop-plain-{m}": (*both(lambda t: [
            t.Pad((3, 5, 7, 2), fill=m), t.RandomCrop((300, 350), padding=(10, 20), pad_if_needed=True, fill=m),
            t.RandomVerticalFlip()]), {"pad", "crop", "vertical_flip"}, m),
        f"zoom-out-typed-{m}": (*both(lambda t: [
            t.RandomZoomOut(fill=typed((123, 117, 104)), side_range=(1.0, 2.0), p=0.7), t.Resize((96, 96)),
            t.RandomHorizontalFlip()]), {"pad", "resize", "horizontal_flip"}, m),
        f"zoom-out-plain-{m}": (*both(lambda t: [
            t.RandomZoomOut(fill=m, side_range=(1.0, 2.0), p=0.7), t.Resize((120, 100))]), {"pad", "resize"}, m),
        f"rotate-typed-{m}": (*both(lambda t: [
            t.Resize((96, 128)), t.RandomRotation(30, fill=typed((10, 20, 30))), t.RandomHorizontalFlip()]),
            {"resize", "rotate", "horizontal_flip"}, m),
        # (from_torchvision takes no Resize after a RandomRotation: None.)
        f"rotate-expand-plain-{m}": (
            lambda: [T.Resize((96, 128)), T.RandomRotation(40, fill=m, expand=True), T.Resize((90, 90))], None,
            {"resize", "rotate"}, m),
        f"affine-typed-{m}": (*both(lambda t: [
            t.Resize((80, 100)), t.RandomAffine(15, translate=(0.2, 0.1), scale=(0.7, 1.1), fill=typed(77)),
            t.RandomVerticalFlip()]), {"resize", "affine", "vertical_flip"}, m),
        f"affine-plain-{m}": (*both(lambda t: [
            t.Resize((80, 100)), t.RandomAffine(15, translate=(0.2, 0.1), scale=(0.7, 1.1), fill=m),
            t.RandomHorizontalFlip()]), {"resize", "affine", "horizontal_flip"}, m),
        f"perspective-typed-{m}": (*both(lambda t: [
            t.Resize((96, 128)), t.RandomPerspective(0.6, p=0.8, fill=typed((10, 20, 30))),
            t.RandomHorizontalFlip()]), {"resize", "perspective", "horizontal_flip"}, m),
        f"perspective-plain-nearest-{m}": (*both(lambda t: [
            t.Resize((80, 100)), t.RandomPerspective(0.5, p=0.8, interpolation="nearest", fill=m),
            t.RandomVerticalFlip()]), {"resize", "perspective", "vertical_flip"}, m),
    }


RECIPES.update(_recipes(255))
RECIPES.update(_recipes(1))
# Three fills in one sample: the Pad's 255, the CenterCrop's zeros past the
# padded image (the image's fill 0 too), an affine's 1 over them all (a
# translation: whole pixels, on images of 320 to 480 pixels a side).
RECIPES["pad-center-affine-mixed"] = (
    lambda: [T.Pad(6, fill={IMG: 0, MASK: 255}), T.CenterCrop((440, 470)),
             T.RandomAffine(0, translate=(0.1, 0.1), fill={IMG: (10, 20, 30), MASK: 1}), T.RandomHorizontalFlip()],
    lambda: [tv2.Pad(6, fill={IMG: 0, MASK: 255}), tv2.CenterCrop((440, 470)),
             tv2.RandomAffine(0, translate=(0.1, 0.1), fill={IMG: (10, 20, 30), MASK: 1}), tv2.RandomHorizontalFlip()],
    {"pad", "center_crop", "affine"}, {(0.0, 0.0, 0.0): 255, (10.0, 20.0, 30.0): 1})


def masks_trace(trace: List[Any], mask_fill: Any) -> List[Any]:
    """The trace as torchvision's transform runs it on a Mask: its fill
    the Mask's (mask_fill, or mask_fill[the step's pixel fill]), not the
    pixels'."""
    out = []
    for name, args in trace:
        if name in ("pad", "rotate", "affine", "perspective"):
            m = mask_fill[tuple(args["fill"])] if isinstance(mask_fill, dict) else mask_fill
            args = dict(args, fill=[m])
        out.append((name, args))
    return out


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_fill_per_type_is_torchvisions(server: str, det: Path, name: str) -> None:  # noqa: F811
    ours, theirs, steps, mask_fill = RECIPES[name]
    tf = T.Compose(ours())
    def fills(ops: List[Any]) -> List[Any]:
        return [(type(op).__name__, getattr(op, "fill", None), vars(op).get("mask_fill")) for op in ops]

    if theirs is not None:
        assert fills(T.from_torchvision(tv2.Compose(theirs())).transforms) == fills(tf.transforms)
    typed = [op for op in tf.transforms if "mask_fill" in vars(op)]
    assert all(isinstance(wire_args(op.to_proto())["fill"], pb.TypedFill) for op in typed)
    big = {mask_fill} if isinstance(mask_fill, int) else set(mask_fill.values())
    big -= {0, 1}  # a fill a mask's own pixels cannot be: seen in the masks
    want, src = coco_sources(det), coco_masks(det)
    images_dir = det / "images" / "train"
    seen, exact, filled, instances, ops, big_px = 0, 0, 0, 0, set(), 0
    with stoker.Loader(server, "coco", batch_size=5, transform=tf, targets=("boxes", "labels", "masks"), trace=True,
                       return_indices=True, fields=("path",), pin_memory=False, timeout=60, seed=3) as ld:
        for b in ld:
            images, targets, indices = b
            for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                trace = b.trace[i]
                where = f"{name} sample {idx}: {trace}"
                keep = fixed_keep(want[idx]["boxes"], trace)
                moved = replay_masks(src[idx], want[idx]["boxes"], masks_trace(trace, mask_fill))[keep]
                got = t["masks"].as_subclass(torch.Tensor)
                assert got.dtype == torch.uint8 and torch.equal(got, moved.as_subclass(torch.Tensor)), where
                big_px += sum(int((got == v).sum()) for v in big)
                if b.decode == "exact":
                    img = decode_jpeg(read_file(str(images_dir / b.fields["path"][i].decode())), mode=ImageReadMode.RGB)
                    assert torch.equal(images[i], replay_pixels(img, trace)), where
                    exact += 1
                ops.update(op for op, _ in trace)
                filled += any(op in ("pad", "rotate", "affine", "perspective") and any(a.get("fill") or ()) for op, a in trace)
                instances += len(t["labels"])
                seen += 1
        assert not list(ld.sample_errors)
    assert seen == N and instances > 0 and exact > 0 and filled > 0, (seen, instances, exact, filled)
    assert steps <= ops, ops
    assert big_px > 0 or not big, f"no mask pixel of the fill {big}"


@pytest.mark.parametrize("m,plain,transport", [(255, False, "grpc"), (255, True, "shm"), (1, True, "grpc"), (1, False, "shm")])
def test_pad_is_torchvisions_own(server: str, det: Path, m: int, plain: bool, transport: str,  # noqa: F811
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """CenterCrop, Pad (fill=m, or {Image: 3, Mask: m}) and a flip, none
    random: each sample's image and masks are torchvision's own classes'
    on decode_jpeg's image and the CocoDetection wrapper's masks, the
    padding's mask pixels m; the fill blocks travel in the header (gRPC) or
    in the shared-memory slot."""
    got_bt: List[Any] = []
    real = buffers.targets_of

    def tap(bt: Any, *args: Any, **kw: Any) -> Any:
        got_bt.append((bt, kw.get("tail")))
        return real(bt, *args, **kw)

    monkeypatch.setattr(buffers, "targets_of", tap)
    fill: Any = m if plain else {IMG: 3, MASK: m}
    ops = lambda t: [t.CenterCrop((300, 310)), t.Pad((5, 7, 9, 11), fill=fill), t.RandomVerticalFlip(p=1.0)]  # noqa: E731
    theirs = tv2.Compose(ops(tv2))
    src = coco_masks(det)
    images_dir = det / "images" / "train"
    seen = 0
    with stoker.Loader(server, "coco", batch_size=6, transform=T.Compose(ops(T)), targets=("labels", "masks"),
                       return_indices=True, fields=("path",), pin_memory=False, timeout=60, seed=5, transport=transport) as ld:
        for b in ld:
            images, targets, indices = b
            bt, tail = got_bt.pop()
            assert bt.HasField("in_slot") == (transport == "shm") and len(arrays_of(bt, tail)["mask_fills"]) > 0
            for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                img = decode_jpeg(read_file(str(images_dir / b.fields["path"][i].decode())), mode=ImageReadMode.RGB)
                want_img, want_masks = theirs(tv_tensors.Image(img), tv_tensors.Mask(src[idx]))
                got = t["masks"].as_subclass(torch.Tensor)
                assert torch.equal(got, want_masks.as_subclass(torch.Tensor)), f"sample {idx}"
                if len(got):
                    assert bool((got[:, :11, :] == m).all() and (got[:, :, :5] == m).all()), f"sample {idx}: the pad is not {m}"
                if b.decode == "exact":
                    assert torch.equal(images[i], want_img.as_subclass(torch.Tensor)), f"sample {idx}"
                seen += 1
        assert not list(ld.sample_errors)
    assert seen == N


def _with_mask_fill(op: Any, m: Any) -> Any:
    """op with a mask_fill the client would refuse: the server's check."""
    op.mask_fill = m
    return op


@pytest.mark.parametrize("op,what", [
    (lambda: _with_mask_fill(T.Pad(4, fill={IMG: 7, MASK: 1}), 256),
     "op 0: Pad: fill: the Mask's fill 256: want an integer 0..255"),
    (lambda: _with_mask_fill(T.Pad(4, fill={IMG: 7, MASK: 1}), -1),
     "op 0: Pad: fill: the Mask's fill -1: want an integer 0..255"),
    (lambda: T.Pad(4, fill=(1, 2, 3)), "Pad (op 0): fill [1 2 3] with masks"),
    (lambda: _with_mask_fill(T.RandomRotation(10, fill={IMG: 7, MASK: 1}), 300),
     "op 1: RandomRotation: fill: the Mask's fill 300: want an integer 0..255"),
])
def test_mask_fill_refused(server: str, op: Any, what: str) -> None:  # noqa: F811
    """A Mask fill past a byte or negative (the client refuses it: sent
    past it here), or a plain fill of several values with masks, refused
    by the server, naming it."""
    o = op()
    ops = [o, T.CenterCrop(64)] if isinstance(o, T.Pad) else [T.Resize((64, 64)), o]
    with pytest.raises(StokerError) as e:
        with stoker.Loader(server, "coco", batch_size=4, transform=T.Compose(ops),
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
    ({IMG: 1, MASK: 256}, ValueError, "integer in 0..255"),
    ({IMG: 1, MASK: -1}, ValueError, "integer in 0..255"),
])
def test_bad_fill_per_type(fill: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        T.Pad(4, fill=fill)
