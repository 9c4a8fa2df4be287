"""RandomRotation(expand=True) end to end, against torchvision.

A real `stoker serve` over mkdata --coco's set; jobs whose RandomRotation
expands the image after a geometry that fixes the size (Resize((h, w)),
RandomResizedCrop): each sample is its own size (Loader's sizes and mask),
at most the transform's bound; and jobs whose RandomRotation comes first,
on the image whole, then a Resize((h, w)) or CenterCrop fixes the size. Each sample's trace (the angle drawn) is
replayed through torchvision.transforms.v2.functional:

- the size: rotate_image's (its _compute_affine_output_size, or its fast
  paths at 0, 90, 180 and 270 degrees), exactly;
- the boxes (rotate_bounding_boxes with expand=True: the corners moved,
  shifted by the canvas corners' minimum, clamped to the canvas it
  computes) and keypoints (rotate_keypoints), within torchvision's own
  tolerance (assert_close's float32 defaults);
- the masks (rotate_mask: rotate_image's nearest, fill 0), exactly.

One difference is deliberate: torchvision gives the moved BoundingBoxes
and KeyPoints a canvas_size of their own (the same formula on the matrix
about the canvas' centre in pixels), which differs from the image's by a
pixel on a side for about half the angles and sizes; stoker's targets
carry the image's size (the pixels' and the masks'), and the ops after
the rotation move them on it. The replay does the same (it re-wraps them
with the image's size after each expanding rotation); the test counts how
often torchvision's own canvas differed.

The pixels of rotate(expand=True) are held to torchvision's by
test_parity_geometry_kernels.py (test_rotate_expand).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
import torch
from torchvision import tv_tensors
from torchvision.transforms.v2 import functional as F

import stoker
from stoker import transforms as T
from stoker._errors import StokerError
from test_targets import N, coco_sources, det, replay, server  # noqa: F401 (the fixtures)
from test_targets_kpts import coco_points
from test_targets_masks import coco_masks, replay_masks

TRANSFORMS = {
    "resize-rotate-expand": ([T.Resize((72, 97)), T.RandomRotation((-180, 180), expand=True)], (72, 97)),
    "rrc-rotate-expand-flip": ([T.RandomResizedCrop((61, 80), scale=(0.3, 1.0)),
                                T.RandomRotation(45, interpolation="bilinear", expand=True),
                                T.RandomHorizontalFlip(), T.ColorJitter(0.2)], (61, 80)),
    "shortest-rotate-expand": ([T.RandomShortestSize((40, 56), max_size=70), T.RandomRotation((-60, 60), expand=True),
                                T.RandomVerticalFlip()], (0, 0)),
    # one of two rotations: the bound is the larger one's, not both's
    "resize-choice-rotate-expand": ([T.Resize((72, 97)), T.RandomChoice([T.RandomRotation((-45, 45), expand=True),
                                                                         T.RandomRotation((0, 90), expand=True)])],
                                    (72, 97)),
    "resize-center-rotate-expand-center": ([T.Resize(90), T.CenterCrop((65, 65)),
                                            T.RandomRotation((-90, 90), expand=True, center=(10.5, 40))], (65, 65)),
}


def rotated_size(h: int, w: int, args: Dict[str, Any]) -> Tuple[int, int]:
    """rotate_image's size of an h x w image (expand=True)."""
    out = F.rotate(torch.zeros(1, h, w, dtype=torch.uint8), args["angle"], expand=True, center=args["center"])
    return tuple(out.shape[-2:])


