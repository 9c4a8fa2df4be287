"""from_torchvision on the objects users hold, as they are: torchvision's
references' ClassificationPresetTrain (every policy with bicubic), timm's
create_transform output (train and eval), open_clip's image_transform
output and DINOv2's DataAugmentationDINO, each converted unchanged; their
draws compared with the library's own (the sampling harness of
test_parity_sampling.py: chi-square and KS within stats.in_band); and the
one-line refusals that say what to do instead.

timm is a pinned test dependency (python/requirements.txt); open_clip's
transform module, torchvision's presets.py and DINOv2's augmentations are
copied into this directory (open_clip/, classification_presets.py,
dinov2/), each with its license."""

from __future__ import annotations

import itertools
import math
import random
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
import torch
from classification_presets import ClassificationPresetEval, ClassificationPresetTrain
from dinov2.data.augmentations import DataAugmentationDINO
from open_clip.transform import image_transform
from stats import Checks, chi2_goodness, chi2_homogeneity, compare_values, in_band
from test_parity_sampling import (
    N_CONT,
    SIDE,
    center,
    continuous_case,
    image,
    r4,
    stoker_category,
    stoker_traces,
    timm_category,
    tv_category,
    tv_policy_record,
)
from timm.data import create_transform
from torchvision.transforms import InterpolationMode
from torchvision.transforms import v2 as tv2

import stoker
from helpers import assert_same_batches, loader
from stoker import transforms as T

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
OPENAI = ((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711))
BICUBIC = InterpolationMode.BICUBIC

# -- torchvision's ClassificationPresetTrain, every policy with bicubic -------

#: train.py's --auto-augment values other than none.
POLICIES = ("ra", "ta_wide", "augmix", "imagenet", "cifar10", "svhn")
#: Ten ways to build each: the backend and transforms version, with and
#: without random erasing, and without the flip.
VARIANTS = [dict(backend=b, use_v2=v, random_erase_prob=e) for b, v, e in
            itertools.product(("pil", "tensor"), (False, True), (0.0, 0.1))] + \
           [dict(backend="pil", use_v2=v, hflip_prob=0.0) for v in (False, True)]


def _policy_op(policy: str) -> T.Transform:
    if policy == "ra":
        return T.RandAugment(interpolation="bicubic")
    if policy == "ta_wide":
        return T.TrivialAugmentWide(interpolation="bicubic")
    if policy == "augmix":
        return T.AugMix(interpolation="bicubic")
    return T.AutoAugment(policy, interpolation="bicubic")


def test_classification_preset_bicubic_configurations_convert(stoker_bin: Path) -> None:
    """The 60 configurations with bicubic convert (the object itself, its
    .transforms), to the ops they are, and the server takes each spec."""
    assert len(POLICIES) * len(VARIANTS) == 60
    for policy, kw in itertools.product(POLICIES, VARIANTS):
        preset = ClassificationPresetTrain(crop_size=176, interpolation=BICUBIC, auto_augment_policy=policy, **kw)
        got = T.from_torchvision(preset)
        want = [T.RandomResizedCrop(176, interpolation="bicubic")]
        if kw.get("hflip_prob", 0.5) > 0:
            want.append(T.RandomHorizontalFlip())
        want.append(_policy_op(policy))
        if kw.get("random_erase_prob"):
            want.append(T.RandomErasing(p=0.1, value=(124, 116, 104)))
        assert got.transforms == want, (policy, kw)
        assert (got.normalize_mean, got.normalize_std) == IMAGENET
        assert got == T.from_torchvision(preset.transforms)
        # The server compiles it and draws bicubic warps.
        steps = [s for t in stoker_traces(stoker_bin, T.to_spec(got).ops, 40, source=(200, 180)) for s in t]
        warps = {a["interpolation"] for s, a in steps if s in ("rotate", "affine")}
        assert warps <= {"bicubic"}, (policy, kw, warps)
    # The eval preset, too.
    got = T.from_torchvision(ClassificationPresetEval(crop_size=224, interpolation=BICUBIC))
    assert got.transforms == [T.Resize(256, interpolation="bicubic"), T.CenterCrop(224)]


@pytest.mark.parametrize("policy", POLICIES)
def test_classification_preset_bicubic_draws(stoker_bin: Path, policy: str) -> None:
    """The bicubic policy's operations and magnitudes, and its sequences per
    image, as torchvision's own object draws them (its pixel work replaced
    by a recorder), and every warp bicubic."""
    preset = ClassificationPresetTrain(crop_size=SIDE, interpolation=BICUBIC, auto_augment_policy=policy, use_v2=True)
    tv_policy = preset.transforms.transforms[2]
    op = T.from_torchvision(preset).transforms[2]
    n = 10_000 if policy == "augmix" else 40_000

    # AugMix mixes pixels even with its ops recorded: a 32 px image keeps
    # that cheap (translations are fractions of the side, on both sides).
    side = 32 if policy == "augmix" else SIDE

    def run(k: int) -> Checks:
        traces = stoker_traces(stoker_bin, [center(side), op.to_proto()], n, source=(side, side), seed=k)
        interps = {a["interpolation"] for steps in traces for s, a in steps if s in ("rotate", "affine")}
        assert interps == {"bicubic"}, interps
        c = Checks()
        if policy == "augmix":  # the chains' operations and severities
            mine = [stoker_category(s, a) for steps in traces for s, a in steps if not s.startswith("augmix")]
            theirs = _augmix_record(tv_policy, n, 77 + k, side)
            stat, p, df = chi2_homogeneity(mine, theirs)
            c.p(f"{policy}: operations and magnitudes", p, f"(chi2 {stat:.1f}, df {df})")
            return c
        mine = [tuple(stoker_category(s, a) for s, a in steps) for steps in traces]
        theirs = tv_policy_record(tv_policy, n, seed=4321 + k)
        stat, p, df = chi2_homogeneity([x for s in mine for x in s], [x for s in theirs for x in s])
        c.p(f"{policy}: operations and magnitudes", p, f"(chi2 {stat:.1f}, df {df})")
        stat, p, df = chi2_homogeneity(mine, theirs)
        c.p(f"{policy}: per-image sequences", p, f"(chi2 {stat:.1f}, df {df})")
        return c

    in_band(run)


