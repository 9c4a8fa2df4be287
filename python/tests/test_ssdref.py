"""torchvision's detection references' recipes that do not resize (their
model resizes), as they stand: DetectionPresetTrain("hflip"), ("ssdlite")
and ("ssd") (references/detection/presets.py, the v2 tv_tensor backend),
converted by from_torchvision and served under the job's bound on the
sizes (Loader(max_size=(h, w))), through a real ``stoker serve``, by gRPC
and by shared memory. Each sample is its own size (the image's, its
RandomZoomOut canvas' crop, its RandomIoUCrop's crop): its window of the
padded batch is, byte for byte, torchvision's functional ops of its trace
(pad, crop, horizontal_flip) on decode_jpeg's pixels, after the
photometric steps at its head run by stoker's kernels as
test_detection_ops runs them; its boxes torchvision's replay (the same
float32 bits), their canvas its size; the padding zeros and the mask True
exactly there. Without a bound the recipes are refused, saying how to
give one; a sample past the bound fails by itself, naming its image's
size and the bound."""

from __future__ import annotations

import copy
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Dict, List

import pytest
import torch
from torchvision import tv_tensors
from torchvision.io import ImageReadMode, decode_jpeg, read_file
from torchvision.transforms import v2 as tv2

import stoker
from opsapply import ops_apply
from stoker import transforms as T
from stoker._errors import StokerError
from test_detection_ops import replay_pixels, split
from test_targets import N, check, coco_sources, det, server  # noqa: F401 (the fixtures)

MEAN = (123.0, 117.0, 104.0)


def _tail() -> list:
    """What DetectionPresetTrain ends with (use_v2, tv_tensor backend)."""
    return [tv2.ToDtype(torch.float, scale=True), tv2.ConvertBoundingBoxFormat(tv_tensors.BoundingBoxFormat.XYXY),
            tv2.SanitizeBoundingBoxes(), tv2.ToPureTensor()]


#: DetectionPresetTrain(data_augmentation=..., use_v2=True, backend="tv_tensor").transforms, as presets.py builds it.
RECIPES: Dict[str, Callable[[], Any]] = {
    "hflip": lambda: tv2.Compose([tv2.ToImage(), tv2.RandomHorizontalFlip(p=0.5), *_tail()]),
    "ssdlite": lambda: tv2.Compose([tv2.ToImage(), tv2.RandomIoUCrop(), tv2.RandomHorizontalFlip(p=0.5), *_tail()]),
    "ssd": lambda: tv2.Compose([
        tv2.ToImage(), tv2.RandomPhotometricDistort(),
        tv2.RandomZoomOut(fill=defaultdict(lambda: MEAN, {tv_tensors.Mask: 0})), tv2.RandomIoUCrop(),
        tv2.RandomHorizontalFlip(p=0.5), *_tail()]),
    # The references' v1 transforms (use_v2=False) give the fill as
    # list(mean); v2 with it pads with the mean. With the defaultdict above,
    # torchvision v2 pads the Image with 0: its _get_fill asks
    # `type in fill`, which a defaultdict's default does not answer.
    "ssd-mean-fill": lambda: tv2.Compose([
        tv2.ToImage(), tv2.RandomPhotometricDistort(), tv2.RandomZoomOut(fill=list(MEAN)), tv2.RandomIoUCrop(),
        tv2.RandomHorizontalFlip(p=0.5), *_tail()]),
}

#: mkdata's photos are 320 to 480 a side; RandomZoomOut's side_range is (1, 4).
BOUND = {"hflip": (480, 480), "ssdlite": (480, 480), "ssd": (1920, 1920), "ssd-mean-fill": (1920, 1920)}


def tv_zoom_fill(recipe: Any) -> List[int]:
    """The fill torchvision's RandomZoomOut of recipe pads an image with
    (its p set to 1, on a 1x1 image: the canvas' corner)."""
    zoom = copy.deepcopy(next(t for t in recipe.transforms if isinstance(t, tv2.RandomZoomOut)))
    zoom.p = 1.0
    torch.manual_seed(0)
    out = zoom(tv_tensors.Image(torch.full((3, 1, 1), 7, dtype=torch.uint8)))
    corner = out[:, 0, 0] if out[0, 0, 0] != 7 else out[:, -1, -1]
    return corner.tolist()


