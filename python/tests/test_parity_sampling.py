"""Parity, part 2: what stoker's ops draw, against torchvision's own sampling.

stoker draws each sample's parameters in Go from its counter-based RNG;
torchvision draws them with torch's generator. The two cannot give the same
numbers, so the harness compares distributions: ``stoker ops draw`` prints
the traces of N samples (no decode), torchvision's transforms are run N times
with their pixel work replaced by a recorder (their own ``make_params``, or
the policies' own choice of operation and magnitude), and the two samples are
compared: a chi-square test of homogeneity on categorical outcomes (which op,
which magnitude bin, whether p fired, in which order) and Kolmogorov-Smirnov
on continuous draws (factors, angles, boxes). Each passes at 0.01 <= p <=
0.99: a fit too good to be chance fails too. Seeds are fixed on both sides,
so a run is reproducible; a comparison that falls outside the band by chance
is run again with two other pairs of seeds, both of which must pass
(stats.in_band).

timm's RandAugment is compared with a transcription of timm's sampling
(timm/data/auto_augment.py: RandAugment.__call__, AugmentOp.__call__ and the
level functions; timm itself is not a dependency), in Python's ``random``.
"""

from __future__ import annotations

import math
import random
import subprocess
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence, Tuple

import numpy as np
import pytest
import torch
from google.protobuf import json_format
from torchvision.transforms import v2 as T

from stats import Checks, chi2_goodness, chi2_homogeneity, compare_values, in_band, json_lines
from stoker import transforms as ST
from stoker.v1 import stoker_pb2 as pb

#: Draws per side. The issue's harness asks >= 10^5 for the categorical
#: tests of the policies; continuous draws converge faster.
N = 100_000
N_CONT = 20_000
SIDE = 224


def center(side: int = SIDE, width: int = 0) -> pb.Op:
    return ST.CenterCrop((side, width or side)).to_proto()


def stoker_traces(stoker_bin: Path, ops: Sequence[pb.Op], n: int, source: Tuple[int, int] = (SIDE, SIDE),
                  seed: int = 0, skip_geometry: bool = True) -> List[List[Tuple[str, Dict[str, Any]]]]:
    """The traces of samples 0..n-1 of epoch 0 (``stoker ops draw``), the
    geometry's steps left out unless asked for."""
    spec = json_format.MessageToJson(pb.TransformSpec(ops=list(ops)), indent=None)
    r = subprocess.run([str(stoker_bin), "ops", "draw", "--spec", spec, "--n", str(n), "--seed", str(seed),
                        "--source", f"{source[0]}x{source[1]}"], capture_output=True, text=True, timeout=600,
                       stdin=subprocess.DEVNULL, check=True)
    geometry = ("resized_crop", "resize", "center_crop") if skip_geometry else ()
    out = [[(name, args) for name, args in trace if name not in geometry] for trace in json_lines(r.stdout)]
    assert len(out) == n
    return out


def image(h: int = SIDE, w: int = SIDE) -> torch.Tensor:
    return torch.zeros(3, h, w, dtype=torch.uint8)


def r4(x: float) -> float:
    """Rounds a magnitude for a category, -0.0 as 0."""
    return round(float(x), 4) + 0.0


# -- torchvision's policies: which operation at which magnitude ------------

def tv_policy_record(t: Any, n: int, seed: int) -> List[Tuple[Tuple[str, float], ...]]:
    """Runs policy t n times on a 224x224 image with its pixel work replaced
    by a recorder: per call, the (transform_id, magnitude) it applied."""
    torch.manual_seed(seed)
    calls: List[Tuple[str, float]] = []

    def rec(image: Any, transform_id: str, magnitude: float, interpolation: Any, fill: Any) -> Any:
        calls.append((transform_id, float(magnitude)))
        return image

    t._apply_image_or_video_transform = rec
    img = image()
    out = []
    for _ in range(n):
        calls.clear()
        t(img)
        out.append(tuple(tv_category(i, m) for i, m in calls if i != "Identity"))
    return out


def tv_category(transform_id: str, m: float) -> Tuple[str, float]:
    """A torchvision policy operation as a category: its id and magnitude,
    with the shears and translations of magnitude 0 merged (stoker's trace
    shows them as the same affine)."""
    if transform_id in ("TranslateX", "TranslateY"):
        # torchvision truncates the float32 linspace value (15.999999 for
        # 16 at bin 15 of 31), as stoker does with the same bins
        # (test_trivial_augment_bins_are_torchs).
        m = int(m)
        if m == 0:
            return ("Translate", 0.0)
    if transform_id in ("ShearX", "ShearY") and m == 0:
        return ("Shear", 0.0)
    if transform_id == "Posterize":
        m = int(m)
    if m == 0 and transform_id in ("AutoContrast", "Equalize", "Invert"):
        return (transform_id, 0.0)
    return (transform_id, r4(m))