def replay_expand(boxes: tv_tensors.BoundingBoxes, points: tv_tensors.KeyPoints, masks: Optional[torch.Tensor],
                  trace: List[Any]) -> Tuple[Any, Any, torch.Tensor, Tuple[int, int], int]:
    """The trace through torchvision, step by step: boxes (test_targets'
    replay), keypoints, masks; after an expanding rotation the boxes and
    keypoints re-wrapped with the image's size. Returns them, the image's
    size and how often torchvision's box canvas differed from it."""
    differed = 0
    size = tuple(boxes.canvas_size)
    for name, args in trace:
        step = [[name, args]]
        boxes, _ = replay(boxes, step)
        if masks is not None:
            masks = replay_masks(masks, boxes, step)
        if name in ("resized_crop", "resize", "center_crop", "horizontal_flip", "vertical_flip", "rotate"):
            kw = {k: v for k, v in args.items() if k not in ("interpolation", "antialias", "fill")}
            points = getattr(F, name)(points, **kw)
        if name == "rotate" and args["expand"]:
            size = rotated_size(size[0], size[1], args)
            differed += tuple(boxes.canvas_size) != size
            boxes = tv_tensors.wrap(boxes, like=boxes, canvas_size=size)
            points = tv_tensors.wrap(points, like=points, canvas_size=size)
        elif name in ("resized_crop", "resize", "center_crop"):
            size = tuple(boxes.canvas_size)
    return boxes, points, masks, size, differed


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_rotate_expand_is_torchvisions(server: str, det: Path, name: str) -> None:  # noqa: F811
    ops, (gh, gw) = TRANSFORMS[name]
    want, pts = coco_sources(det), coco_points(det)
    seen, grown, differed, instances = 0, 0, 0, 0
    for seed in (1, 2):
        with stoker.Loader(server, "coco", batch_size=5, transform=T.Compose(ops), targets=True, trace=True,
                           return_indices=True, pin_memory=False, timeout=60, seed=seed) as ld:
            bound = None
            for b in ld:
                images, targets, indices = b
                assert b.sizes is not None and b.mask is not None
                for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                    trace = b.trace[i]
                    where = f"{name} seed {seed} sample {idx}: {trace}"
                    h, w = b.sizes[i].tolist()
                    boxes, points, _, size, d = replay_expand(want[idx]["boxes"], pts[idx][0], None, trace)
                    assert (h, w) == size, where
                    pad = torch.ones(b.mask.shape[1:], dtype=torch.bool)  # DETR's mask: True on the padding
                    pad[:h, :w] = False
                    assert torch.equal(b.mask[i], pad), where
                    assert not images[i][:, pad].any(), f"{where}: padding not zero"
                    assert tuple(t["boxes"].canvas_size) == (h, w), where
                    torch.testing.assert_close(t["boxes"].as_subclass(torch.Tensor), boxes.as_subclass(torch.Tensor),
                                               msg=lambda s: f"{where}: boxes: {s}")
                    torch.testing.assert_close(t["keypoints"].as_subclass(torch.Tensor), points.as_subclass(torch.Tensor),
                                               msg=lambda s: f"{where}: keypoints: {s}")
                    assert tuple(t["keypoints"].canvas_size) == (h, w), where
                    seen += 1
                    grown += (h, w) != (gh, gw) and "rotate" in dict(trace) and dict(trace)["rotate"]["angle"] % 90 != 0
                    differed += d
                    instances += len(t["labels"])
            assert not list(ld.sample_errors)
    assert seen == 2 * N and instances > N and grown > N, (seen, instances, grown)
    print(f"\n{name}: {seen} samples, {grown} grown; torchvision's own box canvas differed from the image's on {differed}")


@pytest.mark.parametrize("fix", [None, T.CenterCrop((80, 80)), T.Resize((60, 66))])
def test_rotate_expand_masks_are_torchvisions(server: str, det: Path, fix: Any) -> None:  # noqa: F811
    want, src = coco_sources(det), coco_masks(det)
    ops = [T.Resize((70, 91)), T.RandomRotation((-180, 180), expand=True), T.RandomVerticalFlip()] + ([fix] if fix else [])
    seen, set_px = 0, 0
    with stoker.Loader(server, "coco", batch_size=5, transform=T.Compose(ops), targets=("boxes", "labels", "masks"),
                       trace=True, return_indices=True, pin_memory=False, timeout=60, seed=3) as ld:
        for b in ld:
            images, targets, indices = b
            for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                trace = b.trace[i]
                where = f"sample {idx}: {trace}"
                h, w = b.sizes[i].tolist() if fix is None else images.shape[-2:]
                m = t["masks"].as_subclass(torch.Tensor)
                moved = replay_masks(src[idx], want[idx]["boxes"], trace)
                assert tuple(m.shape[-2:]) == (h, w), where
                assert torch.equal(m, moved.as_subclass(torch.Tensor)), where
                seen += 1
                set_px += int(m.sum())
        assert not list(ld.sample_errors)
    assert seen == N and set_px > 0


