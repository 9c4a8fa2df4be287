"""The detection recipes' ops against torchvision: RandomZoomOut,
RandomIoUCrop, the flip between it and its Resize, RandomPhotometricDistort
before them, on mkdata --coco's photos with their boxes. Each sample's pixels
are, byte for byte, torchvision's functional ops of its trace (pad, crop,
horizontal_flip, resize) on decode_jpeg's pixels, after the photometric
steps at its head run by stoker's kernels (``stoker ops apply``: the adjust
kernels' own parity with torchvision is test_parity_replay's, within 1 or 2
levels; permute_channels is checked exact here); test_targets.py checks the
boxes the same way. A job without targets refuses RandomIoUCrop; its crops
are drawn as torchvision's make_params draws them on the same boxes
(``stoker ops draw --boxes``), and RandomPhotometricDistort's steps as its
make_params and transform make them."""

from __future__ import annotations

import json
import subprocess
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

import numpy as np

import stoker
from opsapply import ops_apply
from stats import Checks, chi2_homogeneity, compare_values, in_band, json_lines
from stoker import transforms as T
from stoker._errors import StokerError
from stoker.v1 import stoker_pb2 as pb
from test_targets import N, det, server  # noqa: F401 (the fixtures)

TRANSFORMS = {
    "zoom-iou": [T.RandomZoomOut(fill=(10, 200, 30), p=0.7), T.RandomIoUCrop(), T.Resize((120, 100))],
    "iou-flip-bicubic": [T.RandomIoUCrop(), T.SanitizeBoundingBoxes(), T.RandomHorizontalFlip(),
                         T.Resize((90, 120), interpolation="bicubic")],
    "detr": [T.RandomPhotometricDistort(p=0.5), T.RandomZoomOut(p=0.6), T.RandomIoUCrop(),
             T.SanitizeBoundingBoxes(min_size=1), T.RandomHorizontalFlip(), T.Resize((160, 160)),
             T.SanitizeBoundingBoxes()],
    "photometric-resize": [T.RandomPhotometricDistort(p=0.7), T.Resize((100, 90), interpolation="bicubic"),
                           T.RandomPhotometricDistort(p=0.5)],
    "jitter-resize": [T.ColorJitter(0.4, 0.4, 0.4, 0.1), T.Resize((100, 90), interpolation="bicubic")],
    "ssdlite": [T.RandomIoUCrop(), T.RandomHorizontalFlip(), T.SanitizeBoundingBoxes(),
                T.Resize((80, 80), antialias=False)],
}

#: The photometric steps (RandomPhotometricDistort's), run by stoker's kernels.
PHOTOMETRIC = {"adjust_brightness", "adjust_contrast", "adjust_saturation", "adjust_hue", "permute_channels"}


def replay_pixels(img: torch.Tensor, trace: List[Any]) -> torch.Tensor:
    for name, a in trace:
        kw: Dict[str, Any] = dict(a)
        if name == "sanitize_bounding_boxes":
            continue  # the boxes' alone
        if name == "iou_crop":  # RandomIoUCrop.transform: F.crop of the image
            name = "crop"
        if "interpolation" in kw:
            kw["interpolation"] = InterpolationMode(kw["interpolation"])
        img = getattr(F, name)(img, **kw)
    return img