def stoker_category(name: str, a: Dict[str, Any]) -> Tuple[str, float]:
    """A step of a torchvision policy, mapped back to (transform_id,
    magnitude) as torchvision's _apply_image_or_video_transform makes it."""
    if name == "affine":
        sx, sy = a["shear"]
        tx, ty = a["translate"]
        if a["center"] == [0.0, 0.0]:
            if sx == 0 and sy == 0:
                return ("Shear", 0.0)
            return ("ShearX", r4(math.tan(math.radians(sx)))) if sx != 0 else ("ShearY", r4(math.tan(math.radians(sy))))
        if tx == 0 and ty == 0:
            return ("Translate", 0.0)
        return ("TranslateX", r4(tx)) if tx != 0 else ("TranslateY", r4(ty))
    simple = {"rotate": ("Rotate", "angle", 0), "adjust_brightness": ("Brightness", "brightness_factor", 1),
              "adjust_saturation": ("Color", "saturation_factor", 1), "adjust_contrast": ("Contrast", "contrast_factor", 1),
              "adjust_sharpness": ("Sharpness", "sharpness_factor", 1)}
    if name in simple:
        tid, key, base = simple[name]
        return (tid, r4(a[key] - base))
    if name == "posterize":
        return ("Posterize", float(a["bits"]))
    if name == "solarize":
        return ("Solarize", r4(a["threshold"] / 255))
    return ({"autocontrast": "AutoContrast", "equalize": "Equalize", "invert": "Invert"}[name], 0.0)


POLICIES = {
    "TrivialAugmentWide": (lambda: T.TrivialAugmentWide(), ST.TrivialAugmentWide().to_proto()),
    "RandAugment": (lambda: T.RandAugment(), ST.RandAugment().to_proto()),
    "RandAugment-n3-m5-b11": (lambda: T.RandAugment(num_ops=3, magnitude=5, num_magnitude_bins=11),
                              ST.RandAugment(num_ops=3, magnitude=5, num_magnitude_bins=11).to_proto()),
    "AutoAugment-imagenet": (lambda: T.AutoAugment(T.AutoAugmentPolicy.IMAGENET), ST.AutoAugment().to_proto()),
    "AutoAugment-cifar10": (lambda: T.AutoAugment(T.AutoAugmentPolicy.CIFAR10),
                            ST.AutoAugment("cifar10").to_proto()),
    "AutoAugment-svhn": (lambda: T.AutoAugment(T.AutoAugmentPolicy.SVHN), ST.AutoAugment("svhn").to_proto()),
}


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_policy_choices(stoker_bin: Path, name: str) -> None:
    """Each policy's operations and magnitudes, and for RandAugment and
    AutoAugment their sequences per image, as torchvision draws them."""
    make, spec = POLICIES[name]

    def run(k: int) -> Checks:
        c = Checks()
        mine = [tuple(stoker_category(s, a) for s, a in steps)
                for steps in stoker_traces(stoker_bin, [center(), spec], N, seed=k)]
        theirs = tv_policy_record(make(), N, seed=1234 + k)
        # The operations one by one (which op at which magnitude)...
        flat_m = [x for seq in mine for x in seq]
        flat_t = [x for seq in theirs for x in seq]
        assert set(flat_m) <= set(flat_t) | {("Shear", 0.0), ("Translate", 0.0)}, \
            f"stoker drew operations torchvision never does: {sorted(set(flat_m) - set(flat_t))[:10]}"
        stat, p, df = chi2_homogeneity(flat_m, flat_t)
        c.p(f"{name}: operations and magnitudes", p, f"(chi2 {stat:.1f}, df {df})")
        # ...and the whole sequence applied to each image.
        stat, p, df = chi2_homogeneity(mine, theirs)
        c.p(f"{name}: per-image sequences", p, f"(chi2 {stat:.1f}, df {df})")
        return c

    in_band(run)