def _augmix_record(t: Any, n: int, seed: int, side: int) -> List[Tuple[str, float]]:
    torch.manual_seed(seed)
    calls: List[Tuple[str, float]] = []
    t._apply_image_or_video_transform = lambda img, tid, m, interpolation, fill: calls.append((tid, float(m))) or img
    # The draws read the size alone; with no channels the forward's mixing
    # of the pixels is empty (the same calls, seed for seed).
    img = torch.zeros(0, side, side, dtype=torch.uint8)
    for _ in range(n):
        t(img)
    return [tv_category(i, m) for i, m in calls]


# -- timm's create_transform ---------------------------------------------------

TIMM_TRAIN = dict(is_training=True, auto_augment="rand-m9-mstd0.5-inc1", re_prob=0.25)


def test_timm_train_converts_unchanged() -> None:
    got = T.from_torchvision(create_transform(224, **TIMM_TRAIN))
    assert got.transforms == [
        T.RandomResizedCrop(224), T.RandomHorizontalFlip(),
        T.timm_rand_augment("rand-m9-mstd0.5-inc1", interpolation="bilinear"),
        # re_mode "const" (timm's default): zeros after Normalize, the mean colour.
        T.RandomErasing(p=0.25, scale=(0.02, 1 / 3), ratio=(0.3, 1 / 0.3), value=(124, 116, 104))]
    assert (got.normalize_mean, got.normalize_std) == IMAGENET
    # color_jitter (auto_augment turns it off, as timm does), other means
    # (timm's fill is their mean colour), n, mmax and inc0 sections.
    got = T.from_torchvision(create_transform(160, is_training=True, color_jitter=0.3, mean=OPENAI[0], std=OPENAI[1]))
    assert got.transforms == [T.RandomResizedCrop(160), T.RandomHorizontalFlip(), T.ColorJitter(0.3, 0.3, 0.3)]
    # timm holds them as float32 tensors: the shortest decimals of those.
    assert got.normalize_mean == pytest.approx(OPENAI[0], rel=1e-7)
    assert got.normalize_std == pytest.approx(OPENAI[1], rel=1e-7)
    got = T.from_torchvision(create_transform(224, is_training=True, auto_augment="rand-m7-n3-mstd1-mmax10",
                                              mean=OPENAI[0], std=OPENAI[1], interpolation="bicubic"))
    assert got.transforms[2] == T.timm_rand_augment("rand-m7-n3-mstd1-mmax10", interpolation="bicubic",
                                                    fill=(123, 117, 104))
    # timm's AutoAugment policies, by the config that made them.
    for aa in ("original", "originalr", "v0", "v0r", "v0r-mstd0.5", "original-mstd1-x", "3a"):
        got = T.from_torchvision(create_transform(224, is_training=True, auto_augment=aa, mean=OPENAI[0], std=OPENAI[1]))
        want = aa.removesuffix("-x")  # a section without a digit: timm skips it
        assert got.transforms[2] == T.timm_auto_augment(want, interpolation="bilinear", fill=(123, 117, 104)), aa
    # timm's AugMix, by the config that made it (depth -1 and alpha 1 are its defaults).
    for aa, want in (("augmix-m5-w4-d2", "augmix-m5-w4-d2"), ("augmix", "augmix-m3-w3"), ("augmix-b1", "augmix-m3-w3-b1"),
                     ("augmix-a0.5-mstd0.5-x", "augmix-m3-w3-a0.5-mstd0.5")):
        got = T.from_torchvision(create_transform(224, is_training=True, auto_augment=aa, interpolation="random"))
        assert got.transforms[2] == T.timm_aug_mix(want), aa


def test_timm_random_interpolation(server: str, stoker_bin: Path) -> None:
    """interpolation='random': timm's crop draws bilinear or bicubic per
    image (random.choice), and its RandAugment per op. Converted, each
    sample's crop is the fixed-interpolation crop's, in the interpolation
    its trace names, about half of each."""
    got = T.from_torchvision(create_transform(16, is_training=True, interpolation="random",
                                              auto_augment="rand-m9-mstd0.5-inc1"))
    assert got.transforms[0] == T.RandomResizedCrop(16, interpolation="random")
    assert got.transforms[2] == T.timm_rand_augment("rand-m9-mstd0.5-inc1", interpolation=None)
    traces = stoker_traces(stoker_bin, [got.transforms[0].to_proto()], 20_000, source=(500, 375),
                           skip_geometry=False)
    interps = [steps[0][1]["interpolation"] for steps in traces]
    stat, p, df = chi2_goodness({x: interps.count(x) for x in set(interps)}, {"bilinear": 0.5, "bicubic": 0.5})
    assert 0.001 < p, (stat, p)  # fixed seeds: the same counts every run
    kw = dict(batch_size=8, seed=11, trace=True, return_indices=True)
    rnd = [T.RandomResizedCrop(16, interpolation="random")]
    with loader(server, transform=rnd, **kw) as a, \
            loader(server, transform=[T.RandomResizedCrop(16)], **kw) as b, \
            loader(server, transform=[T.RandomResizedCrop(16, interpolation="bicubic")], **kw) as c:
        seen = set()
        for ra, rb, rc in zip(a, b, c):
            for i, steps in enumerate(ra.trace):
                interp = steps[0][1]["interpolation"]
                seen.add(interp)
                want = rb if interp == "bilinear" else rc
                assert steps[0][1]["top"] == want.trace[i][0][1]["top"]
                assert torch.equal(ra[0][i], want[0][i]), (i, interp)
    assert seen == {"bilinear", "bicubic"}