# A Resize((h, w)) or CenterCrop after the rotation fixes the size again:
# a batch of one size, the rotation's image (the same draws: an op after
# another never shifts its stream) resized or cropped as torchvision's
# resize and center_crop do, exactly.
FIXED = {
    "rrc-rotate-expand-resize": ([T.RandomResizedCrop((61, 80), scale=(0.3, 1.0)), T.RandomRotation(45, expand=True)],
                                 T.Resize((64, 72)), lambda img: F.resize(img, [64, 72], antialias=True)),
    "resize-rotate-expand-center": ([T.Resize((72, 97)), T.RandomRotation((-180, 180), expand=True, fill=(9, 80, 200),
                                                                        interpolation="bilinear")],
                                    T.CenterCrop((90, 70)), lambda img: F.center_crop(img, [90, 70])),
    "resize-rotate-expand-resize-nearest": ([T.Resize((50, 50)), T.RandomRotation(30, expand=True)],
                                            T.Resize((40, 45), interpolation="nearest"),
                                            lambda img: F.resize(img, [40, 45], interpolation=F.InterpolationMode.NEAREST)),
}


@pytest.mark.parametrize("name", sorted(FIXED))
def test_rotate_expand_then_fixed(server: str, det: Path, name: str) -> None:  # noqa: F811
    ops, fix, ref = FIXED[name]
    want, pts = coco_sources(det), coco_points(det)
    grown: Dict[int, torch.Tensor] = {}
    with stoker.Loader(server, "coco", batch_size=5, transform=T.Compose(ops), return_indices=True, pin_memory=False,
                       timeout=60, seed=4) as ld:
        for b in ld:
            images, _, indices = b
            for i, idx in enumerate(indices.tolist()):
                h, w = b.sizes[i].tolist()
                grown[idx] = images[i, :, :h, :w].clone()
    seen, instances = 0, 0
    with stoker.Loader(server, "coco", batch_size=5, transform=T.Compose(ops + [fix]), targets=True, trace=True,
                       return_indices=True, pin_memory=False, timeout=60, seed=4) as ld:
        for b in ld:
            images, targets, indices = b
            assert b.sizes is None
            for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                trace = b.trace[i]
                where = f"{name} sample {idx}: {trace}"
                assert torch.equal(images[i], ref(grown[idx])), where
                boxes, points, _, size, _ = replay_expand(want[idx]["boxes"], pts[idx][0], None, trace)
                assert size == tuple(images.shape[-2:]) == tuple(t["boxes"].canvas_size), where
                torch.testing.assert_close(t["boxes"].as_subclass(torch.Tensor), boxes.as_subclass(torch.Tensor),
                                           msg=lambda s: f"{where}: boxes: {s}")
                torch.testing.assert_close(t["keypoints"].as_subclass(torch.Tensor), points.as_subclass(torch.Tensor),
                                           msg=lambda s: f"{where}: keypoints: {s}")
                seen += 1
                instances += len(t["labels"])
        assert not list(ld.sample_errors)
    assert seen == N and instances > N


# RandomRotation(expand=True) first, before any geometry: the image whole
# at its own size rotated, then a Resize((h, w)) or CenterCrop fixes the
# size (its room each sample's, reserved from its header).
FIRST = {
    "rotate-expand-first-resize": [T.RandomRotation(30, expand=True), T.Resize((64, 72))],
    "rotate-expand-first-flip-center": [T.RandomRotation((-180, 180), expand=True, fill=9, interpolation="bilinear"),
                                        T.RandomHorizontalFlip(), T.CenterCrop((300, 280))],
}