def test_augmix(stoker_bin: Path) -> None:
    """AugMix: the Beta weight of the original (KS), the chain depth (1..3,
    one chain) and the operations at severity bins (chi-square)."""

    def run(k: int) -> Checks:
        traces = stoker_traces(stoker_bin, [center(), ST.AugMix(mixture_width=1).to_proto()], N_CONT, seed=k)
        m0, depth, ops_m = [], [], []
        for steps in traces:
            names = [s for s, _ in steps]
            assert names[0] == "augmix_begin" and names[1] == "augmix_chain" and names[-1] == "augmix_end", names
            m0.append(steps[0][1]["weight"])
            assert abs(steps[0][1]["weight"] + steps[1][1]["weight"] - 1) < 1e-9, "one chain: its weight is 1 - m0"
            depth.append(len(steps) - 3)
            ops_m += [stoker_category(s, a) for s, a in steps[2:-1]]

        torch.manual_seed(99 + k)
        t = T.AugMix(mixture_width=1)
        calls: List[Tuple[str, float]] = []
        t._apply_image_or_video_transform = lambda img, tid, m, interpolation, fill: calls.append((tid, float(m))) or img
        first: List[float] = []
        orig = t._sample_dirichlet

        def dirichlet(params: torch.Tensor) -> torch.Tensor:
            out = orig(params)
            if params.shape[-1] == 2:
                first.append(float(out[0, 0]))
            return out

        t._sample_dirichlet = dirichlet
        # AugMix's draws read the image's size alone (its translations are
        # fractions of the side), but its forward mixes the pixels even with
        # its ops recorded: an image of 224x224 and no channels draws the
        # same (the same ops, magnitudes, depths and weights, seed for seed)
        # and mixes nothing.
        img = torch.zeros(0, SIDE, SIDE, dtype=torch.uint8)
        t_depth, ops_t = [], []
        for _ in range(N_CONT):
            calls.clear()
            t(img)
            t_depth.append(len(calls))
            ops_t += [tv_category(i, m) for i, m in calls]
        c = Checks()
        compare_values(c, "AugMix: the original's weight", m0, first)
        stat, p, df = chi2_homogeneity(depth, t_depth)
        c.p("AugMix: chain depth", p, f"(chi2 {stat:.1f}, df {df})")
        stat, p, df = chi2_homogeneity(ops_m, ops_t)
        c.p("AugMix: operations and severities", p, f"(chi2 {stat:.1f}, df {df})")
        return c

    in_band(run)


# -- ops with their own make_params ----------------------------------------

def test_color_jitter(stoker_bin: Path) -> None:
    """ColorJitter with hue: the order of the four adjustments (a
    permutation, chi-square) and each factor (KS)."""
    names = ["adjust_brightness", "adjust_contrast", "adjust_saturation", "adjust_hue"]
    keys = ["brightness_factor", "contrast_factor", "saturation_factor", "hue_factor"]

    def run(k: int) -> Checks:
        traces = stoker_traces(stoker_bin, [center(32), ST.ColorJitter(
            brightness=0.4, contrast=0.3, saturation=0.2, hue=0.1).to_proto()], N_CONT, source=(32, 32), seed=k)
        orders, factors = [], {key: [] for key in keys}
        for steps in traces:
            orders.append(tuple(names.index(s) for s, _ in steps))
            for (s, a) in steps:
                key = keys[names.index(s)]
                factors[key].append(a[key])
        torch.manual_seed(5 + k)
        t = T.ColorJitter(brightness=0.4, contrast=0.3, saturation=0.2, hue=0.1)
        t_orders, t_factors = [], {key: [] for key in keys}
        img = image(32, 32)  # one image for every draw: make_params reads nothing of it
        for _ in range(N_CONT):
            prm = t.make_params([img])
            t_orders.append(tuple(int(i) for i in prm["fn_idx"]))
            for key in keys:
                t_factors[key].append(prm[key])
        c = Checks()
        stat, p, df = chi2_homogeneity(orders, t_orders)
        c.p("ColorJitter: order", p, f"(chi2 {stat:.1f}, df {df})")
        for key in keys:
            compare_values(c, f"ColorJitter: {key}", factors[key], t_factors[key])
        return c

    in_band(run)


def continuous_case(stoker_bin: Path, spec: pb.Op, step: str, args: Callable[[Dict[str, Any]], Dict[str, float]],
                    tv_params: Callable[[], Dict[str, float]], seed: int, source: Tuple[int, int] = (SIDE, SIDE),
                    geometry: bool = False, rest: Sequence[pb.Op] = ()) -> None:
    """Compares each argument of a step with torchvision's make_params (KS,
    or chi-square for integers: compare_values) on a source of (w, h);
    stoker's samples without the step count as the fallback (None) outcome,
    compared by chi-square. A geometry op that does not fix the size alone
    (RandomZoomOut) is followed by rest."""
    ops = [spec, *rest] if geometry else [center(source[1], source[0]), spec]

    def run(k: int) -> Checks:
        traces = stoker_traces(stoker_bin, ops, N_CONT, source=source, skip_geometry=not geometry, seed=k)
        mine: Dict[str, List[float]] = {}
        fired = []
        for steps in traces:
            hit = [a for s, a in steps if s == step]
            fired.append(bool(hit))
            for key, v in (args(hit[0]) if hit else {}).items():
                mine.setdefault(key, []).append(v)
        torch.manual_seed(seed + 1000 * k)
        theirs: Dict[str, List[float]] = {}
        t_fired = []
        for _ in range(N_CONT):
            prm = tv_params()
            t_fired.append(bool(prm))
            for key, v in prm.items():
                theirs.setdefault(key, []).append(v)
        c = Checks()
        if not all(fired) or not all(t_fired):
            stat, p, df = chi2_homogeneity(fired, t_fired)
            c.p(f"{step}: drawn or not", p, f"(chi2 {stat:.1f}, df {df})")
        assert set(mine) == set(theirs), (sorted(mine), sorted(theirs))
        for key in sorted(mine):
            compare_values(c, f"{step}: {key}", mine[key], theirs[key])
        return c

    in_band(run)