@pytest.mark.parametrize("transport", ["grpc", "shm"])
@pytest.mark.parametrize("name", sorted(RECIPES))
def test_recipe_is_torchvisions(server: str, det: Path, stoker_bin: Path, name: str, transport: str) -> None:  # noqa: F811
    """Every sample's window (atol 0), boxes (float32 bits), padding and
    mask; two seeds."""
    images_dir = det / "images" / "train"
    sources = coco_sources(det)
    recipe = RECIPES[name]()
    tf = T.from_torchvision(recipe)
    fill = tv_zoom_fill(recipe) if name.startswith("ssd-") or name == "ssd" else None
    n, ops, sizes = 0, set(), set()
    for seed in (1, 2):
        with stoker.Loader(server, "coco", batch_size=4, transform=tf, max_size=BOUND[name], targets=True, trace=True,
                           return_indices=True, fields=("path",), pin_memory=False, timeout=120, seed=seed,
                           transport=transport) as ld:
            for b in ld:
                images, targets, indices = b
                assert b.sizes is not None and b.sizes.shape == (len(indices), 2)
                bh, bw = int(b.sizes[:, 0].max()), int(b.sizes[:, 1].max())
                assert tuple(images.shape) == (len(indices), 3, bh, bw)
                for i, (path, idx) in enumerate(zip(b.fields["path"], indices.tolist())):
                    h, w = b.sizes[i].tolist()
                    where = f"{name} {transport} seed {seed} {path}"
                    assert h <= BOUND[name][0] and w <= BOUND[name][1], where
                    src = decode_jpeg(read_file(str(images_dir / path.decode())), mode=ImageReadMode.RGB)
                    pre, geo, post = split(b.trace[i])
                    assert not post, where
                    if pre:  # RandomPhotometricDistort, on the image at its own size
                        src = torch.from_numpy(ops_apply(stoker_bin, [(src.numpy(), pre)])[0])
                    want = replay_pixels(src, [s for s in geo if s[0] != "convert_bounding_box_format"])  # the boxes' alone
                    assert tuple(want.shape[-2:]) == (h, w), f"{where}: {want.shape} {b.trace[i]}"
                    assert torch.equal(images[i, :, :h, :w], want), f"{where}: not torchvision's {b.trace[i]}"
                    check(targets[i], sources[idx], b.trace[i], images[i, :, :h, :w], where)
                    pad = torch.ones(bh, bw, dtype=torch.bool)
                    pad[:h, :w] = False
                    assert torch.equal(b.mask[i], pad), where
                    assert not images[i][:, pad].any(), f"{where}: padding not zero"
                    for step, a in b.trace[i]:
                        if step == "pad":  # RandomZoomOut's: torchvision's fill for this recipe
                            assert [int(v) for v in a["fill"]] == fill, (where, a, fill)
                    ops.update(s for s, _ in b.trace[i])
                    sizes.add((h, w))
                    n += 1
            assert not list(ld.sample_errors)
    assert n == 2 * N
    assert len(sizes) > 3, sizes
    assert "horizontal_flip" in ops, ops
    if name != "hflip":
        assert "iou_crop" in ops, ops
    if name.startswith("ssd-") or name == "ssd":
        assert {"pad", "adjust_brightness"} <= ops, ops


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_refused_without_a_bound(server: str, name: str) -> None:  # noqa: F811
    """As they stand, without max_size, on a dataset that does not list its
    images' sizes (a directory of images): refused at open, the message
    naming max_size."""
    with stoker.Loader(server, "plain", batch_size=4, transform=T.from_torchvision(RECIPES[name]()),
                       pin_memory=False, timeout=60) as ld:
        with pytest.raises(StokerError) as e:
            next(iter(ld))
    assert "max_size" in str(e.value), e.value


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_bound_from_the_annotations(server: str, det: Path, name: str) -> None:  # noqa: F811
    """Without max_size on a COCO dataset, the bound is its annotations'
    largest image (each side), times RandomZoomOut's side_range maximum
    (4) plus a pixel for ssd: JobInfo's sample_shape; every sample within
    it, the same bytes and sizes as under the same max_size given."""
    import json

    images = json.loads((det / "annotations" / "instances.json").read_text())["images"]
    w, h = max(im["width"] for im in images), max(im["height"] for im in images)
    bound = (4 * h + 1, 4 * w + 1) if name.startswith("ssd-") or name == "ssd" else (h, w)
    got = []
    for max_size in (None, bound):
        with stoker.Loader(server, "coco", batch_size=4, transform=T.from_torchvision(RECIPES[name]()), targets=True,
                           max_size=max_size, trace=True, pin_memory=False, timeout=120, seed=4) as ld:
            out = [(b.trace, b.sizes.clone(), b.images.clone()) for b in ld]
            assert tuple(ld.job_info.sample_shape) == (3, *bound), ld.job_info.sample_shape
            assert not list(ld.sample_errors)
        got.append(out)
    assert len(got[0]) == len(got[1]) > 0
    for a, c in zip(*got):
        assert a[0] == c[0] and torch.equal(a[1], c[1]) and torch.equal(a[2], c[2])