@pytest.mark.parametrize("crop_pct,want", [(None, 256), (0.95, 235), (1.0, 224)])
def test_timm_eval_converts_unchanged(crop_pct, want) -> None:
    got = T.from_torchvision(create_transform(224, crop_pct=crop_pct, interpolation="bicubic"))
    assert got.transforms == [T.Resize(want, interpolation="bicubic"), T.CenterCrop(224)]
    assert (got.normalize_mean, got.normalize_std) == IMAGENET


def test_timm_deit_is_the_preset(server: str) -> None:
    """DeiT's create_transform (bicubic, re_mode pixel) converted is the
    deit preset: the same traces and batches, seed for seed (the preset's
    own parity with timm is test_parity_sampling's and the replay's)."""
    got = T.from_torchvision(create_transform(224, is_training=True, auto_augment="rand-m9-mstd0.5-inc1",
                                              interpolation="bicubic", re_prob=0.25, re_mode="pixel"))
    kw = dict(batch_size=16, seed=5, return_indices=True, trace=True)
    with loader(server, transform="deit", **kw) as a, loader(server, transform=got, **kw) as b:
        want_b, got_b = list(map(_clone, a)), list(map(_clone, b))
    assert [x[-1] for x in got_b] == [x[-1] for x in want_b]  # the traces
    assert_same_batches([x[:-1] for x in got_b], [x[:-1] for x in want_b])


def _clone(batch: Any) -> Tuple[Any, ...]:
    return (*(t.clone() for t in batch), batch.trace)


def _timm_record(ra: Any, n: int, seed: int) -> List[Tuple[Tuple[str, float], ...]]:
    """timm's own RandAugment object run n times, each op's pixel work
    replaced by a recorder of its name and level arguments."""
    calls: List[Tuple[str, float]] = []
    for aop in ra.ops:
        def rec(img: Any, *args: Any, _name: str = aop.name, **kw: Any) -> Any:
            calls.append((_name, float(args[0]) if args else 0.0))
            return img
        aop.aug_fn = rec
    random.seed(seed)
    import numpy as np
    np.random.seed(seed)
    out = []
    for _ in range(n):
        calls.clear()
        ra(None)
        seq = []
        for name, v in calls:
            base = name.removesuffix("Increasing").removesuffix("Rel")
            if base == "Solarize" and v > 255:
                continue  # a threshold past 255 changes nothing; stoker draws no step
            if base in ("AutoContrast", "Equalize", "Invert"):
                v = 0.0
            seq.append((base, r4(v)))
        out.append(tuple(seq))
    return out