def split(trace: List[Any]) -> Tuple[List[Any], List[Any], List[Any]]:
    """A trace's photometric steps before the geometry, the geometry's, and
    the photometric steps after it."""
    i = 0
    while i < len(trace) and trace[i][0] in PHOTOMETRIC:
        i += 1
    j = i
    while j < len(trace) and trace[j][0] not in PHOTOMETRIC:
        j += 1
    return trace[:i], trace[i:j], trace[j:]


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_pixels_are_torchvisions(server: str, det: Path, stoker_bin: Path, name: str) -> None:  # noqa: F811
    images_dir = det / "images" / "train"
    n, ops = 0, set()
    for seed in (1, 2):
        with stoker.Loader(server, "coco", batch_size=6, transform=T.Compose(TRANSFORMS[name]), targets=True,
                           trace=True, fields=("path",), pin_memory=False, timeout=60, seed=seed) as ld:
            for b in ld:
                images = b[0]
                for i, path in enumerate(b.fields["path"]):
                    src = decode_jpeg(read_file(str(images_dir / path.decode())), mode=ImageReadMode.RGB)
                    pre, geo, post = split(b.trace[i])
                    if pre:  # on the image at its own size, before the geometry
                        src = torch.from_numpy(ops_apply(stoker_bin, [(src.numpy(), pre)])[0])
                    want = replay_pixels(src, geo)
                    if post:
                        want = torch.from_numpy(ops_apply(stoker_bin, [(want.numpy(), post)])[0])
                    assert torch.equal(images[i], want), f"{name} seed {seed} {path}: not torchvision's {b.trace[i]}"
                    ops.update(op for op, _ in b.trace[i])
                    n += 1
            assert not list(ld.sample_errors)
    assert n == 2 * N
    if name.startswith("photometric"):
        assert PHOTOMETRIC <= ops, ops
        return
    if name == "jitter-resize":  # ColorJitter before a Resize((h, w)): on the image at its own size
        assert PHOTOMETRIC - {"permute_channels"} <= ops and "resize" in ops, ops
        return
    assert {"iou_crop", "resize"} <= ops, ops
    if name not in ("iou-flip-bicubic", "ssdlite"):  # no RandomZoomOut
        assert "pad" in ops, ops
    else:
        assert "horizontal_flip" in ops, ops
    if name == "detr":
        assert PHOTOMETRIC <= ops, ops


#: The detection presets' recipes, as their sources write them with
#: torchvision's v2 classes: the DETR family's (issue 46), and the
#: detection references' ssdlite (their tv_tensor backend: ToImage first)
#: with its model's resize to 320x320 (of a tensor, not antialiased).
PRESET_RECIPES = {
    "detr": lambda: tv2.Compose([
        tv2.RandomPhotometricDistort(p=0.5), tv2.RandomZoomOut(fill=0), tv2.RandomApply([tv2.RandomIoUCrop()], p=0.8),
        tv2.SanitizeBoundingBoxes(min_size=1), tv2.RandomHorizontalFlip(), tv2.Resize((640, 640)),
        tv2.SanitizeBoundingBoxes()]),
    "ssdlite": lambda: tv2.Compose([
        tv2.ToImage(), tv2.RandomIoUCrop(), tv2.RandomHorizontalFlip(p=0.5), tv2.SanitizeBoundingBoxes(),
        tv2.Resize((320, 320), antialias=False)]),
}


@pytest.mark.parametrize("preset", sorted(PRESET_RECIPES))
def test_preset_is_the_recipe(server: str, det: Path, preset: str) -> None:  # noqa: F811
    """transform="detr" (and "ssdlite") is its recipe converted from
    torchvision's v2 classes: the same traces, pixels and targets, seed for
    seed; its boxes are torchvision's replay of the traces
    (test_targets.check)."""
    from test_targets import check, coco_sources

    recipe = T.from_torchvision(PRESET_RECIPES[preset]())
    side = {"detr": 640, "ssdlite": 320}[preset]
    want = coco_sources(det)
    kw = dict(batch_size=4, seed=11, targets=True, trace=True, return_indices=True, pin_memory=False, timeout=120,
              shuffle=False)
    seen = 0
    with stoker.Loader(server, "coco", transform=preset, **kw) as a, \
            stoker.Loader(server, "coco", transform=recipe, **kw) as b:
        for x, y in zip(a, b):
            assert x.trace == y.trace
            assert torch.equal(x[0], y[0]) and x[0].shape[1:] == (3, side, side)
            for i, (t, u, idx) in enumerate(zip(x[1], y[1], x[2].tolist())):
                assert torch.equal(t["boxes"], u["boxes"]) and torch.equal(t["labels"], u["labels"])
                check(t, want[idx], x.trace[i], x[0][i], f"{preset} sample {idx}")
                seen += 1
    assert seen == N


def test_permute_channels_is_torchvisions(stoker_bin: Path) -> None:
    """stoker's permute_channels kernel is torchvision's, byte for byte,
    for every permutation."""
    img = torch.randint(0, 256, (3, 7, 5), dtype=torch.uint8, generator=torch.Generator().manual_seed(3))
    perms = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]]
    got = ops_apply(stoker_bin, [(img.numpy(), [("permute_channels", {"permutation": p})]) for p in perms])
    for p, g in zip(perms, got):
        assert np.array_equal(g, F.permute_channels(img, p).numpy()), p