@pytest.mark.parametrize("scale", [(0.08, 1.0), (0.0, 1.0), (0.0, 2e-6)])
def test_random_resized_crop(stoker_bin: Path, scale: Tuple[float, float]) -> None:
    """torchvision's default scale; scale=(0.0, 1.0), which torchvision
    takes (an empty area fails a try); and areas of at most 0.375 px, whose
    sides round to 0 or 1: most tries fail, and many samples fall back to
    the center crop."""
    t = T.RandomResizedCrop(224, scale=scale)
    img = image(375, 500)
    spec = ST.RandomResizedCrop(224, scale=scale).to_proto()
    continuous_case(stoker_bin, spec, "resized_crop",
                    lambda a: {k: a[k] for k in ("top", "left", "height", "width")},
                    lambda: {k: float(v) for k, v in t.make_params([img]).items() if k in ("top", "left", "height", "width")},
                    seed=11, source=(500, 375), geometry=True)


@pytest.mark.parametrize("side_range,p", [((1.0, 4.0), 0.5), ((1.0, 1.5), 0.9)])
def test_random_zoom_out(stoker_bin: Path, side_range: Tuple[float, float], p: float) -> None:
    """RandomZoomOut's padding (the canvas' size and the image's place on
    it) and whether it is drawn, against its make_params behind its p."""
    t = T.RandomZoomOut(side_range=side_range, p=p)
    img = image(375, 500)

    def theirs() -> Dict[str, float]:
        if torch.rand(1) >= t.p:
            return {}
        return dict(zip(("left", "top", "right", "bottom"), map(float, t.make_params([img])["padding"])))

    spec = ST.RandomZoomOut(side_range=side_range, p=p).to_proto()
    continuous_case(stoker_bin, spec, "pad",
                    lambda a: dict(zip(("left", "top", "right", "bottom"), map(float, a["padding"]))),
                    theirs, seed=13, source=(500, 375), geometry=True, rest=[ST.Resize((64, 64)).to_proto()])


def test_gaussian_blur_sigma(stoker_bin: Path) -> None:
    t = T.GaussianBlur(23, sigma=(0.1, 2.0))
    img = image()  # one image for every draw, not one made per draw
    continuous_case(stoker_bin, ST.GaussianBlur(23, sigma=(0.1, 2)).to_proto(),
                    "gaussian_blur", lambda a: {"sigma": a["sigma"][0]},
                    lambda: {"sigma": t.make_params([img])["sigma"][0]}, seed=12)


def test_random_rotation(stoker_bin: Path) -> None:
    t = T.RandomRotation((-30, 30))
    img = image()  # one image for every draw, not one made per draw
    continuous_case(stoker_bin, ST.RandomRotation((-30, 30)).to_proto(), "rotate",
                    lambda a: {"angle": a["angle"]}, lambda: {"angle": t.make_params([img])["angle"]}, seed=13)


def test_random_affine(stoker_bin: Path) -> None:
    t = T.RandomAffine(degrees=10, translate=(0.1, 0.2), scale=(0.8, 1.2), shear=(-5, 5, -3, 3))
    img = image()  # one image for every draw (make_params reads its size), not one made per draw

    def theirs() -> Dict[str, float]:
        prm = t.make_params([img])
        return {"angle": prm["angle"], "tx": prm["translate"][0], "ty": prm["translate"][1], "scale": prm["scale"],
                "shear_x": prm["shear"][0], "shear_y": prm["shear"][1]}

    continuous_case(stoker_bin, ST.RandomAffine(
        (-10, 10), translate=(0.1, 0.2), scale=(0.8, 1.2), shear=(-5, 5, -3, 3)).to_proto(),
        "affine", lambda a: {"angle": a["angle"], "tx": a["translate"][0], "ty": a["translate"][1], "scale": a["scale"],
                             "shear_x": a["shear"][0], "shear_y": a["shear"][1]}, theirs, seed=14)


def test_random_erasing(stoker_bin: Path) -> None:
    """The erased box, and how often no box fits (a wide ratio range on a
    small image makes torchvision's fallback frequent)."""
    t = T.RandomErasing(p=1, scale=(0.02, 0.6), ratio=(0.2, 5))
    img = image(40, 60)

    def theirs() -> Dict[str, float]:
        prm = t.make_params([img])
        return {} if prm["v"] is None else {k: float(prm[k]) for k in ("i", "j", "h", "w")}

    continuous_case(stoker_bin, ST.RandomErasing(p=1, scale=(0.02, 0.6), ratio=(0.2, 5)).to_proto(),
                    "erase", lambda a: {k: float(a[k]) for k in ("i", "j", "h", "w")}, theirs, seed=15, source=(60, 40))


# -- probabilities and containers ------------------------------------------

class Rec(torch.nn.Module):
    """A transform that only records its name."""

    def __init__(self, name: str, log: List[str]) -> None:
        super().__init__()
        self.name, self.log = name, log

    def forward(self, x: Any) -> Any:
        self.log.append(self.name)
        return x