def test_timm_train_draws(stoker_bin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """rand-m9-mstd0.5-inc1 as timm's own RandAugment object draws it (ops
    applied per image, chi-square; each op's argument, KS), the crop as
    timm's RandomResizedCropAndInterpolation draws it, and the erased box
    (re_prob 0.25) as timm's RandomErasing draws it."""
    tt = create_transform(SIDE, **TIMM_TRAIN)
    got = T.from_torchvision(tt)
    rrc, ra, erase = tt.transforms[0], tt.transforms[2], tt.transforms[-1]
    n = 20_000

    def run(k: int) -> Checks:
        traces = stoker_traces(stoker_bin, [center(), got.transforms[2].to_proto()], n, seed=k)
        mine = [tuple(timm_category(s, a) for s, a in steps) for steps in traces]
        assert {a["interpolation"] for t in traces for s, a in t if s in ("rotate", "affine")} == {"bilinear"}
        theirs = _timm_record(ra, n, 99 + k)
        c = Checks()
        stat, p, df = chi2_homogeneity([tuple(x for x, _ in s) for s in mine], [tuple(x for x, _ in s) for s in theirs])
        c.p("timm RandAugment: ops applied per image", p, f"(chi2 {stat:.1f}, df {df})")
        by_m: Dict[str, List[float]] = {}
        by_t: Dict[str, List[float]] = {}
        for seqs, into in ((mine, by_m), (theirs, by_t)):
            for s in seqs:
                for name, v in s:
                    into.setdefault(name, []).append(v)
        assert set(by_m) == set(by_t), (sorted(by_m), sorted(by_t))
        for name in sorted(by_t):
            if len(set(by_t[name])) > 1:
                compare_values(c, f"timm RandAugment: {name}'s argument", by_m[name], by_t[name])
        return c

    in_band(run)

    # The crop: timm's get_params (Python's random) on a 500x375 image.
    img = tv2.functional.to_pil_image(torch.zeros(3, 375, 500, dtype=torch.uint8))
    seeded = _reseeding()

    def timm_crop() -> Dict[str, float]:
        seeded()
        i, j, h, w = rrc.get_params(img, rrc.scale, rrc.ratio)
        return {"top": float(i), "left": float(j), "height": float(h), "width": float(w)}

    continuous_case(stoker_bin, got.transforms[0].to_proto(), "resized_crop",
                    lambda a: {k: a[k] for k in ("top", "left", "height", "width")}, timm_crop, seed=31,
                    source=(500, 375), geometry=True)

    # The erased box: timm's RandomErasing on a zero image of 60x40, its
    # pixels made ones to find the box.
    import timm.data.random_erasing as re_mod
    monkeypatch.setattr(re_mod, "_get_pixels", lambda per_pixel, rand_color, size, dtype=None, device=None:
                        torch.ones(size))

    def timm_box() -> Dict[str, float]:
        seeded()
        x = torch.zeros(3, 40, 60)
        erase(x)
        nz = x[0].nonzero()
        if len(nz) == 0:
            return {}
        (i, j), (i1, j1) = nz.min(0).values.tolist(), nz.max(0).values.tolist()
        return {"i": float(i), "j": float(j), "h": float(i1 - i + 1), "w": float(j1 - j + 1)}

    continuous_case(stoker_bin, got.transforms[3].to_proto(), "erase",
                    lambda a: {k: float(a[k]) for k in ("i", "j", "h", "w")}, timm_box, seed=32, source=(60, 40))


def _timm_aa_record(aa: Any, n: int, seed: int) -> List[Tuple[Tuple[str, float], ...]]:
    """timm's own AutoAugment object run n times, each op's pixel work
    replaced by a recorder of its name and level arguments."""
    from PIL import Image
    import timm.data.auto_augment as taa

    calls: List[Tuple[str, float]] = []
    tiny = Image.new("RGB", (4, 4))
    radii: List[float] = []
    # GaussianBlurRand draws its radius inside its op: timm's own function,
    # on a tiny image, with PIL's GaussianBlur recording the radius.
    pil_filter = taa.ImageFilter

    class Filters:
        @staticmethod
        def GaussianBlur(radius: float) -> Any:
            radii.append(radius)
            return pil_filter.GaussianBlur(radius)
    for sub in aa.policy:
        for aop in sub:
            def rec(img: Any, *args: Any, _name: str = aop.name, **kw: Any) -> Any:
                if _name == "GaussianBlurRand":
                    taa.ImageFilter = Filters
                    try:
                        taa.gaussian_blur_rand(tiny, *args)
                    finally:
                        taa.ImageFilter = pil_filter
                    calls.append((_name, radii[-1]))
                elif _name == "Desaturate":  # desaturate's ImageEnhance.Color factor
                    calls.append(("Color", min(1.0, max(0.0, 1.0 - float(args[0])))))
                else:
                    calls.append((_name, float(args[0]) if args else 0.0))
                return img
            aop.aug_fn = rec
    random.seed(seed)
    out = []
    for _ in range(n):
        calls.clear()
        aa(None)
        seq = []
        for name, v in calls:
            base = name.removesuffix("Increasing").removesuffix("Original").removesuffix("Rel")
            if (base == "Solarize" and v > 255) or (base == "Posterize" and v >= 8):
                continue  # no change in timm; stoker draws no step
            if base in ("AutoContrast", "Equalize", "Invert"):
                v = 0.0
            seq.append((base, r4(v)))
        out.append(tuple(seq))
    return out


@pytest.mark.parametrize("config,interp", [("original", "bilinear"), ("originalr", "bicubic"), ("v0", "bilinear"),
                                           ("v0r-mstd0.5", "random"), ("3a", "bilinear"), ("3a-mstd1", "bilinear")])
def test_timm_auto_augment_draws(stoker_bin: Path, config: str, interp: str) -> None:
    """timm's AutoAugment from create_transform, converted to
    TimmAutoAugment with the config that made it, draws as timm's own object
    does: per image, the sequence of ops applied with their arguments
    (chi-square; with mstd, the sequence of ops and then each op's argument,
    KS or chi-square), its resampling as timm's (a random choice of
    bilinear and bicubic per op for 'random')."""
    tt = create_transform(SIDE, is_training=True, auto_augment=config, interpolation=interp)
    aa = tt.transforms[2]
    got = T.from_torchvision(tt).transforms[2]
    assert got == T.timm_auto_augment(config, interpolation=None if interp == "random" else interp)
    n = 20_000

    def run(k: int) -> Checks:
        traces = stoker_traces(stoker_bin, [center(), got.to_proto()], n, seed=k)
        interps = {a["interpolation"] for t in traces for s, a in t if s in ("rotate", "affine")}
        assert interps == ({"bilinear", "bicubic"} if interp == "random" else {interp} if "3a" not in config
                           else set()), interps
        mine = [tuple(("GaussianBlurRand", r4(a["sigma"][0])) if s == "gaussian_blur" else timm_category(s, a)
                      for s, a in steps) for steps in traces]
        theirs = _timm_aa_record(aa, n, 71 + k)
        c = Checks()
        if "mstd" not in config and config != "3a":  # 3a's blur radius is continuous
            stat, p, df = chi2_homogeneity(mine, theirs)
            c.p(f"timm AutoAugment {config}: per-image sequences", p, f"(chi2 {stat:.1f}, df {df})")
            return c
        stat, p, df = chi2_homogeneity([tuple(x for x, _ in s) for s in mine], [tuple(x for x, _ in s) for s in theirs])
        c.p(f"timm AutoAugment {config}: ops applied per image", p, f"(chi2 {stat:.1f}, df {df})")
        by_m: Dict[str, List[float]] = {}
        by_t: Dict[str, List[float]] = {}
        for seqs, into in ((mine, by_m), (theirs, by_t)):
            for s in seqs:
                for name, v in s:
                    into.setdefault(name, []).append(v)
        assert set(by_m) == set(by_t), (sorted(by_m), sorted(by_t))
        for name in sorted(by_t):
            if len(set(by_t[name])) > 1:
                compare_values(c, f"timm AutoAugment {config}: {name}'s argument", by_m[name], by_t[name])
        return c

    in_band(run)


def _timm_augmix_record(t: Any, n: int, seed: int) -> Tuple[List[Tuple[str, float]], List[int], List[float], List[float]]:
    """timm's own AugMixAugment object run n times on a 4 px image, each
    op's pixel work replaced by a recorder: the ops applied with their
    arguments, the ops per chain (a chain starts where an op is given
    another image than the last op's result), the first chain's weight
    (blended: its blend's, _calc_blended_weights') and the blend's m."""
    from PIL import Image

    img = Image.new("RGB", (4, 4))
    calls: List[Tuple[str, float]] = []
    chains: List[int] = []
    last: List[Any] = [None]
    for aop in t.ops:
        def rec(x: Any, *args: Any, _name: str = aop.name, **kw: Any) -> Any:
            if x is not last[0]:
                chains.append(0)
            base = _name.removesuffix("Increasing").removesuffix("Rel")
            v = float(args[0]) if args else 0.0
            if not ((base == "Solarize" and v > 255) or (base == "Posterize" and v >= 8)):
                calls.append((base, 0.0 if base in ("AutoContrast", "Equalize") else r4(v)))
                chains[-1] += 1
            last[0] = x.copy()
            return last[0]
        aop.aug_fn = rec
    weights: List[float] = []
    ms: List[float] = []
    basic = t._apply_basic

    def apply(x: Any, mw: Any, m: Any) -> Any:
        weights.append(float(mw[0]))
        ms.append(float(m))
        return basic(x, mw, m)
    t._apply_basic = apply
    blended = t._calc_blended_weights

    def folds(mw: Any, m: Any) -> Any:
        out = blended(mw, m)
        weights.append(float(out[0]))
        ms.append(float(m))
        return out
    t._calc_blended_weights = folds
    random.seed(seed)
    import numpy as np
    np.random.seed(seed)
    for _ in range(n):
        t(img)
    return calls, chains, weights, ms


@pytest.mark.parametrize("config,interp", [("augmix-m5-w4-d2", "bilinear"), ("augmix", "random"),
                                           ("augmix-m9-w2-a0.5-mstd1", "bicubic"), ("augmix-m3-w3-b1", "bilinear")])
def test_timm_aug_mix_draws(stoker_bin: Path, config: str, interp: str) -> None:
    """timm's AugMix from create_transform, converted to TimmAugMix with the
    config that made it, draws as timm's own object does: the ops applied
    and each one's argument (uniform magnitudes in [0, m] by default, or m
    with mstd noise), the ops per chain (d, or 1..3), the Dirichlet weight
    of a chain and the Beta weight of the blend (KS), and its resampling.
    translate_pct is create_transform's 0.3 for AugMix: TranslateX's
    argument says so."""
    tt = create_transform(SIDE, is_training=True, auto_augment=config, interpolation=interp)
    t = tt.transforms[2]
    got = T.from_torchvision(tt).transforms[2]
    assert got == T.timm_aug_mix(config if config != "augmix" else "augmix-m3-w3",
                                 interpolation=None if interp == "random" else interp)
    blended = config.endswith("-b1")
    n = 5_000

    def run(k: int) -> Checks:
        traces = stoker_traces(stoker_bin, [center(), got.to_proto()], n, seed=k)
        interps = {a["interpolation"] for tr in traces for s, a in tr if s in ("rotate", "affine")}
        assert interps == ({"bilinear", "bicubic"} if interp == "random" else {interp}), interps
        mine: List[Tuple[str, float]] = []
        chains: List[int] = []
        weights: List[float] = []
        ms: List[float] = []
        for steps in traces:
            assert steps[0] == ("augmix_begin", {"weight": 0.0}), steps
            if blended:  # a fold after each chain, the first one's weight compared
                assert steps[-1][0] == "augmix_fold", steps
                weights.append(next(a["weight"] for s, a in steps if s == "augmix_fold"))
                body = steps[1:]
            else:
                assert steps[-2][0] == "augmix_end" and steps[-1][0] == "augmix_blend", steps
                ms.append(steps[-1][1]["weight"])
                body = steps[1:-2]
            first = True
            for s, a in body:
                if s == "augmix_fold":
                    continue
                if s == "augmix_chain":
                    chains.append(0)
                    if first and not blended:
                        weights.append(a["weight"])
                        first = False
                    continue
                x = timm_category(s, a)
                mine.append(("Translate" + x[0][-1], x[1]) if x[0].startswith("Translate") else x)
                chains[-1] += 1
        theirs, t_chains, t_weights, t_ms = _timm_augmix_record(t, n, 77 + k)
        c = Checks()
        stat, p, df = chi2_homogeneity([x for x, _ in mine], [x for x, _ in theirs])
        c.p(f"timm AugMix {config}: ops", p, f"(chi2 {stat:.1f}, df {df})")
        stat, p, df = chi2_homogeneity(chains, t_chains)
        c.p(f"timm AugMix {config}: ops per chain", p, f"(chi2 {stat:.1f}, df {df})")
        by_m: Dict[str, List[float]] = {}
        by_t: Dict[str, List[float]] = {}
        for seq, into in ((mine, by_m), (theirs, by_t)):
            for name, v in seq:
                into.setdefault(name, []).append(v)
        assert set(by_m) == set(by_t), (sorted(by_m), sorted(by_t))
        # One op of each level function (the others share them, compared
        # for RandAugment and AutoAugment above): fewer checks, fewer
        # p-values out of the band by chance.
        for name in ("Rotate", "Posterize", "Solarize", "Color", "TranslateX"):
            compare_values(c, f"timm AugMix {config}: {name}'s argument", by_m[name], by_t[name])
        compare_values(c, f"timm AugMix {config}: a chain's weight", weights, t_weights)
        if not blended:  # blended, m is in the folds' weights
            compare_values(c, f"timm AugMix {config}: the blend's m", ms, t_ms)
        return c

    in_band(run)


ERASING = [("rand", 1), ("rand", 4), ("const", 3), ("pixel", 2)]


@pytest.mark.parametrize("mode,count", ERASING)
def test_timm_erasing_draws(stoker_bin: Path, monkeypatch: pytest.MonkeyPatch, mode: str, count: int) -> None:
    """timm's RandomErasing with re_mode and re_count as its own object
    draws it: how many boxes per image (timm: randint(1, re_count)), each
    box's top, left, height and width (each box its own ten tries at an
    area divided by the count), and for mode 'rand' each box's colour per
    channel, timm's normal value as the pixel that normalizes to it
    (round(255 * (mean + std * z)), clamped); 'const' writes the mean
    colour, 'pixel' per-pixel noise."""
    tt = create_transform(SIDE, is_training=True, re_prob=0.7, re_mode=mode, re_count=count)
    erase = tt.transforms[-1]
    got = T.from_torchvision(tt).transforms[-1]
    assert (got.count, got.per_box) == ((1, count) if count > 1 else 1, mode == "rand")
    assert got.value == ("random" if mode != "const" else (124, 116, 104))
    import timm.data.random_erasing as re_mod
    real = re_mod._get_pixels
    colours: List[List[float]] = []

    def pixels(per_pixel: bool, rand_color: bool, size: Any, dtype: Any = None, device: Any = None) -> Any:
        v = real(per_pixel, rand_color, size, dtype=dtype, device="cpu")
        if rand_color:
            colours.append([min(255.0, max(0.0, math.floor(255 * (m + s * float(z)) + 0.5)))
                            for m, s, z in zip(IMAGENET[0], IMAGENET[1], v.flatten().tolist())])
        return v
    monkeypatch.setattr(re_mod, "_get_pixels", pixels)

    class Boxes:
        """An image that records where timm writes."""

        def __init__(self) -> None:
            self.boxes: List[Tuple[int, int, int, int]] = []

        def __setitem__(self, key: Any, value: Any) -> None:
            _, rows, cols = key
            self.boxes.append((rows.start, cols.start, rows.stop - rows.start, cols.stop - cols.start))

    w, h = 60, 40
    n = 20_000

    def run(k: int) -> Checks:
        traces = stoker_traces(stoker_bin, [center(h, w), got.to_proto()], n, source=(w, h), seed=k)
        random.seed(555 + k)
        torch.manual_seed(555 + k)
        colours.clear()
        theirs = []
        for _ in range(n):
            img = Boxes()
            erase._erase(img, 3, h, w, torch.float32)
            theirs.append(img.boxes)
        c = Checks()
        mine = [[a for s, a in steps if s == "erase"] for steps in traces]
        stat, p, df = chi2_homogeneity([len(b) for b in mine], [len(b) for b in theirs])
        c.p("boxes per image", p, f"(chi2 {stat:.1f}, df {df})")
        for x, key in enumerate(("i", "j", "h", "w")):
            compare_values(c, f"box {key}", [float(a[key]) for b in mine for a in b],
                           [float(t[x]) for b in theirs for t in b])
        values = [a["v"] for b in mine for a in b]
        if mode == "rand":
            assert len(colours) == sum(len(b) for b in theirs)
            for ch in range(3):
                compare_values(c, f"colour channel {ch}", [float(v[ch]) for v in values], [v[ch] for v in colours])
        else:
            assert {str(v) for v in values} == {"random" if mode == "pixel" else "[124.0, 116.0, 104.0]"}, set(map(str, values))
        return c

    in_band(run)


def _reseeding():
    """Seeds Python's random from torch's seed whenever continuous_case
    sets a new one (timm draws with random, torchvision with torch)."""
    last = [None]

    def f() -> None:
        s = torch.initial_seed()
        if s != last[0]:
            last[0] = s
            random.seed(s)
    return f


# -- open_clip ------------------------------------------------------------------

def test_open_clip_converts_unchanged() -> None:
    got = T.from_torchvision(image_transform(224, is_train=True))
    assert got.transforms == [T.RandomResizedCrop(224, scale=(0.9, 1.0), interpolation="bicubic")]
    assert (got.normalize_mean, got.normalize_std) == OPENAI
    got = T.from_torchvision(image_transform(224, is_train=False))
    assert got.transforms == [T.Resize(224, interpolation="bicubic"), T.CenterCrop(224)]
    # Its SimCLR-style jitter and grayscale, with their own probabilities.
    got = T.from_torchvision(image_transform(224, is_train=True, aug_cfg=dict(
        color_jitter_prob=0.8, color_jitter=(0.4, 0.4, 0.4, 0.1), gray_scale_prob=0.2)))
    assert got.transforms[1:] == [T.RandomApply([T.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8), T.RandomGrayscale(0.2)]
    # With timm (aug_cfg use_timm): timm's create_transform, re_mode pixel.
    got = T.from_torchvision(image_transform(224, is_train=True, aug_cfg=dict(use_timm=True, re_prob=0.3)))
    e = got.transforms[-1]
    assert (e.p, e.scale, e.ratio, e.value) == (0.3, (0.02, 1 / 3), (0.3, 1 / 0.3), "random")
    assert e.noise_mean == pytest.approx(OPENAI[0], rel=1e-7) and e.noise_std == pytest.approx(OPENAI[1], rel=1e-7)
    # Its older _convert_to_rgb, by module and name.
    from open_clip import transform as oc
    got = T.from_torchvision(tv2.Compose([tv2.RandomResizedCrop(224), oc._convert_to_rgb, tv2.ToTensor()]))
    assert got.transforms == [T.RandomResizedCrop(224)]


def test_open_clip_draws(stoker_bin: Path) -> None:
    """open_clip's crop (scale 0.9..1, bicubic) as its own object draws it."""
    t = image_transform(224, is_train=True).transforms[0]
    got = T.from_torchvision(image_transform(224, is_train=True))
    img = image(375, 500)
    continuous_case(stoker_bin, got.transforms[0].to_proto(), "resized_crop",
                    lambda a: {k: a[k] for k in ("top", "left", "height", "width")},
                    lambda: dict(zip(("top", "left", "height", "width"),
                                     map(float, t.get_params(img, t.scale, t.ratio)))),
                    seed=33, source=(500, 375), geometry=True)


# -- DINOv2 ----------------------------------------------------------------------

def test_dinov2_object_is_its_views(server: str) -> None:
    """DataAugmentationDINO (DINOv2's train config: global crops scale
    0.32..1, local 0.05..0.32, 8 local crops) as the MultiView of its crops,
    each view's ops its own; the server makes its 10 views."""
    aug = DataAugmentationDINO((0.32, 1.0), (0.05, 0.32), 8)
    got = T.from_torchvision(aug)
    assert isinstance(got, T.MultiView) and got.views == 10
    assert (got.normalize_mean, got.normalize_std) == IMAGENET
    # torchvision keeps ColorJitter(0.4, 0.4, 0.2, 0.1) as its ranges.
    jitter = [T.RandomHorizontalFlip(),
              T.RandomApply([T.ColorJitter((0.6, 1.4), (0.6, 1.4), (0.8, 1.2), (-0.1, 0.1))], p=0.8),
              T.RandomGrayscale(0.2)]
    blur = T.GaussianBlur(9, (0.1, 2.0))
    want = T.MultiView([
        ("global", 1, [T.RandomResizedCrop(224, scale=(0.32, 1), interpolation="bicubic"), *jitter,
                       T.RandomApply([blur], p=0.0)]),  # DINOv2's GaussianBlur(p=1.0) keeps with p 1: never blurs
        ("global", 1, [T.RandomResizedCrop(224, scale=(0.32, 1), interpolation="bicubic"), *jitter,
                       T.RandomApply([blur], p=0.9), T.RandomSolarize(128, p=0.2)]),
        ("local", 8, [T.RandomResizedCrop(96, scale=(0.05, 0.32), interpolation="bicubic"), *jitter,
                      T.RandomApply([blur], p=0.5)])])
    assert got == want
    with loader(server, transform=got, batch_size=4) as ld:
        views, labels = next(iter(ld))
    assert [tuple(v.shape) for v in views] == [(4, 3, 224, 224)] * 2 + [(4, 3, 96, 96)] * 8
    # It is the dinov2 preset: the same views, seed for seed.
    kw = dict(batch_size=4, seed=3, trace=True)
    with loader(server, transform="dinov2", **kw) as a, loader(server, transform=got, **kw) as b:
        want, mine = next(iter(a)), next(iter(b))
        assert mine.trace == want.trace and mine.trace
        assert len(mine[0]) == len(want[0]) == 10
        for x, y in zip(mine[0], want[0]):
            assert torch.equal(x, y)


# -- every object runs on the server -----------------------------------------------

def test_objects_run(server: str) -> None:
    objs = [ClassificationPresetTrain(crop_size=16, interpolation=BICUBIC, auto_augment_policy=p) for p in POLICIES]
    objs += [create_transform(16, **TIMM_TRAIN), create_transform(16), image_transform(16, is_train=True),
             create_transform(16, is_training=True, auto_augment="v0r-mstd0.5", re_prob=0.5, re_mode="rand", re_count=3),
             create_transform(16, is_training=True, auto_augment="augmix-m5-w4-d2")]
    for obj in objs:
        with loader(server, transform=T.from_torchvision(obj), batch_size=8) as ld:
            images, labels = next(iter(ld))
        assert images.shape == (8, 3, 16, 16) and images.dtype == torch.uint8


# -- refusals: one line, naming the object and the answer -------------------------

REFUSALS = [
    (lambda: [tv2.RandomResizedCrop(8), tv2.MixUp(num_classes=10)],
     r"^op 1 \(MixUp\) mixes samples of a batch: stoker's batches are mixed on the GPU, with stoker\.gpu\.MixUp"),
    (lambda: [tv2.RandomResizedCrop(8), tv2.CutMix(num_classes=10)], r"^op 1 \(CutMix\) .*stoker\.gpu\.CutMix"),
    (lambda: [tv2.RandomResizedCrop(8), tv2.RandomChoice([tv2.MixUp(num_classes=10), tv2.CutMix(num_classes=10)])],
     r"^op 1 \(RandomChoice\) of MixUp, CutMix .*stoker\.gpu\.RandomChoice\(\[stoker\.gpu\.MixUp"),
    (lambda: create_transform(224, is_training=True, auto_augment="augmix-m5-w17"),
     r"^op 2 \(AugMixAugment\): config 'augmix-m5-w17': w17: want w an integer 1\.\.16$"),
    (lambda: create_transform(224, is_training=True, re_prob=0.25, re_count=17),
     r"^op 5 \(RandomErasing\): count \(1, 17\): stoker erases 1 <= min_count <= max_count <= 16 boxes$"),
    (lambda: create_transform(224, is_training=True, auto_augment="rand-m9-tweights"),
     r"^op 2 \(RandAugment\): a weighted op choice"),
    (lambda: create_transform(224, is_training=True, auto_augment="rand-m9-t3a"),
     r"^op 2 \(RandAugment\): the op set \['SolarizeIncreasing', 'Desaturate', 'GaussianBlur'\] is not timm's "),
    (lambda: [tv2.RandomResizedCrop(8), tv2.Lambda(lambda x: x)],
     r"^op 1 \(Lambda\) is not supported by stoker: stoker decodes every image to 3-channel RGB"),
]


@pytest.mark.parametrize("make,want", REFUSALS, ids=lambda x: None)
def test_refusals_are_one_line_with_the_answer(make, want) -> None:
    with pytest.raises(ValueError, match=want) as e:
        T.from_torchvision(make())
    msg = str(e.value)
    assert "\n" not in msg and len(msg) < 300, msg
    assert "supported: Compose" not in msg  # not the list of every name


def test_normalize_on_pixels_is_refused() -> None:
    """open_clip's pipeline with its MaybeToTensor taken out (what the old
    refusal told users to do) leaves a Normalize on a PIL image: refused,
    where it was silently rescaled by 255 (a 128 pixel became 474.7)."""
    t = image_transform(224, is_train=True)
    ops = [x for x in t.transforms if type(x).__name__ != "MaybeToTensor"]
    with pytest.raises(ValueError, match=r"^op 2 \(Normalize\) would act on a PIL image \(torchvision refuses it: "
                                         r"Normalize wants floats\): put ToTensor.* before it$"):
        T.from_torchvision(ops)
    # With ToDtype(float) without scaling, Normalize acts on 0..255 floats:
    # exact, and stoker.normalize gives what torchvision computes.
    tv = tv2.Compose([tv2.CenterCrop(8), tv2.PILToTensor(), tv2.ToDtype(torch.float32),
                      tv2.Normalize([128.0, 100.0, 50.0], [64.0, 32.0, 16.0])])
    got = T.from_torchvision(tv)
    x = torch.full((1, 3, 8, 8), 128, dtype=torch.uint8)
    want = tv2.Normalize([128.0, 100.0, 50.0], [64.0, 32.0, 16.0])(x.float())
    out = stoker.normalize(x, got.normalize_mean, got.normalize_std)
    assert torch.allclose(out, want, atol=1e-5), (out[0, :, 0, 0], want[0, :, 0, 0])
    assert math.isclose(float(out[0, 0, 0, 0]), 0.0, abs_tol=1e-6)


# -- the converted objects' samples replayed through torchvision ---------------------

@pytest.mark.parametrize("name", ["timm-train", "timm-erasing", "timm-autoaugment", "timm-augmix", "bicubic-policies"])
def test_replay(server: str, stoker_bin: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """test_parity_replay's harness on the converted objects: each sample's
    trace, run by stoker's kernels, is the sample; each step, run by
    torchvision's functional op (bicubic warps: torchvision's tensor path
    with its check lifted, as for timm's RandAugment), is stoker's step
    within the kernels' tolerance."""
    import test_parity_replay as R

    if name == "timm-train":
        ops = T.to_spec(T.from_torchvision(create_transform(96, **TIMM_TRAIN))).ops
    elif name == "timm-autoaugment":  # every AutoAugment policy, one after another
        ops = [T.RandomResizedCrop(96, interpolation="bicubic").to_proto()]
        ops += [T.from_torchvision(create_transform(96, is_training=True, auto_augment=aa, interpolation=i)).transforms[2]
                .to_proto() for aa, i in (("original", "bilinear"), ("originalr", "random"), ("v0-mstd0.5", "bicubic"),
                                          ("v0r", "bilinear"), ("3a-mstd1", "bilinear"))]
    elif name == "timm-augmix":
        ops = [T.RandomResizedCrop(96).to_proto()]
        ops += [T.from_torchvision(create_transform(96, is_training=True, auto_augment=aa, interpolation="bilinear"))
                .transforms[2].to_proto() for aa in ("augmix-m5-w4-d2", "augmix-m3-w3-b1")]
    elif name == "timm-erasing":  # re_mode 'rand': each box's colour is in its trace, replayed exactly
        ops = T.to_spec(T.from_torchvision(create_transform(96, is_training=True, re_prob=0.9, re_mode="rand",
                                                            re_count=3))).ops
    else:
        ops = [T.RandomResizedCrop(64, interpolation="bicubic").to_proto()]
        ops += [T.from_torchvision(ClassificationPresetTrain(crop_size=64, interpolation=BICUBIC,
                                                             auto_augment_policy=p)).transforms[2].to_proto()
                for p in ("ta_wide", "ra", "imagenet", "augmix")]
    monkeypatch.setitem(R.RECIPES, name, list(ops))
    R.test_replay(server, stoker_bin, name)