def photometric_sequence(steps: List[Any]) -> Tuple[str, ...]:
    return tuple(s for s, _ in steps)


def test_photometric_draws_are_torchvisions(stoker_bin: Path) -> None:
    """RandomPhotometricDistort's steps (which are drawn, in which order,
    the permutation) and factors, against its make_params and transform's
    order on the same draws."""
    kw = dict(brightness=(0.8, 1.2), contrast=(0.6, 1.4), saturation=(0.5, 1.5), hue=(-0.1, 0.1), p=0.6)
    t = tv2.RandomPhotometricDistort(**kw)
    spec = [T.Resize((8, 8)).to_proto(), T.RandomPhotometricDistort(**kw).to_proto()]
    img = torch.zeros(3, 8, 8, dtype=torch.uint8)
    draws = 20000
    keys = ("brightness_factor", "contrast_factor", "saturation_factor", "hue_factor")
    names = ("adjust_brightness", "adjust_contrast", "adjust_saturation", "adjust_hue")

    def theirs_steps(p: Dict[str, Any]) -> List[Tuple[str, Any]]:
        out: List[Tuple[str, Any]] = []
        f = {n: p[k] for n, k in zip(names, keys)}
        order = ["adjust_brightness"] + (["adjust_contrast"] if p["contrast_before"] else []) + \
            ["adjust_saturation", "adjust_hue"] + ([] if p["contrast_before"] else ["adjust_contrast"])
        out = [(n, f[n]) for n in order if f[n] is not None]
        if p["channel_permutation"] is not None:
            out.append(("permute_channels", tuple(p["channel_permutation"].tolist())))
        return out

    def run(k: int) -> Checks:
        js = json_format.MessageToJson(pb.TransformSpec(ops=spec), indent=None)
        r = subprocess.run([str(stoker_bin), "ops", "draw", "--spec", js, "--n", str(draws), "--seed", str(k),
                            "--source", "64x48"], capture_output=True, text=True, timeout=600,
                           stdin=subprocess.DEVNULL, check=True)
        mine = []
        for trace in json_lines(r.stdout):
            steps = [(s, a) for s, a in trace if s in PHOTOMETRIC]
            mine.append([(s, tuple(a["permutation"]) if s == "permute_channels" else next(iter(a.values())))
                         for s, a in steps])
        torch.manual_seed(200 + k)
        theirs = [theirs_steps(t.make_params([img])) for _ in range(draws)]
        c = Checks()
        seq = lambda xs: [" ".join(s for s, _ in x if s != "permute_channels") for x in xs]  # noqa: E731
        stat, pv, df = chi2_homogeneity(seq(mine), seq(theirs))
        c.p("the steps drawn, in order", pv, f"(chi2 {stat:.1f}, df {df})")
        perm = lambda xs: [str(next((a for s, a in x if s == "permute_channels"), None)) for x in xs]  # noqa: E731
        stat, pv, df = chi2_homogeneity(perm(mine), perm(theirs))
        c.p("the permutation", pv, f"(chi2 {stat:.1f}, df {df})")
        for n in names:
            compare_values(c, n, [a for x in mine for s, a in x if s == n], [a for x in theirs for s, a in x if s == n])
        return c

    in_band(run)


@pytest.mark.parametrize("ops,what", [([T.RandomIoUCrop(), T.Resize((32, 32))], "RandomIoUCrop (op 0)"),
                                      ([T.Resize((32, 32)), T.ConvertBoundingBoxFormat("CXCYWH")],
                                       "ConvertBoundingBoxFormat (op 1)")])
def test_needs_targets(server: str, ops: List[Any], what: str) -> None:  # noqa: F811
    with stoker.Loader(server, "coco", batch_size=4, transform=T.Compose(ops), pin_memory=False, timeout=60) as ld:
        with pytest.raises(StokerError) as e:
            next(iter(ld))
    assert e.value.code == "INVALID_ARGUMENT" and f"{what} acts on targets" in str(e.value), e.value


def test_convert_after_a_flip_is_refused(server: str) -> None:  # noqa: F811
    with stoker.Loader(server, "coco", batch_size=4, targets=True, pin_memory=False, timeout=60,
                       transform=T.Compose([T.Resize((32, 32)), T.ConvertBoundingBoxFormat("XYWH"),
                                            T.RandomVerticalFlip()])) as ld:
        with pytest.raises(StokerError) as e:
            next(iter(ld))
    assert e.value.code == "INVALID_ARGUMENT" and "after ConvertBoundingBoxFormat (op 1)" in str(e.value), e.value