def tv_sequences(make: Callable[[List[str]], Any], n: int, seed: int) -> List[Tuple[str, ...]]:
    log: List[str] = []
    t = make(log)
    torch.manual_seed(seed)
    img = image(8, 8)
    out = []
    for _ in range(n):
        log.clear()
        t(img)
        out.append(tuple(log))
    return out


def invert() -> ST.RandomInvert:
    return ST.RandomInvert(p=1)


def vflip() -> ST.RandomVerticalFlip:
    return ST.RandomVerticalFlip(p=1)


def gray() -> ST.Grayscale:
    return ST.Grayscale()


NAMES = {"invert": "invert", "vertical_flip": "vflip", "rgb_to_grayscale": "gray", "solarize": "solarize",
         "equalize": "equalize", "posterize": "posterize", "autocontrast": "autocontrast",
         "adjust_sharpness": "sharpness", "horizontal_flip": "hflip"}

CONTAINERS = {
    "RandomApply": (ST.RandomApply([invert(), vflip()], p=0.3).to_proto(),
                    lambda log: T.RandomApply([Rec("invert", log), Rec("vflip", log)], p=0.3)),
    "RandomChoice": (ST.RandomChoice([invert(), vflip(), gray()], p=[1, 2, 3]).to_proto(),
                     lambda log: T.RandomChoice([Rec("invert", log), Rec("vflip", log), Rec("gray", log)], p=[1, 2, 3])),
    "RandomChoice-uniform": (ST.RandomChoice([invert(), vflip(), gray()]).to_proto(),
                             lambda log: T.RandomChoice([Rec("invert", log), Rec("vflip", log), Rec("gray", log)])),
    "RandomOrder": (ST.RandomOrder([invert(), vflip(), gray()]).to_proto(),
                    lambda log: T.RandomOrder([Rec("invert", log), Rec("vflip", log), Rec("gray", log)])),
    "nested": (ST.RandomApply([ST.RandomChoice([invert(), ST.RandomOrder([vflip(), gray()])])], p=0.7).to_proto(),
               lambda log: T.RandomApply([T.RandomChoice([Rec("invert", log), T.RandomOrder([Rec("vflip", log),
                                                                                         Rec("gray", log)])])], p=0.7)),
}


@pytest.mark.parametrize("name", sorted(CONTAINERS))
def test_containers(stoker_bin: Path, name: str) -> None:
    spec, make = CONTAINERS[name]

    def run(k: int) -> Checks:
        mine = [tuple(NAMES[s] for s, _ in steps)
                for steps in stoker_traces(stoker_bin, [center(8), spec], N_CONT, source=(8, 8), seed=k)]
        theirs = tv_sequences(make, N_CONT, seed=21 + k)
        assert set(mine) == set(theirs), (sorted(set(mine)), sorted(set(theirs)))
        c = Checks()
        stat, p, df = chi2_homogeneity(mine, theirs)
        c.p(f"{name}: outcomes", p, f"(chi2 {stat:.1f}, df {df})")
        return c

    in_band(run)


def test_own_probabilities(stoker_bin: Path) -> None:
    """The ops with a p of their own fire with probability p, as
    torchvision's _RandomApplyTransform (torch.rand(1) >= p skips)."""
    cases = [
        (ST.RandomGrayscale(p=0.2).to_proto(), T.RandomGrayscale(p=0.2), "gray"),
        (ST.RandomSolarize(100, p=0.3).to_proto(), T.RandomSolarize(100, p=0.3), "solarize"),
        (ST.RandomPosterize(3, p=0.6).to_proto(), T.RandomPosterize(3, p=0.6), "posterize"),
        (ST.RandomEqualize(p=0.45).to_proto(), T.RandomEqualize(p=0.45), "equalize"),
        (ST.RandomAutocontrast(p=0.15).to_proto(), T.RandomAutocontrast(p=0.15), "autocontrast"),
        (ST.RandomAdjustSharpness(2, p=0.7).to_proto(), T.RandomAdjustSharpness(2, p=0.7), "sharpness"),
        (ST.RandomVerticalFlip(p=0.25).to_proto(), T.RandomVerticalFlip(p=0.25), "vflip"),
        (ST.RandomInvert(p=0.5).to_proto(), T.RandomInvert(p=0.5), "invert"),
    ]
    for i, (spec, t, name) in enumerate(cases):
        log: List[str] = []
        t.transform = lambda inpt, params, _log=log, _name=name: _log.append(_name) or inpt

        def run(k: int, spec: pb.Op = spec, t: Any = t, log: List[str] = log, i: int = i, name: str = name) -> Checks:
            mine = [tuple(NAMES[s] for s, _ in steps) for steps in
                    stoker_traces(stoker_bin, [center(8), spec], N_CONT, source=(8, 8), seed=10 * i + k)]
            torch.manual_seed(30 + i + 1000 * k)
            img = image(8, 8)
            theirs = []
            for _ in range(N_CONT):
                log.clear()
                t(img)
                theirs.append(tuple(log))
            c = Checks()
            stat, p, df = chi2_homogeneity(mine, theirs)
            c.p(f"{name}: fires with p", p, f"(chi2 {stat:.1f}, df {df})")
            return c

        in_band(run)