@pytest.mark.parametrize("name", sorted(FIRST))
def test_rotate_expand_first(server: str, det: Path, name: str) -> None:  # noqa: F811
    """Each sample's pixels (where the decode was exact) are torchvision's
    functional ops of its trace on decode_jpeg's image, byte for byte; its
    boxes and keypoints the replay's (assert_close), its masks the same
    ops on pycocotools' masks, byte for byte."""
    from test_detection_ops import replay_pixels
    from torchvision.io import ImageReadMode, decode_jpeg, read_file

    want, pts, src = coco_sources(det), coco_points(det), coco_masks(det)
    images_dir = det / "images" / "train"
    seen, exact, turned, instances = 0, 0, 0, 0
    with stoker.Loader(server, "coco", batch_size=5, transform=T.Compose(FIRST[name]),
                       targets=("boxes", "labels", "keypoints", "masks"), trace=True, return_indices=True,
                       fields=("path",), pin_memory=False, timeout=60, seed=6) as ld:
        for b in ld:
            images, targets, indices = b
            assert b.sizes is None
            for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                trace = b.trace[i]
                where = f"{name} sample {idx}: {trace}"
                assert trace[0][0] == "rotate" and trace[0][1]["expand"], where
                boxes, points, masks, size, _ = replay_expand(want[idx]["boxes"], pts[idx][0], src[idx], trace)
                assert size == tuple(images.shape[-2:]) == tuple(t["boxes"].canvas_size), where
                torch.testing.assert_close(t["boxes"].as_subclass(torch.Tensor), boxes.as_subclass(torch.Tensor),
                                           msg=lambda s: f"{where}: boxes: {s}")
                torch.testing.assert_close(t["keypoints"].as_subclass(torch.Tensor), points.as_subclass(torch.Tensor),
                                           msg=lambda s: f"{where}: keypoints: {s}")
                assert torch.equal(t["masks"].as_subclass(torch.Tensor), masks.as_subclass(torch.Tensor)), where
                if b.decode == "exact":
                    img = decode_jpeg(read_file(str(images_dir / b.fields["path"][i].decode())), mode=ImageReadMode.RGB)
                    assert torch.equal(images[i], replay_pixels(img, trace)), where
                    exact += 1
                seen += 1
                turned += trace[0][1]["angle"] % 90 != 0
                instances += len(t["labels"])
        assert not list(ld.sample_errors)
    assert seen == N and exact > 0 and turned > N // 2 and instances > N, (seen, exact, turned, instances)


@pytest.mark.parametrize("ops,what", [
    ([T.RandomRotation(30, expand=True), T.RandomHorizontalFlip()], "nothing bounds"),
    ([T.RandomRotation(30, expand=True), T.Resize((64, 64)), T.RandomRotation(10, expand=True)], "nothing bounds"),
    ([T.Resize((64, 64)), T.RandomRotation(30, expand=True), T.RandAugment()], "compiled for one size"),
    # in a container after the rotation too (it was accepted, its magnitudes fixed for the image before it)
    ([T.Resize((64, 64)), T.RandomApply([T.RandomRotation(30, expand=True), T.TrivialAugmentWide()])], "compiled for one size"),
    ([T.Resize((64, 64)), T.RandomOrder([T.TrivialAugmentWide(), T.RandomRotation(30, expand=True)])], "compiled for one size"),
    ([T.Resize((64, 64)), T.RandomRotation(30, expand=True), T.Resize(40)], "give both sides"),
    ([T.Resize((64, 64)), T.RandomApply([T.RandomRotation(30, expand=True), T.Resize((9, 9))])], "geometry op inside a container"),
])
def test_rotate_expand_refused(server: str, ops: List[Any], what: str) -> None:  # noqa: F811
    with pytest.raises(StokerError, match=what):
        with stoker.Loader(server, "coco", batch_size=2, transform=T.Compose(ops), timeout=30) as ld:
            next(iter(ld))


# GaussianBlur runs on the size it gets (it was refused, "compiled for one
# size", after each of these geometries): an image a rotation grew, the
# image whole rotated then resized, a RandomShortestSize's own size.
BLURRED = {
    "resize-rotate-expand-blur": [T.Resize((72, 97)), T.RandomRotation((-180, 180), expand=True),
                                  T.GaussianBlur(9, (0.5, 2.0))],
    "rotate-expand-first-resize-blur": [T.RandomRotation(30, expand=True), T.Resize((64, 72)),
                                        T.GaussianBlur((5, 9), (0.1, 3.0))],
    "shortest-blur": [T.RandomShortestSize((40, 56), max_size=70), T.GaussianBlur(23, (1.0, 4.0))],
}