@pytest.mark.parametrize("ops,want", [
    # ([T.RandomIoUCrop()] alone is taken: each crop its own size under the
    # job's bound, test_ssdref.py)
    ([T.RandomIoUCrop(), T.Resize(32)], "RandomIoUCrop needs Resize((h, w)) after it"),
    ([T.RandomIoUCrop(), T.RandomVerticalFlip(), T.Resize((32, 32))], "RandomIoUCrop needs Resize((h, w)) after it"),
    ([T.Resize((32, 32)), T.RandomIoUCrop()], "a geometry op after other ops"),
])
def test_iou_crop_places(ops: List[Any], want: str) -> None:
    """from_torchvision's check of the geometry refuses a RandomIoUCrop
    followed by a geometry op other than its Resize((h, w)), or after other
    ops (the server does too)."""
    from torchvision.transforms import v2

    conv = {T.RandomIoUCrop: lambda o: v2.RandomIoUCrop(), T.Resize: lambda o: v2.Resize(o.size),
            T.RandomVerticalFlip: lambda o: v2.RandomVerticalFlip()}
    with pytest.raises(ValueError, match=want.replace("(", r"\(").replace(")", r"\)")):
        T.from_torchvision(v2.Compose([conv[type(o)](o) for o in ops]))


# The boxes of one 500x375 photo (XYXY): a large one, a small one near a
# corner, two overlapping.
BOXES = [[40.0, 30.0, 420.0, 330.0], [450.5, 10.25, 490.0, 60.0], [100.0, 100.0, 220.0, 180.0],
         [150.0, 120.0, 260.0, 250.0]]
DRAWS = 6000


def stoker_iou_draws(stoker_bin: Path, spec: pb.Op, seed: int) -> List[Tuple[int, ...]]:
    js = json_format.MessageToJson(pb.TransformSpec(ops=[spec, T.Resize((32, 32)).to_proto()]),
                                   indent=None)
    r = subprocess.run([str(stoker_bin), "ops", "draw", "--spec", js, "--n", str(DRAWS), "--seed", str(seed),
                        "--source", "500x375", "--boxes", json.dumps(BOXES)], capture_output=True, text=True,
                       timeout=600, stdin=subprocess.DEVNULL, check=True)
    out = []
    for trace in json_lines(r.stdout):
        crop = [a for s, a in trace if s == "iou_crop"]
        out.append(tuple(crop[0][k] for k in ("top", "left", "height", "width")) if crop else ())
    assert len(out) == DRAWS
    return out


@pytest.mark.parametrize("kw", [{}, {"sampler_options": [0.5, 0.7], "trials": 5, "min_aspect_ratio": 0.8}])
def test_iou_crop_draws_are_torchvisions(stoker_bin: Path, kw: Dict[str, Any]) -> None:
    """Whether a crop is drawn, and its top, left, height and width, against
    RandomIoUCrop.make_params on the same image size and boxes."""
    ours = T.RandomIoUCrop(**kw)
    spec = ours.to_proto()
    t = tv2.RandomIoUCrop(**kw)
    img = torch.zeros(3, 375, 500, dtype=torch.uint8)
    boxes = tv_tensors.BoundingBoxes(torch.tensor(BOXES), format="XYXY", canvas_size=(375, 500))

    def run(k: int) -> Checks:
        mine = stoker_iou_draws(stoker_bin, spec, seed=k)
        torch.manual_seed(100 + k)
        theirs = []
        for _ in range(DRAWS):
            p = t.make_params([img, boxes])
            theirs.append(tuple(p[x] for x in ("top", "left", "height", "width")) if p else ())
        c = Checks()
        drawn, t_drawn = [bool(m) for m in mine], [bool(x) for x in theirs]
        if not all(drawn) or not all(t_drawn):  # no option >= 1: always drawn
            stat, pv, df = chi2_homogeneity(drawn, t_drawn)
            c.p("iou_crop: drawn or not", pv, f"(chi2 {stat:.1f}, df {df})")
        for j, key in enumerate(("top", "left", "height", "width")):
            compare_values(c, f"iou_crop: {key}", [m[j] for m in mine if m], [x[j] for x in theirs if x])
        return c

    in_band(run)