# -- timm's RandAugment ------------------------------------------------------

TIMM_INC = ["AutoContrast", "Equalize", "Invert", "Rotate", "PosterizeIncreasing", "SolarizeIncreasing",
            "SolarizeAdd", "ColorIncreasing", "ContrastIncreasing", "BrightnessIncreasing", "SharpnessIncreasing",
            "ShearX", "ShearY", "TranslateXRel", "TranslateYRel"]


TIMM_PLAIN = [n[:-len("Increasing")] if n.endswith("Increasing") else n for n in TIMM_INC]
#: timm's _RAND_WEIGHTED_0 (its order and weights).
TIMM_WEIGHTED = {"Rotate": 3, "ShearX": 2, "ShearY": 2, "TranslateXRel": 1, "TranslateYRel": 1,
                 "ColorIncreasing": .25, "SharpnessIncreasing": 0.25, "AutoContrast": 0.25, "SolarizeIncreasing": .05,
                 "SolarizeAdd": .05, "ContrastIncreasing": .05, "BrightnessIncreasing": .05, "Equalize": .05,
                 "PosterizeIncreasing": 0.05, "Invert": 0.05}


#: TIMM_WEIGHTED's names and the probabilities timm_draw hands
#: np.random.choice (w / w.sum(), computed once).
_TIMM_WEIGHTED_NAMES = list(TIMM_WEIGHTED)
_TIMM_WEIGHTED_P = np.array([TIMM_WEIGHTED[k] for k in _TIMM_WEIGHTED_NAMES])
_TIMM_WEIGHTED_P = _TIMM_WEIGHTED_P / _TIMM_WEIGHTED_P.sum()


def timm_draw(rng: random.Random, m: float = 9, mstd: float = 0.5, n: int = 2, mmax: float = 0, p: float = 0.5,
              inc: bool = True, weighted: Any = None) -> Tuple[Tuple[str, float], ...]:
    """timm's RandAugment(rand_augment_ops(m, p, transforms), n) sampling,
    transcribed from timm/data/auto_augment.py (RandAugment.__call__,
    AugmentOp.__call__ and the level functions, their clamps included): ops
    chosen with replacement (with ``weighted``, a numpy RandomState: timm's
    np.random.choice by _RAND_WEIGHTED_0 without replacement), each
    applied with probability p at magnitude gauss(m, mstd) clipped to
    [0, mmax or 10]; its level argument, as (op, argument) with stoker's
    trace's conventions. (rng.choice(space) is space[rng.randrange(len(space))],
    the same draw; the table of weights is made once.)"""
    out = []
    random_ = rng.random
    if weighted is not None:
        names = [_TIMM_WEIGHTED_NAMES[i] for i in weighted.choice(len(_TIMM_WEIGHTED_NAMES), n, replace=False,
                                                                  p=_TIMM_WEIGHTED_P)]
    else:
        space = TIMM_INC if inc else TIMM_PLAIN
        choice = rng.choice
        names = [choice(space) for _ in range(n)]
    top = mmax or 10.0
    for name in names:
        if p < 1.0 and random_() > p:
            continue
        mag = max(0.0, min(rng.gauss(m, mstd) if mstd > 0 else m, top))
        lvl = mag / 10

        if name in ("AutoContrast", "Equalize", "Invert"):
            out.append((name, 0.0))
        elif name == "Rotate":
            v = lvl * 30
            out.append((name, r4(-v if random_() > 0.5 else v)))
        elif name == "Posterize":
            bits = int(lvl * 4)
            if bits < 8:
                out.append(("Posterize", float(bits)))
        elif name == "PosterizeIncreasing":
            # timm gives 4 - int(lvl * 4), negative past m10, which PIL 13
            # refuses and PIL before it made black, as 0 bits do
            out.append(("Posterize", float(max(0, 4 - int(lvl * 4)))))
        elif name in ("Solarize", "SolarizeIncreasing"):
            thresh = min(256, int(lvl * 256))
            if name == "SolarizeIncreasing":
                thresh = 256 - thresh
            if thresh <= 255:
                out.append(("Solarize", float(thresh)))
        elif name == "SolarizeAdd":
            out.append(("SolarizeAdd", float(min(128, int(lvl * 110)))))
        elif name.endswith("Increasing"):
            v = lvl * 0.9
            out.append((name[:-len("Increasing")], r4(max(0.1, 1.0 + (-v if random_() > 0.5 else v)))))
        elif name in ("Color", "Contrast", "Brightness", "Sharpness"):
            out.append((name, r4(lvl * 1.8 + 0.1)))
        elif name in ("ShearX", "ShearY"):
            v = lvl * 0.3
            out.append((name, r4(-v if random_() > 0.5 else v)))
        else:  # TranslateXRel, TranslateYRel: a fraction of the side
            v = lvl * 0.45
            out.append((name[:-3], r4(-v if random_() > 0.5 else v)))
    return tuple(out)


