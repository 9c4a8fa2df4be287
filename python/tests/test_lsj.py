"""Large-scale jitter against torchvision: ScaleJitter and FixedSizeCrop on
mkdata --coco's photos with their boxes, through a real ``stoker serve`` and
the client. Each sample's pixels are, byte for byte, torchvision's
functional ops of its trace (resize, then FixedSizeCrop's crop and pad,
horizontal_flip) on decode_jpeg's pixels, and its boxes, labels and crowd
flags are torchvision's on the CocoDetection wrapper's BoundingBoxes (the
same float32 bits). The draws (the resized size, the crop's place) are
compared with ScaleJitter.make_params and FixedSizeCrop's; the preset
"lsj" is the torchvision recipe, converted by from_torchvision.

FixedSizeCrop is not in torchvision.transforms.v2 (0.29): the detection
references' (references/detection/transforms.py) and the prototype
transforms' have it, with one draw: r = torch.rand(1), top int((H - h) *
r), left int((W - w) * r) where the image is larger; a crop when the image
is larger on a side, the boxes it leaves without width or height dropped
with their labels; then pad (0, 0, right, bottom) with the fill.
fixed_size_crop below is that, with torchvision.transforms.v2.functional's
crop, clamp and pad."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
import torch
from google.protobuf import json_format
from torchvision import tv_tensors
from torchvision.io import ImageReadMode, decode_jpeg, read_file
from torchvision.transforms import v2 as tv2
from torchvision.transforms.v2 import InterpolationMode
from torchvision.transforms.v2 import functional as F

import stoker
from stats import Checks, compare_values, in_band, ops_draw
from stoker import transforms as T
from stoker.v1 import stoker_pb2 as pb
from test_targets import N, coco_sources, det, replay, server  # noqa: F401 (the fixtures)
from test_targets_kpts import coco_points

MEAN = (123, 117, 104)  # the references' fill, their mean as pixels

TRANSFORMS = {
    # mkdata's photos are 320 to 480 a side: both cropped and padded.
    "lsj-small": [T.ScaleJitter((200, 200)), T.FixedSizeCrop(160, fill=MEAN), T.RandomHorizontalFlip(),
                  T.SanitizeBoundingBoxes()],
    # A target that is not square: torchvision pairs target_size[1] with
    # the height. Bicubic, not antialiased.
    "lsj-wide-bicubic": [T.ScaleJitter((240, 150), scale_range=(0.5, 1.5), interpolation="bicubic", antialias=False),
                         T.FixedSizeCrop((130, 170), fill=9)],
    "fixed-alone": [T.FixedSizeCrop((400, 380), fill=(10, 200, 30)), T.RandomVerticalFlip()],
}


def fixed_size_crop(img: Any, top: int, left: int, height: int, width: int, size: List[int],
                    fill: List[float]) -> Tuple[Any, torch.Tensor]:
    """FixedSizeCrop on an image or a BoundingBoxes with its drawn (top,
    left) and its (height, width) = min(canvas, size); returns it and which
    boxes it keeps."""
    h, w = F.get_size(img)
    keep = torch.ones(img.shape[0] if isinstance(img, tv_tensors.BoundingBoxes) else 0, dtype=torch.bool)
    if (height, width) != (h, w):
        img = F.crop(img, top=top, left=left, height=height, width=width)
        if isinstance(img, tv_tensors.BoundingBoxes):
            xywh = F.convert_bounding_box_format(img.as_subclass(torch.Tensor), img.format,
                                                 tv_tensors.BoundingBoxFormat.XYWH)
            keep = (xywh[..., 2:] > 0).all(dim=-1)
            img = F.clamp_bounding_boxes(tv_tensors.wrap(img.as_subclass(torch.Tensor)[keep], like=img))
    pad = [0, 0, size[1] - width, size[0] - height]
    if pad != [0, 0, 0, 0]:
        img = F.pad(img, pad, fill=[float(v) for v in fill] if not isinstance(img, tv_tensors.BoundingBoxes) else None)
    return img, keep


def replay_points(points: tv_tensors.KeyPoints, boxes: tv_tensors.BoundingBoxes,
                  trace: List[Any]) -> tv_tensors.KeyPoints:
    """The trace on keypoints: resize and the flips as torchvision's
    keypoint kernels; FixedSizeCrop's crop (crop_keypoints) and pad, and
    the instances whose boxes it or a SanitizeBoundingBoxes drops (the
    boxes' replay, step by step) dropped with them."""
    for step in trace:
        name, kw = step[0], dict(step[1])
        boxes, k = (fixed_size_crop(boxes, **kw) if name == "fixed_size_crop" else replay(boxes, [step]))
        if name == "fixed_size_crop":
            h, w = F.get_size(points)
            if (kw["height"], kw["width"]) != (h, w):
                points = F.crop(points, top=kw["top"], left=kw["left"], height=kw["height"], width=kw["width"])
            points = F.pad(points, [0, 0, kw["size"][1] - kw["width"], kw["size"][0] - kw["height"]])
        elif name in ("resize", "horizontal_flip", "vertical_flip"):
            kw.pop("interpolation", None)
            kw.pop("antialias", None)
            points = getattr(F, name)(points, **kw)
        points = tv_tensors.wrap(points[k], like=points)
    return points


def replay_pixels(img: torch.Tensor, trace: List[Any]) -> torch.Tensor:
    for name, a in trace:
        kw: Dict[str, Any] = dict(a)
        if name == "sanitize_bounding_boxes":
            continue
        if name == "fixed_size_crop":
            img, _ = fixed_size_crop(img, **kw)
            continue
        if "interpolation" in kw:
            kw["interpolation"] = InterpolationMode(kw["interpolation"])
        img = getattr(F, name)(img, **kw)
    return img


def replay_boxes(boxes: tv_tensors.BoundingBoxes, trace: List[Any]) -> Tuple[tv_tensors.BoundingBoxes, torch.Tensor]:
    """The trace on boxes (test_targets.replay, and fixed_size_crop), and
    which of the source's instances are left."""
    keep = torch.ones(boxes.shape[0], dtype=torch.bool)
    for step in trace:
        if step[0] == "fixed_size_crop":
            boxes, k = fixed_size_crop(boxes, **step[1])
        else:
            boxes, k = replay(boxes, [step])
        left = keep.nonzero().flatten()
        keep[left[~k]] = False
    return boxes, keep


def check_sample(image: torch.Tensor, got: Dict[str, Any], src: torch.Tensor, want: Dict[str, Any], trace: List[Any],
                 where: str, points: Any = None) -> None:
    pixels = replay_pixels(src, trace)
    assert torch.equal(image, pixels), f"{where}: not torchvision's {trace}"
    moved, keep = replay_boxes(want["boxes"], trace)
    assert tuple(moved.canvas_size) == tuple(image.shape[-2:]) == tuple(got["boxes"].canvas_size), where
    g, m = got["boxes"].as_subclass(torch.Tensor), moved.as_subclass(torch.Tensor)
    assert g.dtype == m.dtype == torch.float32 and torch.equal(g, m), f"{where}: {trace}\n{g}\n{m}"
    assert torch.equal(got["labels"], want["labels"][keep]), where
    assert torch.equal(got["iscrowd"], want["iscrowd"][keep]), where
    if points is not None:  # mkdata --coco's stars' tips: the same float32 bits, the instances kept
        kp, vis = points
        mp = replay_points(kp, want["boxes"], trace)
        gp = got["keypoints"]
        assert tuple(gp.canvas_size) == tuple(mp.canvas_size) == tuple(image.shape[-2:]), where
        assert torch.equal(gp.as_subclass(torch.Tensor), mp.as_subclass(torch.Tensor)), f"{where}: {trace}"
        assert torch.equal(got["keypoints_visibility"], vis[keep]), where


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_lsj_is_torchvisions(server: str, det: Path, name: str) -> None:  # noqa: F811
    """Pixels (atol 0) and boxes (float32 bits) of every sample, two seeds."""
    images_dir = det / "images" / "train"
    sources = coco_sources(det)
    points = coco_points(det)
    n, cropped, padded, dropped = 0, 0, 0, 0
    for seed in (1, 2):
        with stoker.Loader(server, "coco", batch_size=6, transform=T.Compose(TRANSFORMS[name]), targets=True,
                           trace=True, return_indices=True, fields=("path",), pin_memory=False, timeout=60,
                           seed=seed) as ld:
            for b in ld:
                images, targets, indices = b
                for i, (path, idx) in enumerate(zip(b.fields["path"], indices.tolist())):
                    src = decode_jpeg(read_file(str(images_dir / path.decode())), mode=ImageReadMode.RGB)
                    check_sample(images[i], targets[i], src, sources[idx], b.trace[i], f"{name} seed {seed} {path}",
                                 points[idx])
                    steps = dict((s, a) for s, a in b.trace[i])
                    h, w = steps["resize"]["size"] if "resize" in steps else src.shape[-2:]
                    size = steps["fixed_size_crop"]["size"]
                    cropped += h > size[0] or w > size[1]
                    padded += h < size[0] or w < size[1]
                    dropped += len(targets[i]["labels"]) < len(sources[idx]["labels"])
                    n += 1
            assert not list(ld.sample_errors)
    assert n == 2 * N
    assert cropped > 0 and padded > 0, (cropped, padded)
    if name != "fixed-alone":
        assert dropped > 0, "no sample lost a box to the crop"


DRAWS = 20000


def stoker_draws(stoker_bin: Path, ops: List[pb.Op], seed: int, source: Tuple[int, int]) -> List[Dict[str, Any]]:
    js = json_format.MessageToJson(pb.TransformSpec(ops=ops), indent=None)
    out = []
    for steps in ops_draw(stoker_bin, js, DRAWS, seed, source):
        out.append({"size": tuple(steps["resize"]["size"]) if "resize" in steps else None,
                    "top": steps["fixed_size_crop"]["top"], "left": steps["fixed_size_crop"]["left"]})
    assert len(out) == DRAWS
    return out


def their_fixed_offset(h: int, w: int, size: Tuple[int, int]) -> Tuple[int, int]:
    """FixedSizeCrop's draw (the references' forward, the prototype's
    make_params): one torch.rand(1) for both."""
    r = torch.rand(1)
    return int(max(h - size[0], 0) * r), int(max(w - size[1], 0) * r)


@pytest.mark.parametrize("source,target,scale", [((500, 375), (200, 200), (0.1, 2.0)),
                                                 ((375, 500), (240, 150), (0.5, 1.5))])
def test_draws_are_torchvisions(stoker_bin: Path, source: Tuple[int, int], target: Tuple[int, int],
                                scale: Tuple[float, float]) -> None:
    """ScaleJitter's size (make_params' int(side * r)) and FixedSizeCrop's
    top and left on it, against torchvision's draws on the same image size
    (KS, or chi-square for the integers, DRAWS draws a seed)."""
    crop = (160, 150)
    ops = [T.ScaleJitter(target, scale_range=scale).to_proto(), T.FixedSizeCrop(crop).to_proto()]
    sj = tv2.ScaleJitter(target, scale_range=scale)
    img = torch.zeros(3, source[1], source[0], dtype=torch.uint8)

    def run(k: int) -> Checks:
        mine = stoker_draws(stoker_bin, ops, k, source)
        torch.manual_seed(300 + k)
        theirs = []
        for _ in range(DRAWS):
            h, w = sj.make_params([img])["size"]
            top, left = their_fixed_offset(h, w, crop)
            theirs.append({"size": (h, w), "top": top, "left": left})
        c = Checks()
        for j, key in enumerate(("height", "width")):
            compare_values(c, f"ScaleJitter: {key}", [m["size"][j] for m in mine], [x["size"][j] for x in theirs])
        for key in ("top", "left"):
            compare_values(c, f"FixedSizeCrop: {key}", [m[key] for m in mine], [x[key] for x in theirs])
        return c

    in_band(run)


def test_fixed_size_crop_alone_draws(stoker_bin: Path) -> None:
    """FixedSizeCrop alone on an image larger on both sides: its (top, left)
    against the references' draw (one r for both, so left follows top)."""
    crop = (100, 300)
    ops = [T.FixedSizeCrop(crop).to_proto()]

    def run(k: int) -> Checks:
        mine = stoker_draws(stoker_bin, ops, k, (500, 375))
        torch.manual_seed(400 + k)
        theirs = [dict(zip(("top", "left"), their_fixed_offset(375, 500, crop))) for _ in range(DRAWS)]
        c = Checks()
        for key in ("top", "left"):
            compare_values(c, f"FixedSizeCrop: {key}", [m[key] for m in mine], [x[key] for x in theirs])
        # One r: the pair's joint distribution (left from top).
        compare_values(c, "FixedSizeCrop: left - top * 200 / 275", [round(m["left"] - m["top"] * 200 / 275) for m in mine],
                       [round(x["left"] - x["top"] * 200 / 275) for x in theirs])
        return c

    in_band(run)


class FixedSizeCrop(torch.nn.Module):
    """The detection references' FixedSizeCrop as from_torchvision sees it
    (its module is theirs, ``transforms``; its attributes theirs): the
    recipe's crop, run here by fixed_size_crop."""

    def __init__(self, size: Tuple[int, int], fill: Any = 0, padding_mode: str = "constant") -> None:
        super().__init__()
        self.crop_height, self.crop_width = size
        self.fill, self.padding_mode = fill, padding_mode


FixedSizeCrop.__module__ = "transforms"


def test_lsj_preset_is_the_recipe(server: str, det: Path) -> None:  # noqa: F811
    """transform="lsj" is torchvision's detection references' recipe
    (ScaleJitter((1024, 1024), antialias=True), FixedSizeCrop((1024, 1024),
    fill=mean (123, 117, 104)), RandomHorizontalFlip(0.5), then v2's
    SanitizeBoundingBoxes) converted by from_torchvision: the same traces,
    pixels and targets, seed for seed; on a few samples, 1024x1024 uint8,
    the pixels and boxes are torchvision's replay of the trace."""
    recipe = T.from_torchvision(tv2.Compose([
        tv2.ScaleJitter(target_size=(1024, 1024), antialias=True),
        FixedSizeCrop(size=(1024, 1024), fill=(123.0, 117.0, 104.0)),
        tv2.RandomHorizontalFlip(p=0.5), tv2.SanitizeBoundingBoxes()]))
    assert recipe.transforms == [T.ScaleJitter((1024, 1024)), T.FixedSizeCrop(1024, fill=MEAN),
                                 T.RandomHorizontalFlip(0.5), T.SanitizeBoundingBoxes()]
    images_dir = det / "images" / "train"
    sources = coco_sources(det)
    kw = dict(batch_size=4, seed=5, targets=True, trace=True, return_indices=True, pin_memory=False, timeout=120,
              shuffle=False, fields=("path",))
    seen, kinds = 0, set()
    with stoker.Loader(server, "coco", transform="lsj", **kw) as a, \
            stoker.Loader(server, "coco", transform=recipe, **kw) as b:
        for x, y in zip(a, b):
            assert x.trace == y.trace
            assert x[0].dtype == torch.uint8 and x[0].shape[1:] == (3, 1024, 1024) and torch.equal(x[0], y[0])
            for i, (t, u, idx) in enumerate(zip(x[1], y[1], x[2].tolist())):
                assert torch.equal(t["boxes"], u["boxes"]) and torch.equal(t["labels"], u["labels"])
                steps = dict((s, a) for s, a in x.trace[i])
                kinds.add("cropped" if max(steps["resize"]["size"]) > 1024 else "padded")
                if seen < 6:
                    src = decode_jpeg(read_file(str(images_dir / x.fields["path"][i].decode())), mode=ImageReadMode.RGB)
                    check_sample(x[0][i], t, src, sources[idx], x.trace[i], f"lsj sample {idx}")
                seen += 1
    assert seen == N and kinds == {"cropped", "padded"}, kinds