@pytest.mark.parametrize("name", sorted(BLURRED))
def test_blur_after_per_sample_sizes(server: str, det: Path, stoker_bin: Path, name: str) -> None:  # noqa: F811
    """Each sample's pixels, where the decode was exact, are torchvision's
    geometry of its trace on decode_jpeg's image, then stoker's blur kernel
    of its trace's sigma on that image (held to torchvision's gaussian_blur
    by test_parity_kernels.py), byte for byte."""
    from opsapply import ops_apply
    from test_detection_ops import replay_pixels
    from torchvision.io import ImageReadMode, decode_jpeg, read_file

    images_dir = det / "images" / "train"
    seen, exact, sizes = 0, 0, set()
    with stoker.Loader(server, "coco", batch_size=5, transform=T.Compose(BLURRED[name]), trace=True,
                       fields=("path",), pin_memory=False, timeout=60, seed=7) as ld:
        for b in ld:
            images = b[0]
            for i, path in enumerate(b.fields["path"]):
                trace = b.trace[i]
                where = f"{name} {path}: {trace}"
                h, w = b.sizes[i].tolist() if b.sizes is not None else images.shape[-2:]
                assert trace[-1][0] == "gaussian_blur", where
                if b.decode == "exact":
                    src = decode_jpeg(read_file(str(images_dir / path.decode())), mode=ImageReadMode.RGB)
                    geo = replay_pixels(src, trace[:-1])
                    assert tuple(geo.shape[-2:]) == (h, w), where
                    want = torch.from_numpy(ops_apply(stoker_bin, [(geo.numpy(), trace[-1:])])[0])
                    assert torch.equal(images[i, :, :h, :w], want), where
                    exact += 1
                seen += 1
                sizes.add((h, w))
        assert not list(ld.sample_errors)
    fixed = name.startswith("rotate-expand-first")  # a Resize((h, w)) after the rotation
    assert seen == N and exact > N // 2 and (len(sizes) == 1 if fixed else len(sizes) > 1), (seen, exact, sizes)


def test_blur_larger_than_a_sample_fails_that_sample(server: str) -> None:  # noqa: F811
    """A kernel whose half is not smaller than a sample's side fails that
    sample, as torchvision's reflect padding raises; the others are made."""
    ops = [T.RandomShortestSize((8, 40), max_size=48), T.GaussianBlur(21)]
    with stoker.Loader(server, "coco", batch_size=4, transform=T.Compose(ops), pin_memory=False, timeout=60,
                       seed=3, max_sample_errors=1.0) as ld:
        with pytest.warns(RuntimeWarning, match="could not be made"):
            n = sum(len(b[0]) for b in ld)
        errors = list(ld.sample_errors)
    assert n == N and 0 < len(errors) < N, (n, len(errors))
    for e in errors:
        m = re.search(r"gaussian_blur: kernel_size \[21 21\] on a (\d+)x(\d+) image: torchvision refuses", e.reason)
        assert m and min(int(m[1]), int(m[2])) <= 10, e



# A policy whose magnitudes follow the image's size (RandAugment's
# translations: 150/331 of its width and height) after a rotation and a
# Resize((h, w)) or CenterCrop that fixes the size again. torchvision's
# magnitudes are of the image the policy gets; stoker's were of the image
# before the rotation, and after a rotation of the image whole the policy
# was refused.
POLICY_AFTER_FIX = {
    "resize-rotate-expand-center-randaugment": [T.Resize((120, 160)), T.RandomRotation(30, expand=True),
                                                T.CenterCrop((60, 80)), T.RandAugment(num_ops=3, magnitude=20)],
    "rotate-expand-first-resize-randaugment": [T.RandomRotation(30, expand=True), T.Resize((64, 72)),
                                               T.RandAugment(num_ops=3, magnitude=20)],
}


@pytest.mark.parametrize("name", sorted(POLICY_AFTER_FIX))
def test_policy_after_the_size_is_fixed(server: str, name: str) -> None:  # noqa: F811
    """Every translation the policy draws is torchvision's RandAugment's at
    magnitude 20 of 31 bins for the fixed size (its float32 linspace,
    truncated by int() as its affine call does)."""
    from torchvision.transforms import v2 as tv2

    space = tv2.RandAugment(num_ops=3, magnitude=20)._AUGMENTATION_SPACE
    translations, seen = 0, 0
    for seed in (8, 9):
        with stoker.Loader(server, "coco", batch_size=5, transform=T.Compose(POLICY_AFTER_FIX[name]), trace=True,
                           pin_memory=False, timeout=60, seed=seed) as ld:
            for b in ld:
                h, w = b[0].shape[-2:]
                want = {(int(space["TranslateX"][0](31, h, w)[20]), 0), (0, int(space["TranslateY"][0](31, h, w)[20]))}
                for trace in b.trace:
                    for step, a in trace:
                        if step == "affine" and a["center"] != [0.0, 0.0] and a["translate"] != [0, 0]:
                            assert tuple(abs(x) for x in a["translate"]) in want, f"{name}: {a} of a {w}x{h} image, want {want}"
                            translations += 1
                    seen += 1
            assert not list(ld.sample_errors)
    assert seen == 2 * N and translations > 2, (seen, translations)