#: timm_category's simple steps: the trace's step to timm's op and the
#: argument it reads.
_TIMM_TABLE = {"rotate": ("Rotate", "angle"), "posterize": ("Posterize", "bits"), "solarize": ("Solarize", "threshold"),
               "solarize_add": ("SolarizeAdd", "addition"), "adjust_saturation": ("Color", "saturation_factor"),
               "adjust_contrast": ("Contrast", "contrast_factor"), "adjust_brightness": ("Brightness", "brightness_factor"),
               "adjust_sharpness": ("Sharpness", "sharpness_factor")}
_TIMM_PLAIN_STEPS = {"autocontrast": "AutoContrast", "equalize": "Equalize", "invert": "Invert"}


def timm_category(name: str, a: Dict[str, Any]) -> Tuple[str, float]:
    if name == "affine":
        sx, sy = a["shear"]
        tx, ty = a["translate"]
        if a["center"] == [0.0, 0.0]:
            return ("ShearX", r4(math.tan(math.radians(sx)))) if sx != 0 else ("ShearY", r4(math.tan(math.radians(sy))))
        return ("TranslateX", r4(-tx / SIDE)) if tx != 0 else ("TranslateY", r4(-ty / SIDE))
    if name in _TIMM_TABLE:
        tid, key = _TIMM_TABLE[name]
        return (tid, r4(a[key]))
    return (_TIMM_PLAIN_STEPS[name], 0.0)


TIMM_CONFIGS = {
    "rand-m9-mstd0.5-inc1": {},
    # magnitudes past 10 (mmax): timm's clamps of Solarize, SolarizeAdd
    # and the increasing Posterize
    "rand-m12-mmax15-mstd0.5-inc1": dict(m=12, mmax=15),
    "rand-m14-mmax20-mstd2": dict(m=14, mmax=20, mstd=2, inc=False),
    # mmax0 is timm's default bound (magnitude_max or 10); p; inc0 is
    # increasing in timm (bool of the string "0")
    "rand-m9-mmax0-mstd1-p0.8-n3-inc0": dict(mmax=0, mstd=1, p=0.8, n=3),
    # the transform set: weighted without replacement; any other name is
    # the default set
    "rand-m9-mstd0.5-n3-tweights": dict(n=3, weighted=True),
    "rand-m7-mstd0-p1-tother": dict(m=7, mstd=0, p=1.0, inc=False),
}


@pytest.mark.parametrize("config", list(TIMM_CONFIGS))
def test_timm_rand_augment(stoker_bin: Path, config: str) -> None:
    """timm's config strings: which ops apply per image (chi-square), their
    arguments (KS, per op), and the random interpolation (half bilinear,
    half bicubic); every argument within what timm's level functions give
    (SolarizeAdd <= 128, thresholds and bits >= 0)."""
    kw = dict(TIMM_CONFIGS[config])
    weighted = kw.pop("weighted", False)
    base = 100 * list(TIMM_CONFIGS).index(config)  # each config its own seeds (the first keeps 0, 1, 2)

    def run(k: int) -> Checks:
        k += base
        traces = stoker_traces(stoker_bin, [center(), ST.TimmRandAugment(config).to_proto()], N, seed=k)
        for steps in traces:
            for s, a in steps:
                assert s != "solarize_add" or 0 <= a["addition"] <= 128, (config, s, a)
                assert s != "solarize" or 0 <= a["threshold"] <= 255, (config, s, a)
                assert s != "posterize" or 0 <= a["bits"] <= 7, (config, s, a)
        mine = [tuple(timm_category(s, a) for s, a in steps) for steps in traces]
        rng = random.Random(7 + k)
        npr = np.random.RandomState(17 + k) if weighted else None
        theirs = [timm_draw(rng, weighted=npr, **kw) for _ in range(N)]
        c = Checks()
        stat, p, df = chi2_homogeneity([tuple(n for n, _ in seq) for seq in mine],
                                       [tuple(n for n, _ in seq) for seq in theirs])
        c.p("timm RandAugment: ops applied per image", p, f"(chi2 {stat:.1f}, df {df})")
        by_m: Dict[str, List[float]] = {}
        by_t: Dict[str, List[float]] = {}
        for seq, into in ((mine, by_m), (theirs, by_t)):
            for seq1 in seq:
                for n, v in seq1:
                    into.setdefault(n, []).append(v)
        for name in sorted(by_t):
            if len(set(by_t[name])) > 1:
                compare_values(c, f"timm RandAugment: {name}'s argument", by_m[name], by_t[name])
        interps = [a["interpolation"] for steps in traces for s, a in steps if s in ("rotate", "affine")]
        stat, p, df = chi2_goodness({x: interps.count(x) for x in set(interps)}, {"bilinear": 0.5, "bicubic": 0.5})
        c.p("timm RandAugment: random interpolation", p, f"(chi2 {stat:.1f})")
        return c

    in_band(run)