@pytest.mark.expect_warning(RuntimeWarning, match="could not be made")
def test_past_the_bound_fails_by_itself(server: str, det: Path) -> None:  # noqa: F811
    """hflip under a bound some photos pass: those samples fail (each
    naming its image's size and the bound), the others come."""
    with stoker.Loader(server, "coco", batch_size=N, transform=T.from_torchvision(RECIPES["hflip"]()),
                       max_size=(400, 480), targets=True, pin_memory=False, timeout=60, seed=1, fail_policy="drop",
                       max_sample_errors=1.0, return_indices=True) as ld:
        got = sum(len(b.indices) for b in ld)
        errors = list(ld.sample_errors)
    assert errors and got + len(errors) == N, (got, errors)
    for e in errors:
        reason = str(e)
        assert "image too large" in reason and "past the job's bound of 480x400 (max_size=(400, 480)" in reason, reason


def test_max_size_checked() -> None:
    """Loader(max_size=...) takes a pair of ints."""
    for bad in (480, (480,), (480, 0), "480x480", (480.0, 480)):
        with pytest.raises((TypeError, ValueError)):
            stoker.Loader("127.0.0.1:1", "coco", transform=[T.RandomHorizontalFlip()], max_size=bad)


@pytest.mark.parametrize("name", ["hflip", "ssdlite", "ssd"])
def test_masks_are_torchvisions(server: str, det: Path, name: str) -> None:  # noqa: F811
    """The instances' masks through the recipes as they stand: each
    sample's its own size, byte for byte torchvision's replay of its trace
    on pycocotools' masks (test_targets_masks.replay_masks), the instances
    SanitizeBoundingBoxes drops dropped with them."""
    from test_targets_masks import coco_masks, fixed_keep, replay_masks

    want, src = coco_sources(det), coco_masks(det)
    seen, instances = 0, 0
    with stoker.Loader(server, "coco", batch_size=4, transform=T.from_torchvision(RECIPES[name]()),
                       max_size=BOUND[name], targets=("boxes", "labels", "masks"), trace=True, return_indices=True,
                       pin_memory=False, timeout=120, seed=3) as ld:
        for b in ld:
            for i, (t, idx) in enumerate(zip(b.targets, b.indices.tolist())):
                h, w = b.sizes[i].tolist()
                where = f"{name} sample {idx}: {b.trace[i]}"
                m = t["masks"]
                assert tuple(m.shape) == (len(t["labels"]), h, w), (where, m.shape)
                keep = fixed_keep(want[idx]["boxes"], b.trace[i])
                moved = replay_masks(src[idx], want[idx]["boxes"], b.trace[i])[keep]
                assert torch.equal(m.as_subclass(torch.Tensor), moved.as_subclass(torch.Tensor)), where
                seen += 1
                instances += m.shape[0]
        assert not list(ld.sample_errors)
    assert seen == N and instances > 0