# -- torchvision's policies: the magnitude bins, exactly ---------------------

def _tv_calls(t: Any, n_bins: int) -> set:
    """Every functional call policy ``t``'s _apply_image_or_video_transform
    makes for each operation, bin and sign of its augmentation space, as
    the torch in .venv computes the bins (torch.linspace on this CPU) and
    torchvision maps them (int() of a translation, 255 * a solarize
    threshold, degrees(atan()) of a shear): (op, arguments) keys."""
    import torchvision.transforms.v2._auto_augment as aa

    calls: List[Tuple[str, Any]] = []

    def recorder(name: str) -> Callable[..., Any]:
        def rec(img: Any, *args: Any, **kw: Any) -> Any:
            calls.append(_call_key(name, dict(zip(("bits",) if name == "posterize" else (), args), **kw)))
            return img
        return rec

    names = ["affine", "rotate", "adjust_brightness", "adjust_saturation", "adjust_contrast", "adjust_sharpness",
             "posterize", "solarize", "autocontrast", "equalize"]
    saved = {n: getattr(aa.F, n) for n in names}
    try:
        for n in names:
            setattr(aa.F, n, recorder(n))
        img = image()
        space = t._AUGMENTATION_SPACE
        for tid, (mags_fn, signed) in space.items():
            mags = mags_fn(n_bins, SIDE, SIDE)
            values = [float(m) for m in mags] if mags is not None and mags.ndim > 0 else [0.0]
            for m in values:
                for sign in ((1.0, -1.0) if signed else (1.0,)):
                    t._apply_image_or_video_transform(img, tid, m * sign, T.InterpolationMode.NEAREST, t._fill)
    finally:
        for n, f in saved.items():
            setattr(aa.F, n, f)
    return set(calls)


def _call_key(name: str, a: Dict[str, Any]) -> Tuple[str, Any]:
    """An op's call as a comparable key: its numeric arguments as floats."""
    keys = {"affine": ("angle", "translate", "scale", "shear", "center"), "rotate": ("angle",),
            "adjust_brightness": ("brightness_factor",), "adjust_saturation": ("saturation_factor",),
            "adjust_contrast": ("contrast_factor",), "adjust_sharpness": ("sharpness_factor",),
            "posterize": ("bits",), "solarize": ("threshold",), "autocontrast": (), "equalize": ()}[name]

    def val(v: Any) -> Any:
        if v is None:
            return None
        if isinstance(v, (list, tuple)):
            return tuple(float(x) for x in v)
        return float(v)
    return name, tuple(val(a.get(k)) for k in keys)


def _shear_to(want: set, key: Tuple[str, Any]) -> Tuple[str, Any]:
    """A traced shear as torchvision's call for the same bin: the bins are
    torch's to the bit, but the shear's degrees(atan(magnitude)) is Go's
    atan and x * 180 / pi where torchvision takes libm's atan and CPython's
    x / (pi / 180): within 2 ulp (checked here), not always the same last
    bit. Other keys are as they are."""
    name, a = key
    if name != "affine" or a[3] == (0.0, 0.0):
        return key
    for w in want:
        if w[0] == "affine" and w[1][:3] == a[:3] and w[1][4] == a[4] and all(
                x == y or (x * y > 0 and abs(x - y) <= 2 * math.ulp(y)) for x, y in zip(a[3], w[1][3])):
            return w
    return key


@pytest.mark.parametrize("bins", [31, 11, 7])
def test_trivial_augment_bins_are_torchs(stoker_bin: Path, bins: int) -> None:
    """TrivialAugmentWide's traced arguments are the calls torchvision's own
    TrivialAugmentWide makes with the bins the torch in .venv computes, to
    the bit: every traced call is one of them, and every one of them is
    drawn (the translation bins that torch's linspace puts a last bit under
    an integer, 15.999999 for 16 at bin 15 of 31, truncate as torchvision
    truncates them)."""
    want = _tv_calls(T.TrivialAugmentWide(num_magnitude_bins=bins), bins)
    traces = stoker_traces(stoker_bin, [center(), ST.TrivialAugmentWide(num_magnitude_bins=bins).to_proto()],
                           40 * len(want), seed=3)
    got = {_shear_to(want, _call_key(s, a)) for steps in traces for s, a in steps}
    assert got - want == set(), f"{len(got - want)} traced calls torchvision's TrivialAugmentWide never makes: {sorted(got - want)[:8]}"
    # the shear and translation of magnitude 0 are one affine either way
    missing = want - got
    assert missing == set(), f"{len(missing)} of torchvision's calls never drawn: {sorted(missing)[:8]}"
